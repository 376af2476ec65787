/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* The kernel threads' pages (attach/kthreads.h), for top and report. */
#ifndef UMTRACE_KTHREADS_OUT_H
#define UMTRACE_KTHREADS_OUT_H

#include <stddef.h>
#include <stdio.h>
#include "attach/kthreads.h"

/* At most max rows, as a table under a heading; nothing when n is 0. */
void export_kthreads_text(const struct kthread_row *rows, size_t n, size_t max, FILE *f);
/* One JSON line a row: {"event":"kernel_thread",...}. */
void export_kthreads_json(const struct kthread_row *rows, size_t n, FILE *f);

#endif /* UMTRACE_KTHREADS_OUT_H */
