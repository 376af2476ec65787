// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * demo: about two seconds of a PyTorch-like allocation pattern through the
 * fake libcuda.so.1, for a first look at umtrace's output.
 *
 * usage: demo [-s SECONDS] [-d DELAY_MS]
 *
 *   model_load()     alloc_weights(): 4 cuMemAlloc_v2 of 64-256 MiB,
 *                    pinned_staging(): a 64 MiB cuMemHostAlloc buffer
 *                    the weights are "uploaded" through
 *   grow_segment()   an expandable segment: one 1 GiB cuMemAddressReserve,
 *                    then cuMemCreate + cuMemMap 32 MiB at a time (4 up
 *                    front, one more every 8 steps, at most 12)
 *   train_step()     forward()/backward() take 4, 2 and 6 MiB of
 *                    activations with cuMemAllocAsync and drop them with
 *                    cuMemFreeAsync, then "compute" for 20 ms; every 4th
 *                    step leak_kv_cache() keeps 2 MiB for good
 *   loader thread    pinned_batch(): 8 MiB cuMemHostAlloc/cuMemFreeHost
 *                    every 100 ms, like a pin_memory data loader
 *
 * Training runs until SECONDS (default 2) have passed since start, then
 * everything but the leak is freed, which takes another ~0.2 s. Peak host
 * memory is about 1 GiB. Every function on the way to a driver call is
 * out of line and checks the result after the call (no tail calls), so
 * call stacks read as written here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda_fake.h"

#define MIB		(1024ULL * 1024)
#define DEMO_FRAME	__attribute__((noinline, noclone))

#define NR_WEIGHTS	4
#define STAGING_BYTES	(64 * MIB)
#define SEGMENT_VA	(1024 * MIB)
#define CHUNK_BYTES	(32 * MIB)
#define CHUNKS_START	4
#define CHUNKS_MAX	12
#define GROW_EVERY	8
#define LEAK_EVERY	4
#define LEAK_BYTES	(2 * MIB)
#define MAX_LEAKS	64
#define BATCH_BYTES	(8 * MIB)
#define BATCH_EVERY_MS	100
#define STEP_COMPUTE_MS	20

static const unsigned long long weight_bytes[NR_WEIGHTS] = {
	256 * MIB, 128 * MIB, 64 * MIB, 64 * MIB,
};

/* activations of one step: forward keeps two, backward adds one */
static const unsigned long long act_bytes[3] = {
	4 * MIB, 2 * MIB, 6 * MIB,
};

static struct {
	CUdeviceptr weights[NR_WEIGHTS];
	void *staging;
	CUdeviceptr seg_base;
	CUmemGenericAllocationHandle chunks[CHUNKS_MAX];
	unsigned int nr_chunks;
	CUdeviceptr leaks[MAX_LEAKS];
	unsigned int nr_leaks;
	unsigned long steps;
	unsigned long activations;
	unsigned long batches;
	bool stop;
} demo;

static void die(const char *what, CUresult ret)
{
	fprintf(stderr, "demo: %s failed: CUresult %d\n", what, (int)ret);
	exit(1);
}

