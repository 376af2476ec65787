/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Host pages taken by kernel threads (bpf/kthreads.bpf.h), by thread and
 * by the process the kernel said they were for.
 */
#ifndef UMTRACE_KTHREADS_H
#define UMTRACE_KTHREADS_H

#include <stdint.h>
#include <stdio.h>
#include "attach/probes.h"

struct kthread_row {
	uint32_t pid;		/* the kernel thread */
	uint32_t tgid;		/* for this process, 0: none named */
	uint64_t bytes;
	char comm[TASK_COMM_LEN];
	char for_comm[TASK_COMM_LEN];	/* the process's name, if it still runs */
};

/*
 * The rows with pages, largest first; *n 0 and NULL when there are none or
 * on error (-errno in *err).
 */
struct kthread_row *kthreads__read(const struct probes *p, uint64_t page_size,
				   size_t *n, int *err);
/* At most max rows, as a table under a heading; nothing when n is 0. */
void kthreads__print(FILE *f, const struct kthread_row *rows, size_t n, size_t max);
/* One JSON line a row: {"event":"kernel_thread",...}. */
void kthreads__print_json(FILE *f, const struct kthread_row *rows, size_t n);

#endif /* UMTRACE_KTHREADS_H */
