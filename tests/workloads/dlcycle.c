// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * dlcycle: libcuda mapped, unmapped and mapped again. Each cycle
 * dlopen()s the library, makes GPU calls through it, dlclose()s it and
 * checks in /proc/self/maps that it is gone, so the next cycle maps it
 * afresh, at another address: the range it left is taken first. A tracer that probes the file
 * must see every call of every cycle. Not linked with libcuda on purpose.
 *
 * usage: dlcycle -l LIBCUDA [-c CYCLES] [-n ITERS] [-s SIZE] [-d DELAY_MS]
 *                [-D LOADED_MS] -o FILE
 *
 * Each cycle makes ITERS cuMemAlloc_v2/cuMemFree_v2 and ITERS
 * cuMemHostAlloc/cuMemFreeHost pairs of SIZE bytes. -d sleeps before the
 * first cycle and between cycles, with the library unmapped; -D sleeps
 * after each dlopen, before the calls (a job that loads libcuda, then
 * works: a tracer may find the library only once it is mapped). FILE gets
 * one JSON object: the pid, per cycle where cuMemAlloc_v2 was and whether
 * the library was unmapped after it, and the calls made in all.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuda_fake.h"

#define DC_MAX_CYCLES 64

struct dc_api {
	CUresult (*init)(unsigned int);
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUresult (*free)(CUdeviceptr);
	CUresult (*host_alloc)(void **, size_t, unsigned int);
	CUresult (*free_host)(void *);
};

struct dc_cycle {
	uint64_t alloc_addr;	/* cuMemAlloc_v2 in this mapping */
	bool unmapped;		/* gone from /proc/self/maps after dlclose */
	bool remapped;		/* mapped at another address than the cycle before */
};

static struct dc_cycle cycles[DC_MAX_CYCLES];
static unsigned long long calls_alloc, calls_free, calls_host, calls_free_host;

static void dc_sleep_ms(unsigned long ms)
{
	struct timespec ts = {
		.tv_sec = ms / 1000,
		.tv_nsec = (long)(ms % 1000) * 1000000L,
	};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/*
 * Is a file whose name is path's basename mapped here? Its lowest and
 * highest addresses go to *lo and *hi when they are not NULL.
 */
static bool dc_mapped(const char *path, uint64_t *lo, uint64_t *hi)
{
	const char *base = strrchr(path, '/');
	unsigned long long start, end;
	char line[4352];
	bool found = false;
	FILE *f = fopen("/proc/self/maps", "re");

	base = base ? base + 1 : path;
	while (f && fgets(line, sizeof(line), f)) {
		char *name = strrchr(line, '/');

		if (!name || strncmp(name + 1, base, strlen(base)))
			continue;
		if (sscanf(line, "%llx-%llx", &start, &end) != 2)
			continue;
		if (lo && (!found || start < *lo))
			*lo = start;
		if (hi && (!found || end > *hi))
			*hi = end;
		found = true;
	}
	if (f)
		fclose(f);
	return found;
}

/*
 * Take the address range the library left, so that the next dlopen maps
 * it somewhere else: a probe that stayed bound to the old addresses would
 * then miss every call.
 */
static void dc_fill_hole(uint64_t lo, uint64_t hi)
{
	void *p = mmap((void *)(uintptr_t)lo, hi - lo, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);

	if (p == MAP_FAILED)
		fprintf(stderr, "dlcycle: cannot hold %#llx-%#llx: %s\n",
			(unsigned long long)lo, (unsigned long long)hi, strerror(errno));
}

static int dc_resolve(void *h, struct dc_api *a)
{
	/* POSIX blesses this cast from dlsym's void * */
	*(void **)&a->init = dlsym(h, "cuInit");
	*(void **)&a->alloc = dlsym(h, "cuMemAlloc_v2");
	*(void **)&a->free = dlsym(h, "cuMemFree_v2");
	*(void **)&a->host_alloc = dlsym(h, "cuMemHostAlloc");
	*(void **)&a->free_host = dlsym(h, "cuMemFreeHost");
	return a->init && a->alloc && a->free && a->host_alloc && a->free_host ? 0 : -1;
}

static unsigned long loaded_ms;

static int dc_cycle(const char *lib, unsigned long iters, uint64_t size, struct dc_cycle *c)
{
	uint64_t lo = 0, hi = 0;
	struct dc_api a;
	CUdeviceptr p;
	unsigned long i;
	void *h, *hp;

	h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "dlcycle: %s\n", dlerror());
		return -1;
	}
	if (dc_resolve(h, &a) || a.init(0)) {
		fprintf(stderr, "dlcycle: %s: no usable cuInit/cuMemAlloc_v2/...\n", lib);
		dlclose(h);
		return -1;
	}
	c->alloc_addr = (uint64_t)(uintptr_t)a.alloc;
	dc_mapped(lib, &lo, &hi);
	dc_sleep_ms(loaded_ms);
	for (i = 0; i < iters; i++) {
		calls_alloc++;
		if (!a.alloc(&p, size)) {
			calls_free++;
			a.free(p);
		}
		calls_host++;
		if (!a.host_alloc(&hp, size, 0)) {
			calls_free_host++;
			a.free_host(hp);
		}
	}
	if (dlclose(h)) {
		fprintf(stderr, "dlcycle: dlclose: %s\n", dlerror());
		return -1;
	}
	c->unmapped = !dc_mapped(lib, NULL, NULL);
	if (c->unmapped && hi > lo)
		dc_fill_hole(lo, hi);
	return 0;
}

