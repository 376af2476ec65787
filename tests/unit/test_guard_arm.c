// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "check.h"
#include "guardd/arm.h"

#define MIB (1ULL << 20)
#define GIB (1ULL << 30)

static void test_margin(void)
{
	/* 2 CPUs x 8 GiB/s x (10 ms + 10 ms late + 500 us) x 2: 656 MiB and a bit. */
	uint64_t m = guard_arm__margin(2, 8 * GIB, 10, 0, 500);

	CHECK_EQ(m, 2ULL * 8 * GIB * 20500 * 2 / 1000000, "2 cpus");
	/* It grows with the CPU count and the look, never with the headroom. */
	CHECK_EQ(guard_arm__margin(72, 8 * GIB, 10, 0, 500),
		 72ULL * 8 * GIB * 20500 * 2 / 1000000, "72 cpus");
	CHECK(guard_arm__margin(2, 8 * GIB, 20, 0, 500) > m, "longer look", "%llu",
	      (unsigned long long)guard_arm__margin(2, 8 * GIB, 20, 0, 500));
	/* 1024 CPUs at 64 GiB/s do not overflow. */
	CHECK(guard_arm__margin(1024, 64 * GIB, 10, 0, 1000) > 1024ULL * GIB, "large", "%llu",
	      (unsigned long long)guard_arm__margin(1024, 64 * GIB, 10, 0, 1000));
}

/* A look later than one interval widens the margin by what it came late. */
static void test_margin_late(void)
{
	uint64_t m = guard_arm__margin(2, 8 * GIB, 10, 0, 500);

	CHECK_EQ(guard_arm__covered_late_us(10, 0), 10000, "one look at first");
	CHECK_EQ(guard_arm__covered_late_us(10, 4000), 10000, "under a look");
	CHECK_EQ(guard_arm__covered_late_us(10, 39600), 39600, "past a look");
	CHECK_EQ(guard_arm__margin(2, 8 * GIB, 10, 9999, 500), m, "within one look");
	CHECK_EQ(guard_arm__margin(2, 8 * GIB, 10, 39600, 500),
		 2ULL * 8 * GIB * (10000 + 39600 + 500) * 2 / 1000000, "39.6 ms late");
	/* A year late on a large host saturates: attached for good, never a wrap. */
	CHECK_EQ(guard_arm__margin(1024, 64 * GIB, 10, 3600ULL * 1000000 * 24 * 365, 1000),
		 UINT64_MAX, "a year late");
	CHECK_EQ(guard_arm__margin(2, 8 * GIB, 10, UINT64_MAX, 500), UINT64_MAX, "forever late");
}

static void test_attach_near(void)
{
	struct guard_arm_state st = { .on = false };

	CHECK_EQ(guard_arm__decide(&st, true, 2 * GIB, GIB, 100), GUARD_ARM_STAY, "far");
	CHECK_EQ(guard_arm__decide(&st, true, GIB - 1, GIB, 110), GUARD_ARM_ATTACH, "near");
	CHECK(st.on, "on", "still off");
	CHECK_EQ(guard_arm__decide(&st, true, -5, GIB, 120), GUARD_ARM_STAY, "below");
}

static void test_attach_without_figure(void)
{
	struct guard_arm_state st = { .on = false };

	CHECK_EQ(guard_arm__decide(&st, false, 100 * GIB, GIB, 100), GUARD_ARM_ATTACH,
		 "no figure");
	/* No figure keeps them attached however long. */
	CHECK_EQ(guard_arm__decide(&st, false, 100 * GIB, GIB, 100 + 10 * GUARD_FAR_MS),
		 GUARD_ARM_STAY, "still none");
}

