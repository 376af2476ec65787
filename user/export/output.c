// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <time.h>
#include "export/output.h"
#include "lib/escape.h"
#include "lib/sys.h"
#include "lib/units.h"
#include "model/cuda_api.h"

void output__clock_init(struct output_clock *c)
{
	c->realtime_minus_mono_ns = (int64_t)clock__ns_of(CLOCK_REALTIME) -
				    (int64_t)clock__mono_ns();
	c->page_size = page__size();
}

const char *output__end_name(uint32_t end)
{
	switch (end) {
	case UMT_END_RETURNED: return "returned";
	case UMT_END_EXITED: return "exited";
	case UMT_END_EXECED: return "execed";
	case UMT_END_LOST_RETURN: return "lost-return";
	}
	return "unknown";
}

void output__call_header(FILE *f)
{
	fprintf(f, "%-12s %-7s %-7s %-15s %-24s %8s %-14s %5s %9s %8s %8s\n",
		"TIME", "PID", "TID", "COMM", "API", "SIZE", "HANDLE", "RET",
		"DUR(us)", "HOST+", "HOST-");
}

static void wall_time(const struct output_clock *c, uint64_t mono_ns,
		      char *buf, size_t len)
{
	int64_t ns = (int64_t)mono_ns + c->realtime_minus_mono_ns;
	time_t secs = ns / 1000000000LL;
	struct tm tm;

	localtime_r(&secs, &tm);
	snprintf(buf, len, "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min,
		 tm.tm_sec, (int)((ns / 1000000) % 1000));
}

void output__call_text(FILE *f, const struct output_clock *c,
		       const struct umt_call_rec *r)
{
	char t[32], sz[16], hp[16], hf[16], ret[16];
	char comm[ESC_TERM_LEN(TASK_COMM_LEN)];

	wall_time(c, r->ts_ns, t, sizeof(t));
	if (r->end == UMT_END_RETURNED)
		snprintf(ret, sizeof(ret), "%d", r->ret);
	else
		snprintf(ret, sizeof(ret), "%s", r->end == UMT_END_EXITED ? "EXIT" :
			 r->end == UMT_END_EXECED ? "EXEC" : "LOST");
	fprintf(f, "%-12s %-7u %-7u %-15s %-24s %8s 0x%-12llx %5s %9.1f %8s %8s\n",
		t, r->pid, r->tid, esc__term(r->comm, comm, sizeof(comm)), cuda_api__name(r->api),
		r->size ? fmt_bytes(r->size, sz, sizeof(sz)) : "-",
		(unsigned long long)r->handle, ret, r->duration_ns / 1000.0,
		fmt_bytes(r->pages_taken * c->page_size, hp, sizeof(hp)),
		fmt_bytes(r->pages_freed * c->page_size, hf, sizeof(hf)));
}

static void json_stack(FILE *f, const struct umt_call_rec *r)
{
	unsigned int i, n = r->stack_len / sizeof(r->stack[0]);

	if (n > UMT_STACK_MAX)
		n = UMT_STACK_MAX;
	fputs(",\"stack\":[", f);
	for (i = 0; i < n; i++)
		fprintf(f, "%s\"0x%llx\"", i ? "," : "", (unsigned long long)r->stack[i]);
	fputc(']', f);
}

void output__call_json(FILE *f, const struct output_clock *c,
		       const struct umt_call_rec *r)
{
	char comm[TASK_COMM_LEN + 1];

	snprintf(comm, sizeof(comm), "%.*s", TASK_COMM_LEN, r->comm);
	fprintf(f, "{\"ts_ns\":%llu,\"event\":\"%s\",\"api\":\"%s\",\"pid\":%u,"
		"\"tid\":%u,\"comm\":", (unsigned long long)r->ts_ns,
		r->is_free ? "free" : "alloc", cuda_api__name(r->api), r->pid, r->tid);
	json__string(f, comm);
	snprintf(comm, sizeof(comm), "%.*s", TASK_COMM_LEN, r->pcomm);
	fputs(",\"pcomm\":", f);
	json__string(f, comm);
	fprintf(f, ",\"size\":%llu,\"flags\":%llu,\"handle\":%llu,\"aux\":%llu,"
		"\"ret\":%d,\"end\":\"%s\",\"duration_ns\":%llu,\"host_bytes\":%llu,"
		"\"host_freed_bytes\":%llu,\"faulted_bytes\":%llu,\"device_node_bytes\":%llu",
		(unsigned long long)r->size, (unsigned long long)r->flags,
		(unsigned long long)r->handle, (unsigned long long)r->aux, r->ret,
		output__end_name(r->end), (unsigned long long)r->duration_ns,
		(unsigned long long)(r->pages_taken * c->page_size),
		(unsigned long long)(r->pages_freed * c->page_size),
		(unsigned long long)(r->faulted_pages * c->page_size),
		(unsigned long long)(r->device_pages * c->page_size));
	json_stack(f, r);
	fputs("}\n", f);
}
