/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The per-process page counts of trace without libcuda
 * (attach/proc_pages.h), as text for people or JSON lines for programs.
 */
#ifndef UMTRACE_PROC_PAGES_OUT_H
#define UMTRACE_PROC_PAGES_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include "attach/proc_pages.h"
#include "export/output.h"

/*
 * One line per process whose counts moved since the last mark, the first
 * 20 of rows at most: "host_pages" events, or a table whose heading comes
 * with its first line (none when nothing moved).
 */
void export_proc_pages_changes(const struct proc_pages_row *rows, size_t n,
			       const struct output_clock *c, bool json, FILE *f);
/*
 * The first 20 of rows, counted since tracing started: "host_pages_summary"
 * events, or a table under a heading (written even with no rows).
 */
void export_proc_pages_totals(const struct proc_pages_row *rows, size_t n,
			      const struct output_clock *c, bool json, FILE *f);

#endif /* UMTRACE_PROC_PAGES_OUT_H */
