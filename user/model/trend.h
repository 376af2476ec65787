/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Where a series is going, over one horizon, in bounded memory: the
 * horizon is cut into TREND_SLOTS slots, each keeping the mean of the
 * values that fell in it. The slope is Theil and Sen's, the median of the
 * slopes between every two slots: a burst or a dip in a few slots (a
 * reclaim, a VM's free page reporting, a peak of activations) cannot move
 * it. Whether the series really moves is Mann and Kendall's question: of
 * every two slots, how many more rise than fall (agreement, -1 to 1).
 * Pure: no /proc, no clock; the caller gives each value its time.
 *
 * A horizon names only a slide that shows within it: TREND_MIN_SLOTS
 * slots of it must hold values, so a 1 h horizon of 2 min slots says
 * nothing in a job's first 10 minutes, and a slide of 1 GiB/h moves a
 * 1 min horizon by 17 MiB, well within the noise of a host's memory.
 */
#ifndef UMTRACE_TREND_H
#define UMTRACE_TREND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TREND_SLOTS		30
#define TREND_MIN_SLOTS		5
/* Of every two slots, this share more falling than rising (or rising than falling). */
#define TREND_AGREEMENT		0.6

/*
 * 12 bytes a slot: nine trends of 30 slots per PyTorch device, kept for
 * hundreds of processes by top. The slot number is kept modulo 2^32
 * (compared by difference: it wraps after 2^32 slots, 272 years of the
 * minute's 2 s), the mean as a float (its rounding, 2^-24 of the value,
 * is 256 bytes of 4 GiB).
 */
struct trend_slot {
	uint32_t n;			/* slot number: ts / slot_ns + 1, mod 2^32; 0: empty */
	uint32_t count;
	float mean;
};

struct trend {
	uint64_t slot_ns;		/* horizon / TREND_SLOTS */
	struct trend_slot slots[TREND_SLOTS];	/* by slot number mod TREND_SLOTS */
};

struct trend_fit {
	unsigned int slots;		/* holding values, in the horizon */
	double span_s;			/* from the first to the last of them */
	double slope;			/* per second, Theil-Sen */
	double agreement;		/* (rising - falling) / pairs */
	double last;			/* the newest slot's mean */
};

void trend__init(struct trend *t, uint64_t horizon_ns);
void trend__add(struct trend *t, uint64_t ts_ns, double v);
/* Fit the slots within the horizon that ends at now_ns; false if too few. */
bool trend__fit(const struct trend *t, uint64_t now_ns, struct trend_fit *f);
/*
 * The fit shows a slide: its slots agree on the direction (sign: -1
 * falling, 1 rising), and over the span it moved at least min_move.
 */
bool trend_fit__slides(const struct trend_fit *f, int sign, double min_move);

/*
 * Seconds until a level now above a floor by headroom reaches it, at a
 * fall of rate per second; -1 when it does not fall (rate <= 0). 0 when
 * already at or below it.
 */
double trend__seconds_to(double headroom, double rate);

#endif /* UMTRACE_TREND_H */