static void check(CUresult ret, const char *what)
{
	if (ret != CUDA_SUCCESS)
		die(what, ret);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(unsigned long ms)
{
	struct timespec ts = {
		.tv_sec = ms / 1000,
		.tv_nsec = (long)(ms % 1000) * 1000000L,
	};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* ---- model load ---- */

static DEMO_FRAME void alloc_weights(void)
{
	unsigned int i;

	for (i = 0; i < NR_WEIGHTS; i++)
		check(cuMemAlloc_v2(&demo.weights[i], weight_bytes[i]),
		      "cuMemAlloc_v2 (weights)");
}

static DEMO_FRAME void pinned_staging(void)
{
	check(cuMemHostAlloc(&demo.staging, STAGING_BYTES,
			     CU_MEMHOSTALLOC_PORTABLE),
	      "cuMemHostAlloc (staging)");
}

/* Device and host memory are one here: the "copy" is a memcpy. */
static DEMO_FRAME void upload_weights(void)
{
	unsigned int i;

	memset(demo.staging, 0x3c, STAGING_BYTES);
	for (i = 0; i < NR_WEIGHTS; i++)
		memcpy((void *)(uintptr_t)demo.weights[i], demo.staging,
		       STAGING_BYTES);
}

static DEMO_FRAME void model_load(void)
{
	alloc_weights();
	pinned_staging();
	upload_weights();
}

/* ---- expandable segment ---- */

static DEMO_FRAME void reserve_segment(void)
{
	check(cuMemAddressReserve(&demo.seg_base, SEGMENT_VA, 0, 0, 0),
	      "cuMemAddressReserve");
}

/* One more 32 MiB of physical memory, mapped at the end of the segment. */
static DEMO_FRAME void grow_segment(void)
{
	CUmemAllocationProp prop = {
		.type = CU_MEM_ALLOCATION_TYPE_PINNED,
		.location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
	};
	CUmemAccessDesc desc = {
		.location = prop.location,
		.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
	};
	CUdeviceptr at = demo.seg_base + demo.nr_chunks * CHUNK_BYTES;
	CUmemGenericAllocationHandle *h = &demo.chunks[demo.nr_chunks];

	check(cuMemCreate(h, CHUNK_BYTES, &prop, 0), "cuMemCreate");
	check(cuMemMap(at, CHUNK_BYTES, 0, *h, 0), "cuMemMap");
	check(cuMemSetAccess(at, CHUNK_BYTES, &desc, 1), "cuMemSetAccess");
	demo.nr_chunks++;
}

static DEMO_FRAME void release_segment(void)
{
	CUdeviceptr at;
	unsigned int i;

	for (i = 0; i < demo.nr_chunks; i++) {
		at = demo.seg_base + i * CHUNK_BYTES;
		check(cuMemUnmap(at, CHUNK_BYTES), "cuMemUnmap");
		check(cuMemRelease(demo.chunks[i]), "cuMemRelease");
	}
	check(cuMemAddressFree(demo.seg_base, SEGMENT_VA), "cuMemAddressFree");
}

/* ---- training ---- */

static DEMO_FRAME CUdeviceptr alloc_activation(unsigned long long bytes)
{
	CUdeviceptr p;

	check(cuMemAllocAsync(&p, bytes, NULL), "cuMemAllocAsync");
	demo.activations++;
	return p;
}

static DEMO_FRAME void free_activation(CUdeviceptr p)
{
	check(cuMemFreeAsync(p, NULL), "cuMemFreeAsync");
}

/* Write every 16th page: the activations are used, not just held. */
static void compute(CUdeviceptr p, unsigned long long bytes)
{
	volatile char *c = (volatile char *)(uintptr_t)p;
	unsigned long long off;

	for (off = 0; off < bytes; off += 16 * 4096)
		c[off]++;
}

static DEMO_FRAME void forward(CUdeviceptr act[2])
{
	act[0] = alloc_activation(act_bytes[0]);
	compute(act[0], act_bytes[0]);
	act[1] = alloc_activation(act_bytes[1]);
	compute(act[1], act_bytes[1]);
}

static DEMO_FRAME void backward(CUdeviceptr act[2])
{
	CUdeviceptr grad = alloc_activation(act_bytes[2]);

	compute(grad, act_bytes[2]);
	free_activation(act[1]);
	free_activation(act[0]);
	free_activation(grad);
}

/* A cache that is filled and never trimmed: the slow leak to find. */
static DEMO_FRAME void leak_kv_cache(void)
{
	CUdeviceptr p;

	if (demo.nr_leaks == MAX_LEAKS)
		return;
	check(cuMemAllocAsync(&p, LEAK_BYTES, NULL), "cuMemAllocAsync (cache)");
	demo.leaks[demo.nr_leaks++] = p;
}

static DEMO_FRAME void train_step(void)
{
	CUdeviceptr act[2];

	forward(act);
	backward(act);
	if (demo.steps % LEAK_EVERY == LEAK_EVERY - 1)
		leak_kv_cache();
	if (demo.steps % GROW_EVERY == GROW_EVERY - 1 &&
	    demo.nr_chunks < CHUNKS_MAX)
		grow_segment();
	demo.steps++;
	sleep_ms(STEP_COMPUTE_MS);
}

/* ---- data loader thread ---- */

static DEMO_FRAME void pinned_batch(void)
{
	void *p;

	check(cuMemHostAlloc(&p, BATCH_BYTES, 0), "cuMemHostAlloc (batch)");
	memset(p, 1, BATCH_BYTES);
	check(cuMemFreeHost(p), "cuMemFreeHost (batch)");
	demo.batches++;
}

static void *loader_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "loader");
	while (!__atomic_load_n(&demo.stop, __ATOMIC_ACQUIRE)) {
		pinned_batch();
		sleep_ms(BATCH_EVERY_MS);
	}
	return NULL;
}

