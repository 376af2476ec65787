/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Managed memory (--managed-faults, x86) gets its pages on CPU faults
 * after the call. Each live managed allocation is found by 2 MiB chunk of
 * its address range; the fault hook marks the faulting thread, and the
 * thread's next user data page is charged to the allocation. The GPU
 * call programs register and forget allocations (calls.bpf.c); the page
 * hook charges the marked page (pages.bpf.c).
 */
#ifndef UMTRACE_MANAGED_BPF_H
#define UMTRACE_MANAGED_BPF_H

#include "shared.bpf.h"

/*
 * Index managed ranges and charge CPU faults to them (--managed-faults).
 * Off, the code that needs bpf_loop (5.17) is dead and never verified, so
 * older kernels load the rest.
 */
extern const volatile bool track_managed;

#define MANAGED_CHUNK_SHIFT 21
#define MANAGED_MAX_CHUNKS 4096		/* 8 GiB indexed per allocation */

/*
 * The allocations a 2 MiB chunk belongs to: two, so that one ending and
 * the next starting inside the same chunk are both found. A third small
 * one sharing the chunk goes unindexed.
 */
struct managed_chunk {
	__u64 base[2];
};

/*
 * Plain hashes: an LRU hash may evict entries long before it is full (its
 * free lists are per CPU), which lost whole chunks of ranges here.
 */
struct managed_chunks_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct umt_managed_key);
	__type(value, struct managed_chunk);
};
extern struct managed_chunks_map managed_chunks SEC(".maps");

struct managed_allocs_map {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct umt_managed_key);
	__type(value, struct umt_managed_alloc);
};
extern struct managed_allocs_map managed_allocs SEC(".maps");

extern __s64 managed_live;	/* live managed allocations: the fault hook's gate */
extern __s64 faults_pending;	/* threads with a managed fault not yet charged */

/*
 * The thread faulted on managed memory: its next user data page (page
 * tables are not movable, user pages are) is that fault's page.
 */
static __always_inline void charge_fault(struct window *w, unsigned int order)
{
	struct umt_managed_key k = { .tgid = bpf_get_current_pid_tgid() >> 32 };
	struct umt_managed_alloc *a;

	k.addr = w->fault_base;
	w->fault_base = 0;
	__sync_fetch_and_add(&faults_pending, -1);
	a = bpf_map_lookup_elem(&managed_allocs, &k);
	if (a)
		__sync_fetch_and_add(&a->pages, 1ULL << order);
}

#endif /* UMTRACE_MANAGED_BPF_H */
