/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Host pages taken by kernel threads (bpf/kthreads.bpf.h), by thread and
 * by the job they were for: read here, jobs named, written out by
 * export/kthreads_out.h.
 */
#ifndef UMTRACE_KTHREADS_H
#define UMTRACE_KTHREADS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "attach/probes.h"

/* How a row's job was named: bits of struct kthread_row's by. */
#define KTHREAD_BY_MM		(1U << UMT_KTHREAD_BY_MM)	/* adopted its mm */
#define KTHREAD_BY_MEMCG	(1U << UMT_KTHREAD_BY_MEMCG)	/* its memory cgroup active */
#define KTHREAD_BY_RSS		(1U << UMT_KTHREAD_BY_RSS)	/* mapped pages in its mm later */

#define KTHREAD_CGROUP_LEN	256

struct kthread_row {
	uint32_t pid;		/* the kernel thread */
	uint32_t tgid;		/* for this process, 0: none named */
	uint32_t by;		/* KTHREAD_BY_* bits, 0: the thread's own pages */
	uint32_t n_jobs;	/* GPU processes seen in the memory cgroup */
	uint64_t cgroup;	/* the memory cgroup charged (its id), 0: none */
	uint64_t bytes;
	uint64_t by_bytes[4];	/* of bytes, by UMT_KTHREAD_BY_* (0: the thread's own) */
	bool exited;		/* the process is gone (for_comm: its name then) */
	const char *role;	/* what the thread does, "" when not known */
	char comm[TASK_COMM_LEN];
	char for_comm[TASK_COMM_LEN];	/* the process's name */
	char cgroup_path[KTHREAD_CGROUP_LEN];	/* below cgroup v2's root, "" unknown */
};

/*
 * The rows with pages, largest first: a memory cgroup's pages are named
 * for the GPU processes seen in it and join the row of the one there is;
 * *n 0 and NULL when there are none or on error (-errno in *err).
 */
struct kthread_row *kthreads__read(const struct probes *p, uint64_t page_size,
				   size_t *n, int *err);
/* What a kernel thread of this name does ("UVM GPU0 BH": ...), or "". */
const char *kthreads__role(const char *comm);
/* The name of one KTHREAD_BY_* bit: "mm", "memcg", "rss". */
const char *kthreads__by_name(uint32_t bit);

#endif /* UMTRACE_KTHREADS_H */