/* ---- main ---- */

static void usage(void)
{
	fprintf(stderr, "usage: demo [-s SECONDS] [-d DELAY_MS]\n");
	exit(2);
}

static double parse_num(const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || v < 0)
		usage();
	return v;
}

static void report(double secs)
{
	unsigned long long weights = 0;
	unsigned int i;

	for (i = 0; i < NR_WEIGHTS; i++)
		weights += weight_bytes[i];
	printf("demo: pid %d, %lu train steps in %.2f s: weights %llu MiB (%d x cuMemAlloc_v2), "
	       "staging %llu MiB (cuMemHostAlloc), segment %llu MiB (%u x cuMemCreate/cuMemMap), "
	       "%lu activations (cuMemAllocAsync), %lu loader batches (cuMemHostAlloc), "
	       "leaked %llu MiB in %u cuMemAllocAsync (leak_kv_cache)\n",
	       (int)getpid(), demo.steps, secs, weights / MIB, NR_WEIGHTS,
	       STAGING_BYTES / MIB, demo.nr_chunks * CHUNK_BYTES / MIB,
	       demo.nr_chunks, demo.activations, demo.batches,
	       demo.nr_leaks * LEAK_BYTES / MIB, demo.nr_leaks);
}

static void teardown(void)
{
	unsigned int i;

	release_segment();
	for (i = 0; i < NR_WEIGHTS; i++)
		check(cuMemFree_v2(demo.weights[i]), "cuMemFree_v2");
	check(cuMemFreeHost(demo.staging), "cuMemFreeHost");
}

int main(int argc, char **argv)
{
	double secs = 2.0, delay_ms = 0, start;
	pthread_t loader;
	int c;

	while ((c = getopt(argc, argv, "s:d:h")) != -1) {
		if (c == 's')
			secs = parse_num(optarg);
		else if (c == 'd')
			delay_ms = parse_num(optarg);
		else
			usage();
	}
	if (optind != argc)
		usage();
	if (delay_ms > 0) {
		fprintf(stderr, "demo: pid %d, starting in %.0f ms\n",
			(int)getpid(), delay_ms);
		sleep_ms((unsigned long)delay_ms);
	}
	start = now_s();
	check(cuInit(0), "cuInit");
	if (pthread_create(&loader, NULL, loader_main, NULL)) {
		fprintf(stderr, "demo: cannot start the loader thread\n");
		return 1;
	}
	model_load();
	reserve_segment();
	while (demo.nr_chunks < CHUNKS_START)
		grow_segment();
	while (now_s() - start < secs)
		train_step();
	__atomic_store_n(&demo.stop, true, __ATOMIC_RELEASE);
	pthread_join(loader, NULL);
	teardown();
	report(now_s() - start);
	return 0;
}
