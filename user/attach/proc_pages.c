// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include "attach/proc_pages.h"
#include "lib/units.h"

#define MAX_LINES 20

struct kern_counts {		/* struct proc_pages in the BPF object */
	uint64_t alloc;
	uint64_t freed;
	char comm[16];
};

void proc_pages__init(struct proc_pages_view *v, int map_fd)
{
	memset(v, 0, sizeof(*v));
	v->map_fd = map_fd;
}

static struct proc_pages_row *row_of(struct proc_pages_view *v, uint32_t pid)
{
	size_t i;

	for (i = 0; i < v->n; i++)
		if (v->rows[i].pid == pid)
			return &v->rows[i];
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 64;
		struct proc_pages_row *r = realloc(v->rows, cap * sizeof(*r));

		if (!r)
			return NULL;
		v->rows = r;
		v->cap = cap;
	}
	memset(&v->rows[v->n], 0, sizeof(v->rows[0]));
	v->rows[v->n].pid = pid;
	return &v->rows[v->n++];
}

static int refresh(struct proc_pages_view *v)
{
	uint32_t key, next, *prev = NULL;
	struct kern_counts kc;

	while (!bpf_map_get_next_key(v->map_fd, prev, &next)) {
		struct proc_pages_row *r;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(v->map_fd, &key, &kc))
			continue;
		r = row_of(v, key);
		if (!r)
			return -ENOMEM;
		r->alloc = kc.alloc;
		r->freed = kc.freed;
		memcpy(r->comm, kc.comm, sizeof(r->comm));
		r->comm[sizeof(r->comm) - 1] = '\0';
	}
	return 0;
}

static int by_delta_desc(const void *a, const void *b)
{
	const struct proc_pages_row *x = a, *y = b;
	uint64_t dx = x->alloc - x->alloc_prev, dy = y->alloc - y->alloc_prev;

	return dx < dy ? 1 : dx > dy ? -1 : 0;
}

static void print_row(FILE *f, bool json, const struct output_clock *c,
		      const struct proc_pages_row *r, uint64_t a, uint64_t fr,
		      const char *event)
{
	char b1[16], b2[16];

	if (json) {
		fprintf(f, "{\"event\":\"%s\",\"pid\":%u,\"comm\":", event, r->pid);
		output__json_string(f, r->comm);
		fprintf(f, ",\"host_bytes\":%llu,\"host_freed_bytes\":%llu}\n",
			(unsigned long long)(a * c->page_size),
			(unsigned long long)(fr * c->page_size));
		return;
	}
	fprintf(f, "%-7u %-16s %10s %10s\n", r->pid, r->comm,
		fmt_bytes(a * c->page_size, b1, sizeof(b1)),
		fmt_bytes(fr * c->page_size, b2, sizeof(b2)));
}

int proc_pages__report(struct proc_pages_view *v, FILE *f, bool json,
		       const struct output_clock *c)
{
	size_t i, lines = 0;
	int err = refresh(v);

	if (err)
		return err;
	qsort(v->rows, v->n, sizeof(v->rows[0]), by_delta_desc);
	for (i = 0; i < v->n && lines < MAX_LINES; i++) {
		struct proc_pages_row *r = &v->rows[i];

		if (r->alloc == r->alloc_prev && r->freed == r->freed_prev)
			continue;
		if (!lines++ && !json)
			fprintf(f, "%-7s %-16s %10s %10s\n", "PID", "COMM",
				"HOST+", "HOST-");
		print_row(f, json, c, r, r->alloc - r->alloc_prev,
			  r->freed - r->freed_prev, "host_pages");
	}
	for (i = 0; i < v->n; i++) {
		v->rows[i].alloc_prev = v->rows[i].alloc;
		v->rows[i].freed_prev = v->rows[i].freed;
	}
	fflush(f);
	return 0;
}

static int by_total_desc(const void *a, const void *b)
{
	const struct proc_pages_row *x = a, *y = b;

	return x->alloc < y->alloc ? 1 : x->alloc > y->alloc ? -1 : 0;
}

void proc_pages__summary(struct proc_pages_view *v, FILE *f, bool json,
			 const struct output_clock *c)
{
	size_t i;

	if (refresh(v))
		return;
	qsort(v->rows, v->n, sizeof(v->rows[0]), by_total_desc);
	if (!json)
		fprintf(f, "\nhost pages per process since tracing started:\n"
			"%-7s %-16s %10s %10s\n", "PID", "COMM", "HOST+", "HOST-");
	for (i = 0; i < v->n && i < MAX_LINES; i++)
		print_row(f, json, c, &v->rows[i], v->rows[i].alloc,
			  v->rows[i].freed, "host_pages_summary");
}

void proc_pages__free(struct proc_pages_view *v)
{
	free(v->rows);
	memset(v, 0, sizeof(*v));
}
