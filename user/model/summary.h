/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * user/model: what umtrace knows of GPU calls, fed records one at a time
 * from the ring buffer or a recording alike, knowing nothing of BPF and
 * printing nothing: the entry points (cuda_api.c), outstanding
 * allocations (alloc_table.c), per process and entry point totals
 * (summary.c), call sites (callsites.c), what a call costs the host on
 * this platform (platform.c), a frame as names (frame.h). Uses lib/.
 */
/*
 * Per process and entry point: calls, bytes requested, host bytes taken
 * and freed, and what is still unfreed. Fed one call record at a time.
 */
#ifndef UMTRACE_SUMMARY_H
#define UMTRACE_SUMMARY_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/types.h>
#include "lib/pid_table.h"
#include "model/alloc_table.h"
#include "model/cuda_api.h"
#include "model/driver_pool.h"
#include "model/platform.h"
#include "umtrace.h"

struct summary_row {
	uint32_t pid;
	uint32_t api;
	char comm[TASK_COMM_LEN];
	uint64_t calls;
	uint64_t failed;	/* returned an error */
	uint64_t died;		/* the thread exited or exec'ed inside it */
	uint64_t size_bytes;	/* requested by successful calls */
	uint64_t host_taken;	/* bytes */
	uint64_t device_taken;	/* bytes from NUMA nodes that are not host RAM */
	uint64_t host_freed;
	uint64_t unfreed;	/* allocations with no free seen yet */
	uint64_t unfreed_size;
	uint64_t unfreed_host;
	uint64_t exit_freed;	/* released when the process exited */
	uint64_t exit_freed_size;
	uint64_t exit_freed_host;
};

/*
 * Caps that keep umtrace's own memory bounded on a host with millions of
 * live allocations (about 100 bytes each in the table).
 */
#define SUMMARY_MAX_ALLOCS 2000000
#define SUMMARY_MAX_ROWS 100000
#define SUMMARY_MAX_PROCS 65536

/* Per process: what its outstanding allocations hold right now. */
struct summary_proc {
	uint32_t pid;
	char comm[TASK_COMM_LEN];
	bool exited;
	uint64_t held_count;
	uint64_t held_size[UMT_CLASS__COUNT];	/* GPU bytes by class */
	uint64_t held_observed[UMT_CLASS__COUNT];	/* host bytes seen, by class */
	uint64_t held_gpu;		/* all classes but VA reservations and mappings */
	uint64_t held_host;		/* host bytes observed taken by those allocations */
	uint64_t host_taken;		/* host bytes taken in all its calls */
	uint64_t calls;
};

#define SUMMARY_REPLACED 64
/* Exited processes whose rows stay apart; older ones fold into pid 0. */
#define SUMMARY_EXITED_KEPT 256

struct summary_replaced {
	struct alloc_key key;
	uint64_t ret_ns;	/* when the allocation that took the address returned */
};

struct summary {
	struct platform_model platform;
	void *rows;		/* tsearch(3) tree of struct summary_row */
	size_t n_rows;
	struct pid_table procs;	/* of struct summary_proc */
	struct alloc_table table;
	uint64_t page_size;
	uint64_t records;
	uint64_t unmatched_frees;	/* frees of handles never seen allocated */
	uint64_t frees_overtaken;	/* frees of an address another thread got back first */
	bool forget_exited;		/* drop a process's rows when it exits (daemons) */
	struct summary_replaced replaced[SUMMARY_REPLACED];
	size_t n_replaced;
	uint32_t exited_ring[SUMMARY_EXITED_KEPT];
	uint64_t n_exited;
	uint64_t exits;			/* processes that made GPU calls and exited */
	uint64_t exit_freed;		/* allocations released by those exits */
	uint64_t exit_freed_host;
	uint64_t device_taken;		/* by all calls, from nodes not host RAM */
	struct driver_pool pool;	/* the driver's page pool, as calls show it */
	/*
	 * The calls' pages are not seen (the guard's page programs detached
	 * far from its floor): a pool hit and a call unseen look alike, so
	 * the pool is not fed.
	 */
	bool pages_unseen;
	/* Bounded memory: past these caps new keys are counted, not kept. */
	size_t max_rows, max_procs;
	uint64_t rows_refused, procs_refused;
	/* Told of every allocation that leaves the table (free, or exit). */
	void (*on_release)(const struct alloc_entry *e, bool at_exit, void *ctx);
	void *release_ctx;
};

void summary__init(struct summary *s, uint64_t page_size);
int summary__consume(struct summary *s, const struct umt_call_rec *r);
/* The same, remembering the call site of what the call allocates. */
int summary__consume_site(struct summary *s, const struct umt_call_rec *r,
			  uint32_t site);
/* The process is gone: everything it held is released ("freed at exit"). */
void summary__proc_exit(struct summary *s, const struct umt_proc_exit_rec *r);
/* Rows sorted by pid then entry point; the caller frees the array. */
struct summary_row *summary__rows(const struct summary *s, size_t *n);
/* Host bytes a process's allocations hold by the platform's cost model. */
uint64_t summary__proc_holds(const struct summary *s, const struct summary_proc *p);
/*
 * What the driver's pool holds (model/driver_pool.h), device memory
 * counted unless the platform is discrete (*device says whether).
 */
uint64_t summary__pool_holds(const struct summary *s, bool *device);
/* One process, or NULL if it made no call seen. */
const struct summary_proc *summary__proc(const struct summary *s, uint32_t pid);
/* Processes sorted by pid; the caller frees the array. */
struct summary_proc *summary__procs(const struct summary *s, size_t *n);
void summary__free(struct summary *s);

#endif /* UMTRACE_SUMMARY_H */
