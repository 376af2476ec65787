/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What the page hooks (pages.bpf.c) and the per-process page counts of
 * the no-libcuda view (procpages.bpf.c) both leave out: frees made while
 * a softirq runs, and memory new to the allocator.
 */
#ifndef UMTRACE_PAGES_BPF_H
#define UMTRACE_PAGES_BPF_H

#include "shared.bpf.h"

/*
 * Leave out the pages freed while a softirq runs (softirq_entry/exit
 * keep a per-CPU mark): they belong to whatever it serves, an RCU callback
 * freeing another process's page tables or a network buffer, never to the
 * task it interrupted. Two more programs on every softirq of the host, so
 * the guard, which decides on allocations alone, goes without.
 */
extern const volatile bool skip_softirq_frees;

/* 1 while this CPU serves a softirq (skip_softirq_frees). */
struct in_softirq_map {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
};
extern struct in_softirq_map in_softirq SEC(".maps");

static __always_inline bool serving_softirq(void)
{
	__u32 zero = 0, *mark;

	if (!skip_softirq_frees)
		return false;
	mark = bpf_map_lookup_elem(&in_softirq, &zero);
	return mark && *mark;
}

/*
 * Memory new to the page allocator: a block whose struct pages were
 * initialised just now, never allocated. With deferred struct page
 * initialisation done lazily (deferred_init=lazy: this VM's kernel), the
 * first allocation to find its zone short initialises whole sections
 * inside itself (deferred_grow_zone) and hands them to the allocator as
 * MAX_PAGE_ORDER frees in that task: a 64 MiB cuMemAlloc_v2 showed
 * HOST- 128M here. Memory hotplug's onlining does the same in whichever
 * task onlines. Those frees gave nothing back: they are no call's HOST-.
 * Nor do they move the guard's figure: that kernel's MemFree and
 * MemAvailable count the pages still to initialise, so counting them
 * left the headroom high by all that was initialised since the last
 * sample (256 MiB in one 512 MiB burst here). Hotplugged memory does add
 * to MemFree: there the figure stays low, the safe side, until the next
 * sample. Such a block's head page still has the list head that
 * __init_single_page() pointed at itself; a page that came out of the
 * allocator has it poisoned (list_del) or reused. Only big frees are
 * looked at (page-table pages freed at order 0 can look the same): one
 * compare a free, and for those a load from the struct page line the
 * kernel has just read.
 */
#define UMT_NEW_MIN_ORDER	9

static __always_inline bool new_to_allocator(struct page *page, unsigned int order)
{
	if (order < UMT_NEW_MIN_ORDER)
		return false;
	return (unsigned long)page->lru.next == (unsigned long)&page->lru;
}

#endif /* UMTRACE_PAGES_BPF_H */
