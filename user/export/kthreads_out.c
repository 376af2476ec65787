// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <inttypes.h>
#include "export/kthreads_out.h"
#include "lib/escape.h"
#include "lib/units.h"

#define BY_BITS (KTHREAD_BY_MM | KTHREAD_BY_MEMCG | KTHREAD_BY_RSS)

/* "mm+memcg": how the row's job was named. */
static void by_text(uint32_t by, char *buf, size_t len)
{
	uint32_t bit;
	size_t off = 0;

	buf[0] = '\0';
	for (bit = 1; bit && off < len; bit <<= 1)
		if (by & bit & BY_BITS)
			off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? "+" : "",
						kthreads__by_name(bit));
}

/* The memory cgroup as a reader finds it: its path, or its id once gone. */
static void cgroup_text(const struct kthread_row *r, char *buf, size_t len)
{
	char esc[ESC_TERM_LEN(KTHREAD_CGROUP_LEN)];

	if (r->cgroup_path[0])
		snprintf(buf, len, "%s", esc__term(r->cgroup_path, esc, sizeof(esc)));
	else
		snprintf(buf, len, "cgroup id %" PRIu64, r->cgroup);
}

/* "4567 alloc_mix +1 in /job by mm+memcg", "/job by memcg", or "-". */
static void who_text(const struct kthread_row *r, char *buf, size_t len)
{
	char fc[ESC_TERM_LEN(TASK_COMM_LEN)], by[32], cg[ESC_TERM_LEN(KTHREAD_CGROUP_LEN) + 32];
	char more[16] = "";
	int off = 0;

	if (!r->by) {
		snprintf(buf, len, "-");
		return;
	}
	by_text(r->by, by, sizeof(by));
	if (r->cgroup)
		cgroup_text(r, cg, sizeof(cg));
	if (r->n_jobs > 1)
		snprintf(more, sizeof(more), " +%u", r->n_jobs - 1);
	if (r->tgid)
		off = snprintf(buf, len, "%u %s%s%s ", r->tgid,
			       r->for_comm[0] ? esc__term(r->for_comm, fc, sizeof(fc)) : "?",
			       r->exited ? " (exited)" : "", more);
	if (off >= 0 && (size_t)off < len)
		snprintf(buf + off, len - off, "%s%s%sby %s", r->cgroup ? "in " : "",
			 r->cgroup ? cg : "", r->cgroup ? " " : "", by);
}

void export_kthreads_text(const struct kthread_row *rows, size_t n, size_t max, FILE *f)
{
	char b[16], who[ESC_TERM_LEN(KTHREAD_CGROUP_LEN) + 128];
	char comm[ESC_TERM_LEN(TASK_COMM_LEN)];
	size_t i;

	if (!n)
		return;
	fprintf(f, "\n%-7s %-16s %9s  %-36s  %s\n", "PID", "KERNEL THREAD", "TAKEN", "FOR",
		"WHAT IT DOES");
	for (i = 0; i < n && i < max; i++) {
		who_text(&rows[i], who, sizeof(who));
		fprintf(f, "%-7u %-16s %9s  ", rows[i].pid,
			esc__term(rows[i].comm, comm, sizeof(comm)),
			fmt_bytes(rows[i].bytes, b, sizeof(b)));
		/* no blanks at the line's end when the role is not known */
		if (*rows[i].role)
			fprintf(f, "%-36s  %s\n", who, rows[i].role);
		else
			fprintf(f, "%s\n", who);
	}
}

static void json_by(const struct kthread_row *r, FILE *f)
{
	uint32_t bit;
	bool first = true;

	fputs(",\"by\":[", f);
	for (bit = 1; bit; bit <<= 1) {
		if (!(r->by & bit & BY_BITS))
			continue;
		fprintf(f, "%s\"%s\"", first ? "" : ",", kthreads__by_name(bit));
		first = false;
	}
	fputc(']', f);
}

void export_kthreads_json(const struct kthread_row *rows, size_t n, FILE *f)
{
	size_t i;

	for (i = 0; i < n; i++) {
		const struct kthread_row *r = &rows[i];

		fprintf(f, "{\"event\":\"kernel_thread\",\"pid\":%u,\"comm\":", r->pid);
		json__string(f, r->comm);
		fputs(",\"role\":", f);
		json__string(f, r->role);
		fprintf(f, ",\"host_bytes\":%llu,\"for_pid\":%u,\"for_comm\":",
			(unsigned long long)r->bytes, r->tgid);
		json__string(f, r->for_comm);
		fprintf(f, ",\"for_exited\":%s", r->exited ? "true" : "false");
		json_by(r, f);
		fprintf(f, ",\"mm_bytes\":%llu,\"memcg_bytes\":%llu,\"rss_bytes\":%llu",
			(unsigned long long)r->by_bytes[UMT_KTHREAD_BY_MM],
			(unsigned long long)r->by_bytes[UMT_KTHREAD_BY_MEMCG],
			(unsigned long long)r->by_bytes[UMT_KTHREAD_BY_RSS]);
		fprintf(f, ",\"for_cgroup_id\":%" PRIu64 ",\"for_cgroup\":", r->cgroup);
		json__string(f, r->cgroup_path);
		fprintf(f, ",\"cgroup_jobs\":%u}\n", r->n_jobs);
	}
}
