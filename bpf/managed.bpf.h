/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Managed memory (--managed-faults, x86) gets its pages on CPU faults
 * after the call. Each live managed allocation is found by 2 MiB chunk of
 * its address range; the fault hook marks the faulting thread, and the
 * thread's next user data page is charged to the allocation. The index
 * is kept here: the GPU call programs register and forget allocations
 * (calls.bpf.c, calls.bpf.h), a process's end forgets what it left
 * (lifetime.bpf.c); the fault hook is managed.bpf.c's, and the page hook
 * charges the marked page (pages.bpf.c).
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
UMT_MAP_TYPE(managed_chunks, BPF_MAP_TYPE_HASH, 65536, struct umt_managed_key,
	     struct managed_chunk);
extern struct managed_chunks_map managed_chunks SEC(".maps");

UMT_MAP_TYPE(managed_allocs, BPF_MAP_TYPE_HASH, 16384, struct umt_managed_key,
	     struct umt_managed_alloc);
extern struct managed_allocs_map managed_allocs SEC(".maps");

/* How many allocations are live, faults pending (umtrace.h). */
extern struct umt_managed_state managed_state;

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
	__sync_fetch_and_add(&managed_state.faults_pending, -1);
	a = bpf_map_lookup_elem(&managed_allocs, &k);
	if (a)
		__sync_fetch_and_add(&a->pages, 1ULL << order);
}

/* The index's walk over an allocation's chunks, in or out (bpf_loop). */
struct chunk_ctx {
	struct umt_managed_key k;
	__u64 first;		/* chunk number of the allocation's base */
	__u64 base;
	bool add;
};

static void chunk_add(struct umt_managed_key *k, __u64 base)
{
	struct managed_chunk *c, fresh = { .base = { base, 0 } };

	c = bpf_map_lookup_elem(&managed_chunks, k);
	if (!c) {
		if (!bpf_map_update_elem(&managed_chunks, k, &fresh, BPF_NOEXIST))
			return;
		/* Another thread indexed the same chunk first. */
		c = bpf_map_lookup_elem(&managed_chunks, k);
		if (!c)
			return;
	}
	if (!c->base[0])
		c->base[0] = base;
	else if (!c->base[1])
		c->base[1] = base;
}

static void chunk_remove(struct umt_managed_key *k, __u64 base)
{
	struct managed_chunk *c = bpf_map_lookup_elem(&managed_chunks, k);

	if (!c)
		return;
	if (c->base[0] == base)
		c->base[0] = 0;
	if (c->base[1] == base)
		c->base[1] = 0;
	if (!c->base[0] && !c->base[1])
		bpf_map_delete_elem(&managed_chunks, k);
}

/* One 2 MiB chunk of a managed range in or out of the index. */
static long chunk_step(__u32 i, struct chunk_ctx *c)
{
	c->k.addr = c->first + i;
	if (c->add)
		chunk_add(&c->k, c->base);
	else
		chunk_remove(&c->k, c->base);
	return 0;
}

/* bpf_loop: a range of thousands of chunks would be too much to unroll. */
static __always_inline void index_chunks(__u32 tgid, __u64 base, __u64 size, bool add)
{
	struct chunk_ctx c = {
		.k = { .tgid = tgid },
		.first = base >> MANAGED_CHUNK_SHIFT,
		.base = base,
		.add = add,
	};
	__u64 n = ((base + size - 1) >> MANAGED_CHUNK_SHIFT) - c.first + 1;

	bpf_loop(n < MANAGED_MAX_CHUNKS ? n : MANAGED_MAX_CHUNKS, chunk_step, &c, 0);
}

static __always_inline void managed_register(__u32 tgid, __u64 base, __u64 size,
					     __u64 pages)
{
	struct umt_managed_key k = { .tgid = tgid, .addr = base };
	struct umt_managed_alloc a = { .size = size, .pages = pages };

	if (!base || !size)
		return;
	bpf_map_update_elem(&managed_allocs, &k, &a, BPF_ANY);
	index_chunks(tgid, base, size, true);
	__sync_fetch_and_add(&managed_state.live, 1);
}

/*
 * A free of a managed allocation, at its entry: forget it before the
 * driver can hand its addresses to another thread's allocation, which
 * would be registered under the same key and then forgotten in its place.
 * Its size and faulted pages wait in the window for the free's return.
 */
static __always_inline void managed_unregister(struct window *w, __u32 tgid)
{
	struct umt_managed_key k = { .tgid = tgid, .addr = w->handle };
	struct umt_managed_alloc *a;

	w->freed_size = 0;
	w->freed_pages = 0;
	if (!track_managed || !(w->cookie & UMT_CK_FREE) || !READ_ONCE(managed_state.live))
		return;
	a = bpf_map_lookup_elem(&managed_allocs, &k);
	if (!a)
		return;
	w->freed_pages = a->pages;
	w->freed_size = a->size;
	bpf_map_delete_elem(&managed_allocs, &k);
	index_chunks(tgid, k.addr, w->freed_size, false);
	__sync_fetch_and_add(&managed_state.live, -1);
}

/*
 * Callbacks change nothing in their context: the verifier walks callback
 * iterations until their states converge, and a counter there never does.
 */
static long forget_managed_alloc(struct bpf_map *map, struct umt_managed_key *k,
				 void *value, __u32 *tgid)
{
	if (k->tgid == *tgid && !bpf_map_delete_elem(map, k))
		__sync_fetch_and_add(&managed_state.live, -1);
	return 0;
}

static long forget_managed_chunk(struct bpf_map *map, struct umt_managed_key *k,
				 void *value, __u32 *tgid)
{
	if (k->tgid == *tgid)
		bpf_map_delete_elem(map, k);
	return 0;
}

/* Managed memory the process never freed goes with it. */
static __always_inline void forget_managed(__u32 tgid)
{
	if (!track_managed || !READ_ONCE(managed_state.live))
		return;
	bpf_for_each_map_elem(&managed_allocs, forget_managed_alloc, &tgid, 0);
	bpf_for_each_map_elem(&managed_chunks, forget_managed_chunk, &tgid, 0);
}

#endif /* UMTRACE_MANAGED_BPF_H */
