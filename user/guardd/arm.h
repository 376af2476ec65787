/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * When the guard's page programs are attached. Every page the host takes
 * pays for the kernel's dispatch into BPF once they are (+6% of a
 * page-fault storm here), and far from the floor they decide nothing:
 * admission at GPU calls (uprobes, always attached) reads the kernel's
 * counters by itself. So far from the floor they are detached, and a
 * helper looks at the headroom instead; it attaches them when the
 * headroom falls under a margin that the host cannot consume between two
 * looks GUARD_LOOK_MS apart:
 *
 *	margin = CPUs x rate x (look + late + attach) x GUARD_FASTER
 *
 * rate: the fastest one CPU faulted fresh pages at start, 4 KiB or huge
 * pages, in CPU time (so a busy host does not measure slow); attach: what
 * attaching took at start; late: how far past its time a look may come,
 * one interval at first, and the most any look has come past its time in
 * the last GUARD_LATE_KEEP_MS once that is more (a vCPU not run, a stall
 * in the kernel: a host that delayed the helper once may do it again, so
 * the margin widens at once, and narrows again only once looks have come
 * on time that long: a host busy for a while pays for it a while, not for
 * good); GUARD_FASTER: the kernel may hand out pages faster than faults
 * take them (page cache, a driver's own loop). It detaches them again
 * when the headroom has stayed over twice the margin for GUARD_FAR_MS.
 *
 * Above the margin, the next look may wait as long as the whole host, at
 * GUARD_FASTER times the rate, would take to bring the headroom down to
 * the margin (up to GUARD_LOOK_MAX_MS): far from the floor the helper
 * wakes a few times a second, not a hundred.
 */
#ifndef UMTRACE_GUARD_ARM_H
#define UMTRACE_GUARD_ARM_H

#include <stdbool.h>
#include <stdint.h>

#define GUARD_LOOK_MS		10
#define GUARD_FASTER		2
#define GUARD_FAR_MS		1000
#define GUARD_LOOK_MAX_MS	1000
#define GUARD_LATE_KEEP_MS	(5 * 60 * 1000)
/* Looks by lateness: under 1 ms, then doubling to 128 ms, then the rest. */
#define GUARD_LATE_BUCKETS	9

/* Shared by the daemon and its helper (a MAP_SHARED page). */
struct guard_arm_shared {
	uint64_t margin;	/* bytes; 0 until the helper has measured */
	uint64_t rate;		/* bytes a second one CPU faulted */
	unsigned int cpus;	/* online when it measured */
	uint64_t attach_us;	/* the first attach */
	uint64_t arms, disarms, attach_failures;
	int64_t arm_room, disarm_room;	/* bytes above the floor at the last of each */
	int attach_err;			/* the last failure's -errno */
	uint64_t looks;
	uint64_t widenings;	/* looks later than the margin covered */
	uint64_t narrowings;	/* the margin back down, looks on time again */
	uint64_t max_late_us;	/* the most a look came past its time, ever */
	uint64_t covered_us;	/* the lateness the margin covers now */
	uint64_t late_hist[GUARD_LATE_BUCKETS];	/* looks by guard_late__bucket() */
	uint64_t last_arm_us;	/* the last attach's own time */
	bool on;		/* the page programs are attached */
	bool for_good;		/* attached until the guard exits */
	int memlock;		/* what the helper could lock (enum mem_lock) */
	int sched_err;		/* -errno: it runs at normal priority */
};

enum guard_arm_move {
	GUARD_ARM_STAY,
	GUARD_ARM_ATTACH,
	GUARD_ARM_DETACH,
};

struct guard_arm_state {
	bool on;
	bool far;		/* attached, and over twice the margin since far_since_ms */
	uint64_t far_since_ms;
};

/*
 * How late looks came lately: the most in this half of GUARD_LATE_KEEP_MS
 * and in the half before, so that one is remembered for at least half of
 * it and at most all of it.
 */
struct guard_late {
	uint64_t cur_us, prev_us;
	uint64_t since_ms;	/* this half began */
};

/* Note a look late_us past its time at now_ms; the most to remember now. */
uint64_t guard_late__note(struct guard_late *l, int64_t late_us, uint64_t now_ms);
/* Which bucket of late_hist a look late_us past its time counts in. */
unsigned int guard_late__bucket(int64_t late_us);
/*
 * The lateness pct percent of the looks came within: the top of their
 * bucket, in ms (1, 2, 4 ... 128; UINT32_MAX past it); 0 without looks.
 */
unsigned int guard_late__pct_ms(const uint64_t *hist, unsigned int pct);

/* late_us: the most a look came past its time; under one look, one look. */
uint64_t guard_arm__margin(unsigned int cpus, uint64_t rate, unsigned int look_ms,
			   uint64_t late_us, uint64_t attach_us);
/* The lateness a margin covers once a look came late_us past its time. */
uint64_t guard_arm__covered_late_us(unsigned int look_ms, uint64_t late_us);
/*
 * What to do after a look: have_room false means no figure (no sample
 * yet, a counter unreadable): attached then.
 */
enum guard_arm_move guard_arm__decide(struct guard_arm_state *st, bool have_room,
				      int64_t room, uint64_t margin, uint64_t now_ms);
/*
 * How long the next look may wait, in ms: GUARD_LOOK_MS near the margin
 * or without a figure, longer the further above it.
 */
unsigned int guard_arm__next_look_ms(bool have_room, int64_t room, uint64_t margin,
				     unsigned int cpus, uint64_t rate);
/* The fastest one CPU faults fresh anonymous pages, bytes a second. 0 or -errno. */
int guard_arm__fault_rate(uint64_t *rate);

#endif /* UMTRACE_GUARD_ARM_H */
