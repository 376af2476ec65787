/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * User space's half of the guard's kernel side (bpf/guard.bpf.h): anchor
 * its headroom to a /proc/meminfo sample, set the thresholds it enforces,
 * keep its scope, and read its counters.
 */
#ifndef UMTRACE_GUARD_KERNEL_H
#define UMTRACE_GUARD_KERNEL_H

#include <stdbool.h>
#include <stdint.h>
#include "attach/probes.h"
#include "lib/meminfo.h"

struct guard_kstats {
	int64_t headroom;	/* bytes above the floor, as the kernel side decides by it */
	int64_t reserved;	/* bytes reserved by admitted calls in flight */
	uint64_t checks;	/* admission decisions */
	uint64_t stops;		/* kernel stops (dry runs included) */
	uint64_t send_failed;	/* bpf_send_signal errors */
	uint64_t reclaims;	/* direct reclaim entries, host-wide */
	uint64_t kswapd_wakes;
};

/*
 * Anchor the kernel's headroom to metric_bytes (MemAvailable or MemFree)
 * read by sample(), which is called between two reads of the kernel's net
 * page counter: pages that moved during the read are split evenly. Arms
 * the kernel side on the first call. *error gets what the kernel's figure
 * was off by just before (its estimate minus the sample; 0 at the first
 * call): the measure of the method. 0 or -errno (sample's).
 */
int guard_kernel__anchor(struct probes *p, int (*sample)(void *ctx, uint64_t *bytes),
			 void *ctx, int64_t *error);
void guard_kernel__set_thresholds(struct probes *p, uint64_t floor, uint64_t low);

struct guard_zones {
	unsigned int zones, nodes;	/* host zones and nodes found */
	int64_t kernel;		/* bytes, what their counters add up to (meter) */
	uint64_t proc;		/* bytes, the same from /proc just after */
};

/*
 * What the kernel side's meter (bpf/meter.bpf.h) reads from the kernel's
 * counters, from /proc's figures instead: MemFree, or for MemAvailable
 * that plus the page cache and reclaimable kernel memory above half of
 * low, the zones' low watermarks. MemAvailable is this less the kernel's
 * reserves.
 */
uint64_t guard_kernel__meter(const struct meminfo *m, uint64_t low, bool free_only);
/*
 * Find the host zones' and nodes' counters (bpf/guard.bpf.c,
 * guard_find_zones) and check what they add up to against meter(), the
 * same from /proc read just after. If it agrees, every decision reads
 * them. 0, or -errno with the reason in why (the guard then decides
 * from the anchored figure alone). Needs the capabilities of the load.
 */
int guard_kernel__find_zones(struct probes *p, const uint64_t *device_nodes,
			     int (*meter)(void *ctx, uint64_t *bytes), void *ctx,
			     struct guard_zones *z, char *why, size_t len);
/* The metric and the meter at this sample, for the counters' figure. */
void guard_kernel__set_sample(struct probes *p, uint64_t metric, uint64_t meter);
void guard_kernel__stats(const struct probes *p, struct guard_kstats *st);
/* The counters were found and checked (guard_kernel__find_zones). */
bool guard_kernel__exact(const struct probes *p);
/* A process of the guard's own, never stopped (0: none). */
void guard_kernel__set_helper(struct probes *p, uint32_t pid);
/*
 * The headroom above the floor, in bytes, as the next decision at a page
 * would see it from the kernel's counters: 0, or -ENODATA where they give
 * no figure (not found, no sample yet), -errno.
 */
int guard_kernel__look(struct probes *p, int64_t *room);

/*
 * The memory tracepoints' programs, attached apart from the rest near
 * the floor only (guardd/arm.h): the page allocator's, and reclaim's and
 * compaction's, whose tracepoints cost a page-fault storm about 2% each
 * here while attached, though they never fire in it.
 */
#define GUARD_PAGE_PROGS 8

/* One of them: the session leaves it to the arming (probes_leave_fn). */
bool guard_kernel__page_prog(const struct probes *p, const struct bpf_program *prog);

struct guard_page_links {
	struct bpf_link *link[GUARD_PAGE_PROGS];
};

/*
 * Attach them all, and pin them in pin_dir (NULL: no pins) so that they
 * outlive this process. 0 or -errno, with nothing left attached.
 */
int guard_kernel__attach_pages(struct probes *p, struct guard_page_links *l,
			       const char *pin_dir);
/* Unpin and detach: they go once no other process holds them. */
void guard_kernel__detach_pages(struct probes *p, struct guard_page_links *l,
				const char *pin_dir);
/* Forget them here: another process (or the pins) holds them. */
void guard_kernel__drop_pages(struct guard_page_links *l);
/* pin_dir holds them pinned: they stay attached whoever holds them. */
bool guard_kernel__pages_pinned(const struct probes *p, const char *pin_dir);

/* Forget that it stopped pid: its next crossing is stopped at once. */
void guard_kernel__forget_stop(struct probes *p, uint32_t pid);
/* --scope pid: membership. 0 or -errno. */
int guard_kernel__scope_pid(struct probes *p, uint32_t pid, bool in);
/* --scope comm: a process name's verdict. 0 or -errno. */
int guard_kernel__scope_comm(struct probes *p, const char *comm, bool in);
/* --scope cgroup: the cgroup directory's fd. 0 or -errno. */
int guard_kernel__scope_cgroup(struct probes *p, int cgroup_fd);

#endif /* UMTRACE_GUARD_KERNEL_H */
