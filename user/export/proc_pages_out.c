// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "export/proc_pages_out.h"
#include "lib/escape.h"
#include "lib/units.h"

#define MAX_LINES 20

static void put_heading(FILE *f)
{
	fprintf(f, "%-7s %-16s %10s %10s\n", "PID", "COMM", "HOST+", "HOST-");
}

/* a and fr: the pages taken and freed to show for r. */
static void put_row(FILE *f, bool json, const struct output_clock *c,
		    const struct proc_pages_row *r, uint64_t a, uint64_t fr,
		    const char *event)
{
	char b1[16], b2[16], comm[ESC_TERM_LEN(sizeof(r->comm))];

	if (json) {
		fprintf(f, "{\"event\":\"%s\",\"pid\":%u,\"comm\":", event, r->pid);
		json__string(f, r->comm);
		fprintf(f, ",\"host_bytes\":%llu,\"host_freed_bytes\":%llu}\n",
			(unsigned long long)(a * c->page_size),
			(unsigned long long)(fr * c->page_size));
		return;
	}
	fprintf(f, "%-7u %-16s %10s %10s\n", r->pid, esc__term(r->comm, comm, sizeof(comm)),
		fmt_bytes(a * c->page_size, b1, sizeof(b1)),
		fmt_bytes(fr * c->page_size, b2, sizeof(b2)));
}

void export_proc_pages_changes(const struct proc_pages_row *rows, size_t n,
			       const struct output_clock *c, bool json, FILE *f)
{
	size_t i, lines = 0;

	for (i = 0; i < n && lines < MAX_LINES; i++) {
		const struct proc_pages_row *r = &rows[i];

		if (r->alloc == r->alloc_prev && r->freed == r->freed_prev)
			continue;
		if (!lines++ && !json)
			put_heading(f);
		put_row(f, json, c, r, r->alloc - r->alloc_prev,
			r->freed - r->freed_prev, "host_pages");
	}
}

void export_proc_pages_totals(const struct proc_pages_row *rows, size_t n,
			      const struct output_clock *c, bool json, FILE *f)
{
	size_t i;

	if (!json) {
		fputs("\nhost pages per process since tracing started:\n", f);
		put_heading(f);
	}
	for (i = 0; i < n && i < MAX_LINES; i++)
		put_row(f, json, c, &rows[i], rows[i].alloc, rows[i].freed,
			"host_pages_summary");
}
