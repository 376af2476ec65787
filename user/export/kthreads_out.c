// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "export/kthreads_out.h"
#include "lib/escape.h"
#include "lib/units.h"

void export_kthreads_text(const struct kthread_row *rows, size_t n, size_t max, FILE *f)
{
	char b[16], who[ESC_TERM_LEN(TASK_COMM_LEN) + 16];
	char comm[ESC_TERM_LEN(TASK_COMM_LEN)], fc[ESC_TERM_LEN(TASK_COMM_LEN)];
	size_t i;

	if (!n)
		return;
	fprintf(f, "\n%-7s %-16s %9s  %s\n", "PID", "KERNEL THREAD", "TAKEN", "FOR");
	for (i = 0; i < n && i < max; i++) {
		if (rows[i].tgid)
			snprintf(who, sizeof(who), "%u %s", rows[i].tgid,
				 rows[i].for_comm[0] ? esc__term(rows[i].for_comm, fc, sizeof(fc)) :
				 "(exited)");
		else
			snprintf(who, sizeof(who), "-");
		fprintf(f, "%-7u %-16s %9s  %s\n", rows[i].pid,
			esc__term(rows[i].comm, comm, sizeof(comm)),
			fmt_bytes(rows[i].bytes, b, sizeof(b)), who);
	}
}

void export_kthreads_json(const struct kthread_row *rows, size_t n, FILE *f)
{
	size_t i;

	for (i = 0; i < n; i++) {
		fprintf(f, "{\"event\":\"kernel_thread\",\"pid\":%u,\"comm\":", rows[i].pid);
		json__string(f, rows[i].comm);
		fprintf(f, ",\"host_bytes\":%llu,\"for_pid\":%u,\"for_comm\":",
			(unsigned long long)rows[i].bytes, rows[i].tgid);
		json__string(f, rows[i].for_comm);
		fputs("}\n", f);
	}
}
