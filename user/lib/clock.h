/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The one clock of umtrace: CLOCK_MONOTONIC, the clock of the kernel's
 * bpf_ktime_get_ns(), so that times from records and from user space
 * compare directly.
 */
#ifndef UMTRACE_CLOCK_H
#define UMTRACE_CLOCK_H

#include <stdint.h>
#include <time.h>

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

#endif /* UMTRACE_CLOCK_H */
