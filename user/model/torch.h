/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * PyTorch's CUDA caching allocator seen from outside: per process and
 * device, what its hook (c10::reportMemoryUsageToProfiler, bpf/torch.bpf.c)
 * said of allocated and reserved bytes, whether expandable segments are on,
 * and a verdict that names the fix. Fed samples (live, or from a
 * recording) and GPU call records; pure: no BPF, no /proc, no printing
 * (one environment variable aside, the tests': TORCH_TEST_HORIZONS).
 *
 * The figures. allocated is what live tensors' blocks take, reserved what
 * the allocator holds from the driver (its segments); reserved - allocated
 * is its cache. Between samples reserved moves with the driver calls that
 * make the allocator's segments, while they agree with the hook
 * (model/torch_seg.h): the figure shown, its peak and its slot's highest;
 * allocated stays the last sample's. Within a training step allocated swings from the step's
 * floor (weights, optimizer state: what outlives the step) to its peak
 * (activations), so the current cache says little. Each sample carries
 * allocated's lowest and highest since the one before (the kernel keeps
 * them), and the model keeps, per slot of rules.window_ns / TORCH_SLOTS,
 * reserved and allocated's floor and peak. Its judgements are on those:
 *
 *   unused    reserved - the highest allocated in the window: cache that no
 *             tensor needed in the window, its share of reserved
 *   floor     the lowest allocated in a slot: what outlives the steps
 *
 * The rule. Samples from the first until rules.warmup_ns later are the
 * warm-up (the first steps allocate weights, optimizer state, caches): no
 * verdict but ok, and "warm-up" until at least TORCH_MIN_SLOTS slots
 * after it hold samples. Then, over the last window of samples (the
 * window ends at the process's last sample, so one that went idle keeps
 * the verdict of its last active window), early = its first half of
 * slots, late = its second half, growth = late - early, significant when
 * at least max(rules.min_growth, rules.growth_frac x early):
 *
 *   leak           the floor grows significantly, rising from slot to slot
 *                  at least twice: tensors kept alive, step after step
 *                  (reserved grows with it, or will)
 *   fragmentation  reserved grows significantly, in at least two slot
 *                  steps, the floor does not, reserved grows more than
 *                  twice as fast as allocated's peak, and the unused share
 *                  is at least rules.frag_share and rising (by 2 points,
 *                  or, once near 1, the unused bytes by a significant
 *                  growth): new segments while cached blocks of the wrong
 *                  sizes stay free
 *   cache-held     reserved does not grow significantly, and the unused
 *                  share is at least rules.cache_share and at least
 *                  rules.cache_min bytes: a peak's segments kept
 *   ok             anything else
 *
 * With the old 3-argument hook reserved is unknown: only leak or ok.
 *
 * Episodes. Each verdict other than ok, named on the window or on a
 * horizon, is an episode of the process's life: its kind, where it was
 * named (the window, or a horizon's length), its first and last sample's
 * times and the figures there (for the window, its first and last slots';
 * for a horizon, its slots' means at both ends of the fit), and the rate
 * per hour on a horizon. The model judges as samples come, once a slot
 * (when a sample opens a new one, the window that ended with the slot
 * before), the horizons only when the shortest's slot turns (every
 * 2 s): top on hundreds of processes pays a few judgements a second for
 * each that moves, not one per sample. Judgements of one kind in a row,
 * or within a window of the last episode of that kind, extend it. At most
 * TORCH_EPISODES are kept per device: when full, the two closest
 * neighbours of one kind become one; failing that, the least severe and
 * shortest goes; never the root cause nor the newest.
 *
 * The root cause is the most severe episode: leak, then fragmentation,
 * then cache-held (a leak grows without bound and hides the rest;
 * fragmentation grows reserved until the job dies, where a held cache
 * stays where it is and is what a fragmenting allocator leaves behind),
 * the earliest among equals. The verdict carries it, with its advice: a
 * burst of fragmentation that ends in steady steps from cache stays
 * fragmentation (expandable segments), not the cache-held of the window
 * now (empty_cache, the wrong fix).
 * Expandable segments are on when the process's environment says so
 * (PYTORCH_CUDA_ALLOC_CONF or PYTORCH_ALLOC_CONF: expandable_segments:True)
 * or when it made a cuMemCreate of 2 MiB or 20 MiB (the allocator's pages;
 * the classic allocator never calls cuMemCreate); off when the environment
 * was read and says nothing of it, or when its segments came from
 * cuMemAlloc and no such cuMemCreate; else unknown.
 */
#ifndef UMTRACE_TORCH_H
#define UMTRACE_TORCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "lib/pid_table.h"
#include "model/alloc_table.h"
#include "model/torch_seg.h"
#include "model/trend.h"
#include "umtrace.h"

/* Slots in a window; at least this many after the warm-up to judge. */
#define TORCH_SLOTS		8
#define TORCH_MIN_SLOTS		3
/*
 * Horizons beyond the window, 1 min, 15 min and 1 h (rules.horizon_s,
 * model/torch_slide.c, model/trend.h): a
 * slide too slow for the window (the seed's 1 GB/h is 1.1 MiB a 4 s
 * window) is named on the shortest on which allocated's floor rises by a
 * significant growth (leak), or reserved and its unused part do while the
 * floor does not (fragmentation), most of every two of its slots agreeing.
 * A horizon is judged once its slots span half of it: what is shorter
 * is the window's.
 */
#define TORCH_HORIZONS		3
/* Call sites of its segments kept per process: those that took most. */
#define TORCH_SITES		4
/* Episodes kept per device, for its life. */
#define TORCH_EPISODES		8

/* struct torch_sample's flags */
#define TORCH_S_TOTALS		(1U << 0)	/* reserved is the allocator's own */
#define TORCH_S_CONF		(1U << 1)	/* the environment was read */
#define TORCH_S_CONF_SET	(1U << 2)	/* it sets the allocator's config */
#define TORCH_S_EXPANDABLE	(1U << 3)	/* expandable_segments:True */
#define TORCH_S_MAX_SPLIT	(1U << 4)	/* max_split_size_mb set */
#define TORCH_S_WINDOWED	(1U << 5)	/* allocs, frees: those the hook's windows saw */

/* One process and device, as a hook call left it. */
struct torch_sample {
	uint64_t ts_ns;			/* CLOCK_MONOTONIC */
	uint32_t pid;
	uint32_t device;
	uint32_t flags;			/* TORCH_S_* */
	uint64_t allocated;
	uint64_t reserved;		/* 0 without TORCH_S_TOTALS */
	uint64_t peak_allocated;
	uint64_t peak_reserved;
	uint64_t alloc_low;		/* allocated's range since the sample before */
	uint64_t alloc_high;
	uint64_t allocs;		/* block allocations and frees reported */
	uint64_t frees;
	char comm[TASK_COMM_LEN];
};

struct torch_rules {
	uint64_t warmup_ns;
	uint64_t window_ns;		/* TORCH_SLOTS slots */
	uint64_t min_growth;		/* bytes */
	double growth_frac;		/* of the early figure */
	double frag_share;		/* unused share of reserved */
	double cache_share;
	uint64_t cache_min;		/* bytes unused */
	uint64_t horizon_s[TORCH_HORIZONS];	/* shortest first */
	bool test_horizons;		/* TORCH_TEST_HORIZONS's, not the product's */
};

/*
 * For the tests alone: "S,S,S", the horizons in seconds (10 s at least,
 * each longer than the one before), so that an end-to-end test sees a
 * slide of hours compressed into seconds, as unit tests set window_ns.
 * No option names it: a product's horizons are 1 min, 15 min and 1 h.
 * Read by torch_rules__default(); report says when it is in force.
 */
#define TORCH_TEST_HORIZONS	"UMTRACE_TEST_HORIZONS"

/*
 * 2 s of warm-up, 4 s windows, 2 MiB or 5%, 25% and 50% unused, 64 MiB;
 * horizons of 1 min, 15 min and 1 h, or TORCH_TEST_HORIZONS's.
 */
void torch_rules__default(struct torch_rules *r);
/* The horizons from a TORCH_TEST_HORIZONS spec (NULL: none); 0 or -EINVAL. */
int torch_rules__horizons(struct torch_rules *r, const char *spec);

enum torch_kind {
	TORCH_OK,
	TORCH_FRAGMENTATION,
	TORCH_LEAK,
	TORCH_CACHE_HELD,
	TORCH__KINDS,
};

enum torch_es {
	TORCH_ES_UNKNOWN,
	TORCH_ES_OFF,
	TORCH_ES_ON,
};

/* What to do, as facts; export/torch_out.c words them. */
#define TORCH_ADV_EXPANDABLE	(1U << 0)	/* turn expandable segments on */
#define TORCH_ADV_NO_MAX_SPLIT	(1U << 1)	/* take max_split_size_mb out */
#define TORCH_ADV_EMPTY_CACHE	(1U << 2)	/* torch.cuda.empty_cache() */
#define TORCH_ADV_FRACTION	(1U << 3)	/* set_per_process_memory_fraction */
#define TORCH_ADV_LEAK_SITES	(1U << 4)	/* what keeps tensors alive */

/*
 * A verdict other than ok, from its first judgement to its last; the
 * figures at both ends ([0] at start, [1] at end): reserved, allocated's
 * floor and peak, unused (reserved - the peak).
 */
struct torch_episode {
	enum torch_kind kind;
	uint64_t horizon_s;		/* 0: the window; else the horizon's length */
	uint64_t start_ns, end_ns;	/* CLOCK_MONOTONIC, of samples */
	uint64_t reserved[2], floor[2], peak[2], unused[2];
	double per_hour;		/* on a horizon: floor (leak) or reserved, per hour */
};

/* A judgement of one process and device, made once and handed on. */
struct torch_verdict {
	enum torch_kind kind;
	bool warmup;			/* no judgement yet */
	bool reserved_known;		/* the hook gave the allocator's totals */
	/*
	 * reserved (and cached) is not the last sample's but what its
	 * segments' driver calls made it since (model/torch_seg.h);
	 * allocated is still the last sample's
	 */
	bool reserved_from_calls;
	enum torch_es expandable;
	bool max_split;			/* max_split_size_mb in its environment */
	/* at the last sample; reserved and cached now, with reserved_from_calls */
	uint64_t allocated, reserved, cached;
	uint64_t peak_allocated, peak_reserved;	/* reserved's: the calls' moves too */
	double cached_share;		/* cached / reserved */
	/* over the window judged (none in the warm-up) */
	uint64_t span_ns;
	unsigned int slots;
	uint64_t used;			/* the highest allocated */
	uint64_t unused;		/* reserved - used, at its end */
	double unused_share, unused_share_early;
	int64_t reserved_growth;	/* late - early, bytes */
	int64_t floor_growth;
	int64_t peak_growth;		/* of allocated's highest */
	unsigned int advice;		/* TORCH_ADV_*, of the root cause */
	/* named on a horizon beyond the window: its length (s; 0: none), the rate */
	uint64_t slide_horizon;
	double slide_per_hour;		/* of the floor (leak) or reserved (fragmentation) */
	/* the call sites of its segments (callsites ids), most bytes first */
	uint32_t sites[TORCH_SITES];
	unsigned int n_sites;
	/*
	 * The root cause: the most severe episode of its life, the current
	 * judgement's among them (kind above is the window's now).
	 */
	bool has_cause;
	struct torch_episode cause;
	uint64_t first_ns, last_ns;	/* its first and last sample */
	unsigned int n_episodes;	/* kept, of this device (judge_pid: all) */
};

struct torch_slot {
	uint64_t n;			/* slot number: ts / slot_ns; 0: empty */
	uint64_t ts, ts_last;		/* its first and last samples' */
	uint64_t reserved_max;
	uint64_t low, high;		/* allocated */
};

/*
 * A horizon's judgement, kept until its slot turns: each is a fit of up to
 * 30 slots, and what a slot's few more samples change is not worth
 * fitting again for (the minute's slot is 2 s, the hour's 2 min).
 */
struct torch_slide {
	uint64_t slot;			/* its trend's slot number then; 0: none */
	enum torch_kind kind;		/* ok, leak or fragmentation */
	double per_hour;
};

/* A call site of a process's segments, and the bytes its calls took there. */
struct torch_site {
	uint32_t id;			/* callsites id; 0: none */
	uint64_t bytes;
};

struct torch_dev {
	uint32_t pid;
	uint32_t device;
	bool exited;
	/* its process's calls, kept at its exit */
	bool created, segments;
	struct torch_site sites[TORCH_SITES];
	uint64_t first_ns;
	struct torch_sample last;
	struct torch_seg_dev seg;	/* reserved between samples, from calls */
	struct torch_slot slots[TORCH_SLOTS];	/* by slot number mod TORCH_SLOTS */
	struct trend floor_t[TORCH_HORIZONS];	/* allocated's lowest */
	struct trend reserved_t[TORCH_HORIZONS];
	struct trend unused_t[TORCH_HORIZONS];	/* reserved - allocated's highest */
	struct torch_slide slides[TORCH_HORIZONS];
	uint64_t slot_n;		/* the newest sample's slot number */
	bool open;			/* the last judgement extended the last episode */
	struct torch_episode episodes[TORCH_EPISODES];	/* oldest first */
	unsigned int n_episodes;
};

struct torch_model {
	struct torch_rules rules;
	struct torch_dev *devs;
	size_t n, cap;
	struct pid_table procs;		/* struct torch_proc, from GPU calls */
	struct alloc_table segs;	/* their segments outstanding (torch_seg.h) */
	bool forget_exited;		/* drop a process at its end (top) */
};

void torch_model__init(struct torch_model *m, const struct torch_rules *rules);
void torch_model__free(struct torch_model *m);
/* Take a sample; 0 or -ENOMEM. */
int torch_model__add(struct torch_model *m, const struct torch_sample *s);
/*
 * A GPU call: how the process gets its segments (expandable or not), and
 * where from (site: its call site's id, 0 when not known).
 */
void torch_model__call(struct torch_model *m, const struct umt_call_rec *r, uint32_t site);
void torch_model__exit(struct torch_model *m, uint32_t pid);
/* Device i of those seen, 0 <= i < m->n (sorted by pid and device). */
const struct torch_dev *torch_model__dev(const struct torch_model *m, size_t i);
/*
 * Judge one device over its last window, and name its root cause (the
 * window's judgement now among its episodes).
 */
void torch_model__judge(const struct torch_model *m, const struct torch_dev *d,
			struct torch_verdict *v);
/*
 * A process over all its devices: the figures summed, the verdict of the
 * device with the worst root cause (then the worst window: leak,
 * fragmentation, cache-held, ok); false if it never reported.
 */
bool torch_model__judge_pid(const struct torch_model *m, uint32_t pid,
			    struct torch_verdict *v);

/*
 * A device's reserved now: its last sample's, or where its segments'
 * driver calls moved it since (*from_calls; model/torch_seg.h).
 */
uint64_t torch_model__reserved(const struct torch_model *m, const struct torch_dev *d,
			       bool *from_calls);

/* A device's episodes, oldest first (*out: into d); how many. */
size_t torch_dev__episodes(const struct torch_dev *d, const struct torch_episode **out);
/* The order of root causes: leak 3, fragmentation 2, cache-held 1, ok 0. */
int torch_kind__severity(enum torch_kind k);

/* "ok", "fragmentation", "leak", "cache-held". */
const char *torch_kind__name(enum torch_kind k);
/* TORCH_S_CONF_SET, _EXPANDABLE, _MAX_SPLIT of an allocator config string. */
uint32_t torch_conf__parse(const char *conf);

#endif /* UMTRACE_TORCH_H */
