// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* model/trend.c: a slide named within its horizon, noise and bursts not. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "check.h"
#include "model/trend.h"

#define MIB (1024.0 * 1024.0)
#define GIB (1024.0 * MIB)
#define SEC 1000000000ULL
#define HOUR (3600.0)

/* Deterministic noise in [-amp, amp]: a host's memory moves on its own. */
static double noise(uint64_t *state, double amp)
{
	*state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
	return ((double)(*state >> 11) / (double)(1ULL << 53) * 2 - 1) * amp;
}

/* 128 GiB free, falling 1 GiB an hour: the seed's slide, sampled every 2 s. */
static void feed_slide(struct trend *t, uint64_t seconds, double per_hour, double amp)
{
	uint64_t s, seed = 42;

	for (s = 0; s <= seconds; s += 2)
		trend__add(t, s * SEC, 128 * GIB - per_hour * (double)s / HOUR + noise(&seed, amp));
}

static void test_slide_named_within_its_horizon(void)
{
	struct trend mid, fast;
	struct trend_fit f;

	trend__init(&mid, 900 * SEC);
	trend__init(&fast, 60 * SEC);
	feed_slide(&mid, 900, GIB, 32 * MIB);
	feed_slide(&fast, 900, GIB, 32 * MIB);
	CHECK(trend__fit(&mid, 900 * SEC, &f), "fit", "%u slots", f.slots);
	CHECK(fabs(f.slope * HOUR / GIB + 1) < 0.1, "rate", "%.3f GiB/h", f.slope * HOUR / GIB);
	CHECK(trend_fit__slides(&f, -1, 64 * MIB), "15 min names it",
	      "agreement %.2f, moved %.0f MiB", f.agreement, f.slope * f.span_s / MIB);
	CHECK(!trend_fit__slides(&f, 1, 64 * MIB), "not rising", "agreement %.2f", f.agreement);
	/* 128 GiB at 1 GiB/h: about 128 hours. */
	CHECK(fabs(trend__seconds_to(f.last, -f.slope) / HOUR - 128) < 13, "time to floor",
	      "%.1f h", trend__seconds_to(f.last, -f.slope) / HOUR);
	/* 17 MiB a minute under 32 MiB of noise: a minute cannot name it. */
	CHECK(trend__fit(&fast, 900 * SEC, &f), "fast fit", "%u slots", f.slots);
	CHECK(!trend_fit__slides(&f, -1, 64 * MIB), "1 min does not",
	      "agreement %.2f, moved %.0f MiB", f.agreement, f.slope * f.span_s / MIB);
}

static void test_named_within_minutes(void)
{
	struct trend mid;
	struct trend_fit f;
	uint64_t at = 0, s;

	/* The first minute that names it: no sooner than five 30 s slots. */
	for (s = 60; s <= 900 && !at; s += 30) {
		trend__init(&mid, 900 * SEC);
		feed_slide(&mid, s, GIB, 8 * MIB);
		if (trend__fit(&mid, s * SEC, &f) && trend_fit__slides(&f, -1, 64 * MIB))
			at = s;
	}
	CHECK(at >= 4 * 60 && at <= 6 * 60, "within minutes", "named after %llu s",
	      (unsigned long long)at);
}

static void test_noise_and_a_burst_are_no_slide(void)
{
	struct trend t;
	struct trend_fit f;
	uint64_t s, seed = 7;

	trend__init(&t, 60 * SEC);
	for (s = 0; s <= 60; s++)
		trend__add(&t, s * SEC, 10 * GIB + noise(&seed, 256 * MIB));
	CHECK(trend__fit(&t, 60 * SEC, &f), "fit", "%u slots", f.slots);
	CHECK(!trend_fit__slides(&f, -1, 64 * MIB) && !trend_fit__slides(&f, 1, 64 * MIB),
	      "noise", "agreement %.2f, slope %.1f MiB/s", f.agreement, f.slope / MIB);

	/* Flat but for 4 GiB taken for 6 s: the median slope stays near 0. */
	trend__init(&t, 60 * SEC);
	for (s = 0; s <= 60; s++)
		trend__add(&t, s * SEC, (s >= 20 && s < 26) ? 6 * GIB : 10 * GIB);
	CHECK(trend__fit(&t, 60 * SEC, &f), "burst fit", "%u slots", f.slots);
	CHECK(fabs(f.slope) < MIB, "burst slope", "%.1f MiB/s", f.slope / MIB);
	CHECK(!trend_fit__slides(&f, -1, 64 * MIB), "burst", "agreement %.2f", f.agreement);
}

static void test_horizon_forgets(void)
{
	struct trend t;
	struct trend_fit f;
	uint64_t s;

	trend__init(&t, 60 * SEC);
	CHECK(!trend__fit(&t, 0, &f) && f.slots == 0, "empty", "%u slots", f.slots);
	for (s = 0; s < 8; s += 2)
		trend__add(&t, s * SEC, (double)s);
	CHECK(!trend__fit(&t, 8 * SEC, &f) && f.slots == 4, "too few", "%u slots", f.slots);
	trend__add(&t, 8 * SEC, 8);
	CHECK(trend__fit(&t, 8 * SEC, &f) && f.slots == 5, "enough", "%u slots", f.slots);
	CHECK(fabs(f.slope - 1) < 1e-9 && f.agreement == 1 && f.last == 8, "exact",
	      "slope %f agreement %f last %f", f.slope, f.agreement, f.last);
	/* A minute later those slots are out of the horizon, their places reused. */
	for (s = 68; s < 76; s += 2)
		trend__add(&t, s * SEC, 100 - (double)s);
	CHECK(!trend__fit(&t, 76 * SEC, &f) && f.slots == 4, "forgotten", "%u slots", f.slots);
	trend__add(&t, 76 * SEC, 24);
	CHECK(trend__fit(&t, 76 * SEC, &f) && fabs(f.slope + 1) < 1e-9 && f.agreement == -1,
	      "only the new", "slope %f agreement %f", f.slope, f.agreement);
}

static void test_seconds_to(void)
{
	CHECK(trend__seconds_to(0, 5) == 0, "at the floor", "%f", trend__seconds_to(0, 5));
	CHECK(trend__seconds_to(-3, 5) == 0, "below", "%f", trend__seconds_to(-3, 5));
	CHECK(trend__seconds_to(100, 0) == -1, "flat", "%f", trend__seconds_to(100, 0));
	CHECK(trend__seconds_to(100, -2) == -1, "rising", "%f", trend__seconds_to(100, -2));
	CHECK(trend__seconds_to(100, 4) == 25, "falling", "%f", trend__seconds_to(100, 4));
}

int main(void)
{
	RUN_SUBTEST(test_slide_named_within_its_horizon);
	RUN_SUBTEST(test_named_within_minutes);
	RUN_SUBTEST(test_noise_and_a_burst_are_no_slide);
	RUN_SUBTEST(test_horizon_forgets);
	RUN_SUBTEST(test_seconds_to);
	return CHECK_EXIT();
}
