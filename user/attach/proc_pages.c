// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include "attach/proc_pages.h"

_Static_assert(offsetof(struct proc_pages_row, pid) == 0, "a pid_table row starts with its pid");

struct kern_counts {		/* struct proc_pages in the BPF object */
	uint64_t alloc;
	uint64_t freed;
	char comm[16];
};

void proc_pages__init(struct proc_pages_view *v, int map_fd)
{
	memset(v, 0, sizeof(*v));
	v->map_fd = map_fd;
	pid_table__init(&v->rows, sizeof(struct proc_pages_row));
}

static int read_counts(struct proc_pages_view *v)
{
	uint32_t key, next, *prev = NULL;
	struct kern_counts kc;

	while (!bpf_map_get_next_key(v->map_fd, prev, &next)) {
		struct proc_pages_row *r;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(v->map_fd, &key, &kc))
			continue;
		r = pid_table__get(&v->rows, key);
		if (!r)
			return -ENOMEM;
		r->alloc = kc.alloc;
		r->freed = kc.freed;
		memcpy(r->comm, kc.comm, sizeof(r->comm));
		r->comm[sizeof(r->comm) - 1] = '\0';
	}
	return 0;
}

static int by_change_desc(const void *a, const void *b)
{
	const struct proc_pages_row *x = a, *y = b;
	uint64_t dx = x->alloc - x->alloc_prev, dy = y->alloc - y->alloc_prev;

	return dx < dy ? 1 : dx > dy ? -1 : 0;
}

static int by_total_desc(const void *a, const void *b)
{
	const struct proc_pages_row *x = a, *y = b;

	return x->alloc < y->alloc ? 1 : x->alloc > y->alloc ? -1 : 0;
}

int proc_pages__refresh(struct proc_pages_view *v, enum proc_pages_order order)
{
	int err = read_counts(v);

	if (err)
		return err;
	pid_table__sort(&v->rows, order == PROC_PAGES_BY_CHANGE ? by_change_desc : by_total_desc);
	return 0;
}

const struct proc_pages_row *proc_pages__rows(const struct proc_pages_view *v, size_t *n)
{
	*n = v->rows.n;
	return v->rows.rows;
}

void proc_pages__mark(struct proc_pages_view *v)
{
	struct proc_pages_row *r;
	size_t i;

	for (i = 0; i < v->rows.n; i++) {
		r = pid_table__row(&v->rows, i);
		r->alloc_prev = r->alloc;
		r->freed_prev = r->freed;
	}
}

void proc_pages__free(struct proc_pages_view *v)
{
	pid_table__free(&v->rows);
	memset(v, 0, sizeof(*v));
}
