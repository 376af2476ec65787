/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The kernel's own memory counters, read where they live: the figures
 * /proc/meminfo adds up into MemFree and MemAvailable, current to the
 * moment of a decision.
 *
 * guard_find_zones (meter.bpf.c) notes where they are, once: for every
 * host zone its NR_FREE_PAGES counter, low watermark and watermark boost,
 * and for every host node its counters of page cache and reclaimable
 * kernel memory. meter_now() sums them the way si_mem_available() does,
 * less totalreserve_pages, a data symbol BPF cannot name (the guard's
 * sample carries it: see guard_exact_room).
 *
 * The per-CPU free lists are in none of these counters, as they are in
 * neither MemFree nor MemAvailable. Like /proc/meminfo, the figure lags by
 * the per-CPU deltas vmstat has not folded yet (its threshold: 4 to 125
 * pages a CPU a zone, in /proc/zoneinfo).
 */
#ifndef UMTRACE_METER_BPF_H
#define UMTRACE_METER_BPF_H

#include "shared.bpf.h"

/* Where the counters are (umtrace.h says what each field holds). */
extern struct umt_meter meter;
/* Set by user space before load: the guard's metric is MemFree. */
extern const volatile bool meter_free_only;

static __always_inline bool meter_read(__u64 addr, __s64 *v)
{
	*v = 0;
	return !addr || !bpf_probe_read_kernel(v, sizeof(*v), (const void *)addr);
}

/* What MemFree or MemAvailable holds in pages above its reserve. */
struct meter_sum {
	__s64 free;
	__s64 low;	/* the zones' low watermarks, boosts included */
	__s64 file;	/* page cache on the LRU lists */
	__s64 reclaimable;
};

static __always_inline bool meter_zones_now(struct meter_sum *s)
{
	__u32 i, n = READ_ONCE(meter.n_zones);
	__s64 free, low, boost;

	for (i = 0; i < UMT_GUARD_MAX_ZONES; i++) {
		if (i >= n)
			break;
		if (!meter_read(meter.zones[i].free, &free) || !meter_read(meter.zones[i].low, &low) ||
		    !meter_read(meter.zones[i].boost, &boost))
			return false;
		s->free += free;
		s->low += low + boost;
	}
	return true;
}

static __always_inline bool meter_nodes_now(struct meter_sum *s)
{
	__u32 act = bpf_core_enum_value(enum node_stat_item, NR_ACTIVE_FILE);
	__u32 inact = bpf_core_enum_value(enum node_stat_item, NR_INACTIVE_FILE);
	__u32 slab = bpf_core_enum_value(enum node_stat_item, NR_SLAB_RECLAIMABLE_B);
	__u32 misc = bpf_core_enum_value(enum node_stat_item, NR_KERNEL_MISC_RECLAIMABLE);
	__u32 i, n = READ_ONCE(meter.n_nodes);
	__s64 a, b, c, d;
	__u64 base;

	for (i = 0; i < UMT_GUARD_MAX_NODES; i++) {
		if (i >= n)
			break;
		base = meter.nodes[i];
		if (!meter_read(base + act * sizeof(long), &a) ||
		    !meter_read(base + inact * sizeof(long), &b) ||
		    !meter_read(base + slab * sizeof(long), &c) ||
		    !meter_read(base + misc * sizeof(long), &d))
			return false;
		s->file += a + b;
		s->reclaimable += c + d;
	}
	return true;
}

/* v less min(v / 2, low), as si_mem_available() keeps part of it back. */
static __always_inline __s64 meter_half_above(__s64 v, __s64 low)
{
	__s64 half = v > 0 ? (__s64)((__u64)v >> 1) : 0;

	return v - (half < low ? half : low);
}

/*
 * A sum can be briefly negative (per-CPU deltas not folded yet): 0 then,
 * as the kernel's global_*_page_state() read it. The nodes' and zones'
 * counters move with the global ones, so clamping the sums, once, is
 * what the kernel does; clamping each counter would also cost the
 * verifier a branch a counter in each loop.
 */
static __always_inline __s64 meter_count(__s64 v)
{
	return v < 0 ? 0 : v;
}

/*
 * The metric now, in pages, less totalreserve_pages for MemAvailable.
 * False if a counter could not be read.
 */
static __always_inline bool meter_now(__s64 *pages)
{
	struct meter_sum s = {};

	if (!meter_zones_now(&s))
		return false;
	s.free = meter_count(s.free);
	if (meter_free_only) {
		*pages = s.free;
		return true;
	}
	if (!meter_nodes_now(&s))
		return false;
	*pages = s.free + meter_half_above(meter_count(s.file), s.low) +
		 meter_half_above(meter_count(s.reclaimable), s.low);
	return true;
}

#endif /* UMTRACE_METER_BPF_H */
