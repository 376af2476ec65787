// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include "guard/arm.h"
#include "lib/sys.h"

/*
 * Enough pages that a fault's fixed cost is averaged (8 huge pages, 4096
 * small ones); little to take under the unit's MemoryMax.
 */
#define RATE_BYTES	(16ULL << 20)
#define RATE_TRIES	2
#define HUGE_ALIGN	(2ULL << 20)

uint64_t guard_arm__covered_late_us(unsigned int look_ms, uint64_t late_us)
{
	uint64_t look_us = (uint64_t)look_ms * 1000;

	return late_us > look_us ? late_us : look_us;
}

uint64_t guard_late__note(struct guard_late *l, int64_t late_us, uint64_t now_ms)
{
	if (!l->since_ms)
		l->since_ms = now_ms;
	while (now_ms - l->since_ms >= GUARD_LATE_KEEP_MS / 2) {
		l->prev_us = l->cur_us;
		l->cur_us = 0;
		l->since_ms += GUARD_LATE_KEEP_MS / 2;
	}
	if (late_us > 0 && (uint64_t)late_us > l->cur_us)
		l->cur_us = (uint64_t)late_us;
	return l->cur_us > l->prev_us ? l->cur_us : l->prev_us;
}

unsigned int guard_late__bucket(int64_t late_us)
{
	unsigned int b = 0;

	while (b + 1 < GUARD_LATE_BUCKETS && late_us >= (1000LL << b))
		b++;
	return b;
}

unsigned int guard_late__pct_ms(const uint64_t *hist, unsigned int pct)
{
	uint64_t n = 0, seen = 0;
	unsigned int b;

	for (b = 0; b < GUARD_LATE_BUCKETS; b++)
		n += hist[b];
	if (!n)
		return 0;
	for (b = 0; b < GUARD_LATE_BUCKETS; b++) {
		seen += hist[b];
		if (seen * 100 >= n * pct)
			break;
	}
	return b + 1 < GUARD_LATE_BUCKETS ? 1U << b : UINT32_MAX;
}

uint64_t guard_arm__margin(unsigned int cpus, uint64_t rate, unsigned int look_ms,
			   uint64_t late_us, uint64_t attach_us)
{
	unsigned __int128 us = (unsigned __int128)look_ms * 1000 +
			       guard_arm__covered_late_us(look_ms, late_us) + attach_us;
	unsigned __int128 m;

	/* A look very late on a large host must not wrap round to a small margin. */
	if (us > UINT64_MAX / GUARD_FASTER)
		return UINT64_MAX;
	m = (unsigned __int128)cpus * rate * (us * GUARD_FASTER) / 1000000;
	return m > UINT64_MAX ? UINT64_MAX : (uint64_t)m;
}

enum guard_arm_move guard_arm__decide(struct guard_arm_state *st, bool have_room,
				      int64_t room, uint64_t margin, uint64_t now_ms)
{
	if (!st->on) {
		if (have_room && room >= 0 && (uint64_t)room >= margin)
			return GUARD_ARM_STAY;
		st->on = true;
		st->far = false;
		return GUARD_ARM_ATTACH;
	}
	if (!have_room || room < 0 || (uint64_t)room <= 2 * margin) {
		st->far = false;
		return GUARD_ARM_STAY;
	}
	if (!st->far) {
		st->far = true;
		st->far_since_ms = now_ms;
		return GUARD_ARM_STAY;
	}
	if (now_ms - st->far_since_ms < GUARD_FAR_MS)
		return GUARD_ARM_STAY;
	st->on = false;
	st->far = false;
	return GUARD_ARM_DETACH;
}

unsigned int guard_arm__next_look_ms(bool have_room, int64_t room, uint64_t margin,
				     unsigned int cpus, uint64_t rate)
{
	unsigned __int128 speed = (unsigned __int128)cpus * rate * GUARD_FASTER;
	unsigned __int128 ms;

	if (!have_room || room < 0 || (uint64_t)room <= margin || !speed)
		return GUARD_LOOK_MS;
	ms = ((uint64_t)room - margin) * (unsigned __int128)1000 / speed;
	if (ms < GUARD_LOOK_MS)
		return GUARD_LOOK_MS;
	return ms > GUARD_LOOK_MAX_MS ? GUARD_LOOK_MAX_MS : (unsigned int)ms;
}

/* One pass over fresh memory; bytes a CPU second, 0 if it could not map. */
static uint64_t fault_once(bool huge)
{
	size_t len = RATE_BYTES + HUGE_ALIGN, page = (size_t)sysconf(_SC_PAGESIZE), i;
	char *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	volatile char *at;
	uint64_t t0, ns;

	if (map == MAP_FAILED)
		return 0;
	at = (char *)(((uintptr_t)map + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1));
	/* Either may be refused (no THP here): the pass measures what it gets. */
	madvise((void *)at, RATE_BYTES, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	t0 = clock__ns_of(CLOCK_THREAD_CPUTIME_ID);
	for (i = 0; i < RATE_BYTES; i += page)
		at[i] = 1;
	ns = clock__ns_of(CLOCK_THREAD_CPUTIME_ID) - t0;
	munmap(map, len);
	return ns ? (uint64_t)((unsigned __int128)RATE_BYTES * 1000000000ULL / ns) : 0;
}

int guard_arm__fault_rate(uint64_t *rate)
{
	uint64_t best = 0, r;
	int i;

	for (i = 0; i < 2 * RATE_TRIES; i++) {
		r = fault_once(i & 1);
		if (r > best)
			best = r;
	}
	*rate = best;
	return best ? 0 : -ENOMEM;
}
