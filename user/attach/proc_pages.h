/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * With no libcuda to probe, umtrace still shows which processes take host
 * pages: the kernel counts them per process and this reads the counts
 * (written out by export/proc_pages_out.h).
 */
#ifndef UMTRACE_PROC_PAGES_H
#define UMTRACE_PROC_PAGES_H

#include <stddef.h>
#include <stdint.h>
#include "lib/pid_table.h"

struct proc_pages_row {
	uint32_t pid;		/* first: the row's key in its pid_table */
	char comm[16];
	uint64_t alloc;		/* pages, since tracing started */
	uint64_t freed;
	uint64_t alloc_prev;	/* at the previous proc_pages__mark() */
	uint64_t freed_prev;
};

enum proc_pages_order {
	PROC_PAGES_BY_CHANGE,	/* most pages taken since the last mark first */
	PROC_PAGES_BY_TOTAL,	/* most pages taken since tracing started first */
};

struct proc_pages_view {
	int map_fd;
	struct pid_table rows;	/* of struct proc_pages_row */
};

void proc_pages__init(struct proc_pages_view *v, int map_fd);
/* The kernel's counts read into the rows, sorted by order. 0 or -ENOMEM. */
int proc_pages__refresh(struct proc_pages_view *v, enum proc_pages_order order);
/* The rows, in the order of the last refresh. */
const struct proc_pages_row *proc_pages__rows(const struct proc_pages_view *v, size_t *n);
/* The counts now are what the next changes are counted from. */
void proc_pages__mark(struct proc_pages_view *v);
void proc_pages__free(struct proc_pages_view *v);

#endif /* UMTRACE_PROC_PAGES_H */
