// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * storm: a page-fault storm, the worst case for a page tracer.
 *
 *   storm [-t THREADS] [-s GIB_PER_ROUND] [-r ROUNDS]
 *
 * Each thread maps its share of GIB_PER_ROUND anonymously, writes one byte
 * per page so that every page is faulted in (one mm_page_alloc event each),
 * and unmaps it (one free event each), ROUNDS times over. Huge pages are
 * refused with MADV_NOHUGEPAGE so that each fault takes exactly one base
 * page whatever the THP settings. Prints the wall time in seconds.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 1024

struct storm {
	size_t bytes;		/* per thread and round */
	size_t page;
	unsigned int rounds;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int one_round(const struct storm *s)
{
	volatile char *p;
	size_t off;

	p = mmap(NULL, s->bytes, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	/* Not fatal: without THP support there is nothing to refuse. */
	madvise((void *)p, s->bytes, MADV_NOHUGEPAGE);
	for (off = 0; off < s->bytes; off += s->page)
		p[off] = 1;
	if (munmap((void *)p, s->bytes))
		return -errno;
	return 0;
}

static void *storm_thread(void *arg)
{
	const struct storm *s = arg;
	unsigned int i;
	int err;

	for (i = 0; i < s->rounds; i++) {
		err = one_round(s);
		if (err) {
			fprintf(stderr, "storm: round %u: %s\n", i, strerror(-err));
			return (void *)1;
		}
	}
	return NULL;
}

static int parse_uint(const char *arg, unsigned int max, unsigned int *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || v == 0 || v > max)
		return -1;
	*out = v;
	return 0;
}

static int parse_gib(const char *arg, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (errno || end == arg || *end || !(v > 0) || v > 1 << 20)
		return -1;
	*out = v;
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: storm [-t THREADS=2] [-s GIB_PER_ROUND=2] [-r ROUNDS=3]\n");
}

/* Starts the threads, waits for them all; returns the number that failed. */
static int run_threads(struct storm *s, unsigned int nthreads)
{
	pthread_t tids[MAX_THREADS];
	unsigned int i, started;
	void *ret;
	int err, failed = 0;

	for (started = 0; started < nthreads; started++) {
		err = pthread_create(&tids[started], NULL, storm_thread, s);
		if (err) {
			fprintf(stderr, "storm: pthread_create: %s\n", strerror(err));
			failed++;
			break;
		}
	}
	for (i = 0; i < started; i++) {
		pthread_join(tids[i], &ret);
		if (ret)
			failed++;
	}
	return failed;
}

int main(int argc, char **argv)
{
	unsigned int nthreads = 2;
	struct storm s = { .rounds = 3 };
	double gib = 2, t0, t1;
	int opt;

	while ((opt = getopt(argc, argv, "t:s:r:h")) != -1) {
		switch (opt) {
		case 't':
			if (parse_uint(optarg, MAX_THREADS, &nthreads))
				goto bad;
			break;
		case 's':
			if (parse_gib(optarg, &gib))
				goto bad;
			break;
		case 'r':
			if (parse_uint(optarg, 1000000, &s.rounds))
				goto bad;
			break;
		case 'h':
			usage();
			return 0;
		default:
			goto bad;
		}
	}
	if (optind != argc)
		goto bad;

	s.page = sysconf(_SC_PAGESIZE);
	s.bytes = gib * (1 << 30) / nthreads;
	s.bytes -= s.bytes % s.page;
	if (!s.bytes)
		goto bad;

	t0 = now_s();
	if (run_threads(&s, nthreads))
		return 1;
	t1 = now_s();
	printf("%.3f\n", t1 - t0);
	return 0;
bad:
	usage();
	return 2;
}
