// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * hookloop: what PyTorch's allocator hook costs a job once umtrace probes
 * it (tests/bench/suite.py, the torch pass). Two loops, against the fake
 * libc10.so:
 *
 *   hookloop -n CALLS [-3]     the hook alone, CALLS times (an allocation
 *                              and its free per two calls): ns per call
 *   hookloop -r RATE -t SECS   a job making RATE tensor allocations a
 *                              second on the caching allocator of
 *                              tests/workloads/caching_allocator.c (a free
 *                              after each: two hook calls), paced in 10 ms
 *                              ticks: the CPU time it took
 *
 * One JSON line on stdout: {"calls":N,"wall_s":W,"cpu_s":C,"ns_per_call":X},
 * X the wall time per call of the tight loop, the CPU time of the paced one.
 * -3 calls the old 3-argument form. -d MS waits before the loop, after
 * printing "ready" on stderr, so a tracer started beside it can attach.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "c10_fake.h"
#include "caching_allocator.h"
#include "cuda_fake.h"

#define TICK_NS 10000000ULL	/* the paced loop's tick */
#define SHAPES 8

static uint64_t now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static void usage(void)
{
	fprintf(stderr, "usage: hookloop (-n CALLS [-3] | -r RATE -t SECONDS) [-d MS]\n");
	exit(2);
}

static unsigned long number(const char *s, unsigned long max)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || !v || v > max)
		usage();
	return v;
}

/* The hook alone: the CUDA device, totals moving as a job's would. */
static uint64_t tight(unsigned long calls, int v1)
{
	struct c10_device dev = { .type = C10_DEVICE_CUDA, .index = 0 };
	uint64_t allocated = 64 << 20, reserved = 256 << 20;
	unsigned long i;

	for (i = 0; i < calls; i++) {
		int64_t size = i & 1 ? -(int64_t)(1 << 20) : (int64_t)(1 << 20);
		void *ptr = (void *)(uintptr_t)(0x7f0000000000ULL + (i & ~1UL) * 4096);

		allocated += (uint64_t)size;
		if (v1)
			c10_report_memory_usage_v1(ptr, size, dev);
		else
			c10_report_memory_usage(ptr, size, allocated, reserved, dev);
	}
	return calls;
}

/* A training loop's tensors: RATE allocations a second, each freed. */
static uint64_t paced(unsigned long rate, unsigned long secs)
{
	static const uint64_t shapes[SHAPES] = {
		3 << 20, 768 << 10, 256 << 10, 5 << 20, 1536 << 10, 512 << 10, 12 << 20, 64 << 10,
	};
	uint64_t start = now_ns(CLOCK_MONOTONIC), next = start, done = 0, want;
	struct timespec ts;
	struct ca_block *b;

	while (next < start + secs * 1000000000ULL) {
		next += TICK_NS;
		want = (next - start) * rate / 1000000000ULL;
		for (; done < want; done++) {
			b = ca_malloc(shapes[done % SHAPES]);
			ca_free(b);
		}
		ts.tv_sec = (time_t)(next / 1000000000ULL);
		ts.tv_nsec = (long)(next % 1000000000ULL);
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
	}
	return 2 * done;
}

int main(int argc, char **argv)
{
	struct ca_config cfg = { .hook = CA_HOOK_SIZE_T, .gpu_mem = 4ULL << 30 };
	unsigned long calls = 0, rate = 0, secs = 0, delay = 0;
	double c0, w0, cpu, wall;
	uint64_t made;
	int v1 = 0, c;

	while ((c = getopt(argc, argv, "n:r:t:d:3")) != -1) {
		switch (c) {
		case 'n':
			calls = number(optarg, 1UL << 40);
			break;
		case 'r':
			rate = number(optarg, 10000000);
			break;
		case 't':
			secs = number(optarg, 3600);
			break;
		case 'd':
			delay = number(optarg, 3600000);
			break;
		case '3':
			v1 = 1;
			break;
		default:
			usage();
		}
	}
	if (optind != argc || !calls == !rate || (rate && !secs))
		usage();
	if (rate) {
		/* Segments before the clock starts, as a job past its warm-up. */
		CA_CU(cuInit, 0, (0));
		ca_init(&cfg);
		ca_free(ca_malloc(12 << 20));
		ca_free(ca_malloc(1 << 20));
	}
	if (delay) {
		fprintf(stderr, "hookloop: ready, pid %d\n", (int)getpid());
		usleep((useconds_t)delay * 1000);
	}
	c0 = cpu_s();
	w0 = (double)now_ns(CLOCK_MONOTONIC) / 1e9;
	made = rate ? paced(rate, secs) : tight(calls, v1);
	wall = (double)now_ns(CLOCK_MONOTONIC) / 1e9 - w0;
	cpu = cpu_s() - c0;
	/* The tight loop never sleeps: its wall time is finer than rusage's. */
	printf("{\"calls\":%llu,\"wall_s\":%.6f,\"cpu_s\":%.6f,\"ns_per_call\":%.2f}\n",
	       (unsigned long long)made, wall, cpu,
	       made ? (rate ? cpu : wall) * 1e9 / (double)made : 0.0);
	return 0;
}
