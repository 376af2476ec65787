/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Host pages taken by kernel threads (bpf/kthreads.bpf.h), by thread and
 * by the process the kernel said they were for: read here, written out by
 * export/kthreads_out.h.
 */
#ifndef UMTRACE_KTHREADS_H
#define UMTRACE_KTHREADS_H

#include <stddef.h>
#include <stdint.h>
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

#endif /* UMTRACE_KTHREADS_H */