/* Detached only after GUARD_FAR_MS over twice the margin, without a dip. */
static void test_detach_hysteresis(void)
{
	struct guard_arm_state st = { .on = true };
	uint64_t t = 1000;

	CHECK_EQ(guard_arm__decide(&st, true, 2 * GIB - 1, GIB, t), GUARD_ARM_STAY, "under 2x");
	CHECK_EQ(guard_arm__decide(&st, true, 3 * GIB, GIB, t + 10), GUARD_ARM_STAY, "far, new");
	CHECK_EQ(guard_arm__decide(&st, true, 3 * GIB, GIB, t + 10 + GUARD_FAR_MS - 1),
		 GUARD_ARM_STAY, "not yet");
	/* A dip under twice the margin starts the wait over. */
	CHECK_EQ(guard_arm__decide(&st, true, GIB, GIB, t + 10 + GUARD_FAR_MS), GUARD_ARM_STAY,
		 "dip");
	CHECK_EQ(guard_arm__decide(&st, true, 3 * GIB, GIB, t + 20 + GUARD_FAR_MS),
		 GUARD_ARM_STAY, "far again");
	CHECK_EQ(guard_arm__decide(&st, true, 3 * GIB, GIB, t + 20 + 2 * GUARD_FAR_MS),
		 GUARD_ARM_DETACH, "detach");
	CHECK(!st.on, "off", "still on");
}

/*
 * Above the margin a look may wait until the whole host, at twice the
 * rate, could have brought the headroom down to it; never under a look's
 * interval, never over GUARD_LOOK_MAX_MS.
 */
static void test_next_look(void)
{
	/* 2 CPUs x 1 GiB/s x 2: 4 GiB/s; 1 GiB over the margin is 250 ms. */
	CHECK_EQ(guard_arm__next_look_ms(true, 2 * GIB, GIB, 2, GIB), 250, "250 ms");
	CHECK_EQ(guard_arm__next_look_ms(true, GIB + MIB, GIB, 2, GIB), GUARD_LOOK_MS, "near");
	CHECK_EQ(guard_arm__next_look_ms(true, GIB / 2, GIB, 2, GIB), GUARD_LOOK_MS, "under");
	CHECK_EQ(guard_arm__next_look_ms(true, -1, GIB, 2, GIB), GUARD_LOOK_MS, "below");
	CHECK_EQ(guard_arm__next_look_ms(false, 100 * GIB, GIB, 2, GIB), GUARD_LOOK_MS,
		 "no figure");
	CHECK_EQ(guard_arm__next_look_ms(true, 100 * GIB, GIB, 2, GIB), GUARD_LOOK_MAX_MS, "far");
	CHECK_EQ(guard_arm__next_look_ms(true, 100 * GIB, GIB, 2, 0), GUARD_LOOK_MS, "no rate");
}

static void test_fault_rate(void)
{
	uint64_t rate = 0;

	CHECK_EQ(guard_arm__fault_rate(&rate), 0, "measured");
	/* Any CPU this runs on faults faster than 10 MiB a second. */
	CHECK(rate > 10 * MIB, "rate", "%llu B/s", (unsigned long long)rate);
}

/*
 * A late look is covered at once, and for at least half of
 * GUARD_LATE_KEEP_MS; once looks have come on time for all of it, the
 * margin is what it was: a busy while costs a while, not for good.
 */
static void test_late_is_forgotten(void)
{
	const uint64_t half = GUARD_LATE_KEEP_MS / 2, t0 = 1000;
	struct guard_late l = {};

	CHECK_EQ(guard_late__note(&l, -3, t0), 0, "early");
	CHECK_EQ(guard_late__note(&l, 2000, t0 + 10), 2000, "on time enough");
	CHECK_EQ(guard_late__note(&l, 29800, t0 + 20), 29800, "late: at once");
	CHECK_EQ(guard_late__note(&l, 100, t0 + 30), 29800, "still covered");
	CHECK_EQ(guard_late__note(&l, 100, t0 + half + 5), 29800, "in the half after");
	CHECK_EQ(guard_late__note(&l, 100, t0 + 2 * half + 5), 100, "forgotten after both");
	CHECK_EQ(guard_late__note(&l, 5000, t0 + 2 * half + 6), 5000, "a new one");
	/* A long quiet gap (no look: a suspended host) forgets as much. */
	CHECK_EQ(guard_late__note(&l, 0, t0 + 10 * half), 0, "after a gap");
}

int main(void)
{
	RUN_SUBTEST(test_margin);
	RUN_SUBTEST(test_margin_late);
	RUN_SUBTEST(test_late_is_forgotten);
	RUN_SUBTEST(test_attach_near);
	RUN_SUBTEST(test_attach_without_figure);
	RUN_SUBTEST(test_detach_hysteresis);
	RUN_SUBTEST(test_next_look);
	RUN_SUBTEST(test_fault_rate);
	return CHECK_EXIT();
}
