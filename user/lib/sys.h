/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What the system says of itself that umtrace asks in many places: the
 * one clock, CLOCK_MONOTONIC (the clock of the kernel's bpf_ktime_get_ns(),
 * so that times from records and from user space compare directly), and
 * the page size, asked once (records and the kernel count pages, people
 * read bytes).
 */
#ifndef UMTRACE_SYS_H
#define UMTRACE_SYS_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/*
 * -1, 0 or 1 as a < b, a == b, a > b: a comparator for qsort or tsearch
 * chains one per key with ?:.
 */
static inline int cmp__u64(uint64_t a, uint64_t b)
{
	return (a > b) - (a < b);
}

static inline uint64_t clock__ns_of(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static inline uint64_t clock__mono_ns(void)
{
	return clock__ns_of(CLOCK_MONOTONIC);
}

static inline uint64_t clock__mono_ms(void)
{
	return clock__mono_ns() / 1000000;
}

/*
 * ms from now on CLOCK_REALTIME, the clock pthread_cond_timedwait()
 * waits on by default: the deadline of a wait for another thread.
 */
static inline void clock__deadline(struct timespec *ts, unsigned int ms)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/* How much of a process mem__lock() could lock. */
enum mem_lock {
	MEM_LOCK_NONE,		/* nothing: mlockall failed */
	MEM_LOCK_CURRENT,	/* what is mapped now, not what it maps later */
	MEM_LOCK_ALL,		/* all of it, now and later */
};

/*
 * Lock the process's pages in memory as they are touched (MCL_ONFAULT:
 * not the whole of every mapping up front), so that under reclaim its
 * code and data never wait on a page-in. With future set, what it maps
 * later too: only where locking may grow (CAP_IPC_LOCK, or no
 * RLIMIT_MEMLOCK), since past the limit a later mapping, a thread's
 * stack, would fail instead. *err gets mlockall's -errno on failure.
 */
enum mem_lock mem__lock(bool future, int *err);
/* "all", "current", "none". */
const char *mem_lock__name(enum mem_lock l);
/*
 * The process's resident bytes (VmRSS), 0 if unknown: what mem__lock()
 * holds in memory. VmLck counts whole mappings, MCL_ONFAULT's untouched
 * pages included, which are in no memory at all.
 */
uint64_t mem__resident_bytes(void);

/* sysconf's page size, or 4096 where it has none. */
uint64_t page__size(void);
/* log2 of page__size(). */
unsigned int page__shift(void);

#endif /* UMTRACE_SYS_H */