static void dc_usage(void)
{
	fprintf(stderr, "usage: dlcycle -l LIBCUDA [-c CYCLES] [-n ITERS] [-s SIZE] [-d DELAY_MS] "
		"[-D LOADED_MS] -o FILE\n");
	exit(2);
}

static unsigned long dc_number(const char *s)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || end == s)
		dc_usage();
	if (*end == 'K' || *end == 'M')
		v <<= *end++ == 'K' ? 10 : 20;
	if (*end)
		dc_usage();
	return v;
}

int main(int argc, char **argv)
{
	unsigned long ncycles = 3, iters = 4, delay_ms = 0, size = 1 << 20, i;
	const char *lib = NULL, *out = NULL;
	FILE *f;
	int c;

	while ((c = getopt(argc, argv, "l:c:n:s:d:D:o:")) != -1) {
		switch (c) {
		case 'l':
			lib = optarg;
			break;
		case 'c':
			ncycles = dc_number(optarg);
			break;
		case 'n':
			iters = dc_number(optarg);
			break;
		case 's':
			size = dc_number(optarg);
			break;
		case 'd':
			delay_ms = dc_number(optarg);
			break;
		case 'D':
			loaded_ms = dc_number(optarg);
			break;
		case 'o':
			out = optarg;
			break;
		default:
			dc_usage();
		}
	}
	if (!lib || !out || !ncycles || ncycles > DC_MAX_CYCLES || !size || optind != argc)
		dc_usage();
	if (dc_mapped(lib, NULL, NULL)) {
		fprintf(stderr, "dlcycle: %s is mapped before the first dlopen\n", lib);
		return 1;
	}
	for (i = 0; i < ncycles; i++) {
		dc_sleep_ms(delay_ms);
		if (dc_cycle(lib, iters, size, &cycles[i]))
			return 1;
		cycles[i].remapped = i && cycles[i].alloc_addr != cycles[i - 1].alloc_addr;
	}
	f = fopen(out, "w");
	if (!f)
		return 1;
	fprintf(f, "{\"pid\": %d, \"cycles\": [", (int)getpid());
	for (i = 0; i < ncycles; i++)
		fprintf(f, "%s{\"alloc_addr\": %llu, \"unmapped\": %s, \"remapped\": %s}",
			i ? ", " : "", (unsigned long long)cycles[i].alloc_addr,
			cycles[i].unmapped ? "true" : "false",
			cycles[i].remapped ? "true" : "false");
	fprintf(f, "], \"calls\": {\"cuMemAlloc_v2\": %llu, \"cuMemFree_v2\": %llu, "
		"\"cuMemHostAlloc\": %llu, \"cuMemFreeHost\": %llu}}\n",
		calls_alloc, calls_free, calls_host, calls_free_host);
	return fclose(f) ? 1 : 0;
}
