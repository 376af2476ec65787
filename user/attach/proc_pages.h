/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * With no libcuda to probe, umtrace still shows which processes take host
 * pages: the kernel counts them per process and this reads the counts.
 */
#ifndef UMTRACE_PROC_PAGES_H
#define UMTRACE_PROC_PAGES_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "export/output.h"

struct proc_pages_row {
	uint32_t pid;
	char comm[16];
	uint64_t alloc;		/* pages, since tracing started */
	uint64_t freed;
	uint64_t alloc_prev;	/* at the previous report */
	uint64_t freed_prev;
};

struct proc_pages_view {
	int map_fd;
	struct proc_pages_row *rows;
	size_t n, cap;
};

void proc_pages__init(struct proc_pages_view *v, int map_fd);
/* One line per process whose counts moved since the last call. */
int proc_pages__report(struct proc_pages_view *v, FILE *f, bool json,
		       const struct output_clock *c);
void proc_pages__summary(struct proc_pages_view *v, FILE *f, bool json,
			 const struct output_clock *c);
void proc_pages__free(struct proc_pages_view *v);

#endif /* UMTRACE_PROC_PAGES_H */
