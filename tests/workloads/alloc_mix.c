// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * alloc_mix: drive the fake libcuda.so.1 with a known mix of allocation
 * calls from several threads at once, then print what was done as one JSON
 * object. Integration tests trace this program with umtrace and compare
 * the tracer's per-call records with these counts.
 *
 * usage: alloc_mix [-t THREADS] [-n ITERS] [-s SIZE] [-a API[,API...]]
 *                  [-F] [-k] [-o FILE] [-x] [-d DELAY_MS] [-w HOLD_MS] [-m SIZE]
 *                  [-c CHECKPOINT_FILE]
 *
 * Every thread waits on a barrier, then runs ITERS iterations, each doing
 * every listed API once with SIZE bytes (suffix K, M or G: powers of 1024).
 * -F frees each allocation right after it is made; otherwise all threads
 * wait on a second barrier (everything live at once) and then free what
 * they allocated, unless -k leaks it all (the kernel frees it at exit,
 * outside any call).
 *
 * -x: after that, one more thread ("am-inflight") calls cuMemAlloc_v2(SIZE)
 * with a per-thread delay (FAKECUDA_DELAY_MS if set, else 10000 ms): the
 * fake populates the pages, then sleeps inside the call. The main thread
 * waits until the fake reports a thread asleep in a call, writes the JSON
 * (with "inflight" naming that thread) and calls _exit(0). The tracer must
 * then report that call as ended by exit (UMT_END_EXITED) with SIZE worth
 * of pages taken, and no free for it.
 *
 * -m SIZE: once everything is allocated, the threads touch SIZE bytes of
 * plain anonymous memory between them, outside any GPU call, kept to exit.
 *
 * -w HOLD_MS: once everything is allocated, every thread waits this long
 * before freeing (or exiting, with -k), so a live view can see it held.
 *
 * -d DELAY_MS: print the pid to stderr and sleep before cuInit, so a test
 * can attach the tracer to a process that already runs.
 *
 * -c FILE: on SIGUSR1, write "checkpoint PID" to FILE and go on, as a
 * trainer that checkpoints when warned (umtrace guard --warn-signal USR1).
 *
 * The fake's model knobs apply as set in the environment (FAKECUDA_MODE,
 * FAKECUDA_POOL, FAKECUDA_POOL_MAX_BYTES); the report says which model ran
 * ("mode", "pool") as the fake reports it. In discrete mode device
 * pointers are not host memory, so nothing here touches them (the vmm
 * path skips its touches); managed memory is host memory in both modes
 * and is touched in both. The ground truth of host pages taken inside the
 * calls is always the fake's own count ("populated_bytes", and per entry
 * point under "fake"): in discrete mode that is one page per device
 * allocation, and with the pool a call served from it took none.
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
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cuda_fake.h"

#define AM_MAX_THREADS	1024
#define AM_PITCH_HEIGHT	8
#define AM_INFLIGHT_MS	10000
#define AM_API_NONE	(-1)

enum am_api {
	AM_ALLOC,
	AM_ALLOC_V1,
	AM_PITCH,
	AM_PITCH_V1,
	AM_MANAGED,
	AM_HOST,
	AM_HOST_V1,
	AM_HOSTALLOC,
	AM_REGISTER,
	AM_REGISTER_V1,
	AM_ASYNC,
	AM_ASYNC_PTSZ,
	AM_POOL,
	AM_POOL_PTSZ,
	AM_VMM,
	AM_NR_APIS,
};

/* Per-thread tally of the calls made, by fakecuda entry-point index. */
struct am_counts {
	unsigned long long calls[FAKECUDA_API_COUNT];
	unsigned long long bytes[FAKECUDA_API_COUNT];
	unsigned long long failed[FAKECUDA_API_COUNT];
	unsigned long long managed_touched;
	unsigned long long gpu_touched;
};

/* One live allocation, whatever API made it. */
struct am_rec {
	int api;		/* enum am_api */
	CUdeviceptr ptr;	/* device/host pointer or reserved VA */
	CUmemGenericAllocationHandle handle;	/* vmm: physical memory */
	uint64_t bytes;		/* bytes requested (pitch: width * height) */
	void *buf;		/* register: the caller's own buffer */
	bool buf_mmapped;
};

struct am_thread {
	pthread_t thread;
	unsigned int idx;
	pid_t tid;
	struct am_rec *recs;
	size_t nrecs;
	struct am_counts cnt;
};

struct am_api_ops {
	const char *name;
	int (*alloc)(struct am_thread *t, struct am_rec *r, unsigned long iter);
	void (*free)(struct am_thread *t, struct am_rec *r);
};

static struct {
	unsigned int threads;
	unsigned long iters;
	uint64_t size;
	int apis[AM_NR_APIS];
	unsigned int napis;
	bool free_each;
	bool keep;
	bool inflight;
	const char *out;
	unsigned long start_delay_ms;
	unsigned long hold_ms;	/* -w: everything live for this long */
	uint64_t outside_bytes;	/* -m: plain memory touched outside any call */
	const char *checkpoint;	/* -c: written on SIGUSR1 */
} opt = {
	.threads = 1,
	.iters = 1,
	.size = 1 << 20,
};

static pthread_barrier_t am_barrier;
static size_t am_page;
/* the fake's model, read from its stats after cuInit */
static bool am_discrete;
/* the fake ignores the pool; any non-NULL handle will do */
static int am_pool_obj;
#define AM_POOL_HANDLE ((CUmemoryPool)(void *)&am_pool_obj)

static CUresult am_note(struct am_counts *c, unsigned int api, uint64_t bytes,
			CUresult ret)
{
	c->calls[api]++;
	c->bytes[api] += bytes;
	if (ret != CUDA_SUCCESS)
		c->failed[api]++;
	return ret;
}

#define AM_CALL(t, name, bytes, call) \
	am_note(&(t)->cnt, FAKECUDA_API_##name, (bytes), name call)

static uint64_t am_page_round(uint64_t v)
{
	return (v + am_page - 1) & ~(uint64_t)(am_page - 1);
}

/* Write one byte per page of [p, p + len): the pages arrive here. */
static uint64_t am_touch(uint64_t p, uint64_t len)
{
	volatile char *c = (volatile char *)(uintptr_t)p;
	uint64_t off;

	for (off = 0; off < len; off += am_page)
		c[off] = 1;
	return am_page_round(len);
}

/* ---- one alloc/free pair per API short name ---- */

static int am_alloc_dev(struct am_thread *t, struct am_rec *r,
			unsigned long iter)
{
	(void)iter;
	r->bytes = opt.size;
	return AM_CALL(t, cuMemAlloc_v2, r->bytes, (&r->ptr, r->bytes)) ? -1 : 0;
}

static void am_free_dev(struct am_thread *t, struct am_rec *r)
{
	AM_CALL(t, cuMemFree_v2, r->bytes, (r->ptr));
}

static int am_alloc_v1(struct am_thread *t, struct am_rec *r,
		       unsigned long iter)
{
	CUdeviceptr_v1 p;

	(void)iter;
	r->bytes = opt.size;
	if (AM_CALL(t, cuMemAlloc, r->bytes, (&p, (unsigned int)r->bytes)))
		return -1;
	r->ptr = p;
	return 0;
}

static void am_free_v1(struct am_thread *t, struct am_rec *r)
{
	AM_CALL(t, cuMemFree, r->bytes, ((CUdeviceptr_v1)r->ptr));
}

static uint64_t am_pitch_width(void)
{
	uint64_t w = opt.size / AM_PITCH_HEIGHT;

	return w ? w : 1;
}

static int am_alloc_pitch(struct am_thread *t, struct am_rec *r,
			  unsigned long iter)
{
	uint64_t w = am_pitch_width();
	size_t pitch;

	(void)iter;
	r->bytes = w * AM_PITCH_HEIGHT;
	return AM_CALL(t, cuMemAllocPitch_v2, r->bytes,
		       (&r->ptr, &pitch, w, AM_PITCH_HEIGHT, 4)) ? -1 : 0;
}

static int am_alloc_pitch_v1(struct am_thread *t, struct am_rec *r,
			     unsigned long iter)
{
	uint64_t w = am_pitch_width();
	CUdeviceptr_v1 p;
	unsigned int pitch;

	(void)iter;
	r->bytes = w * AM_PITCH_HEIGHT;
	if (AM_CALL(t, cuMemAllocPitch, r->bytes,
		    (&p, &pitch, (unsigned int)w, AM_PITCH_HEIGHT, 4)))
		return -1;
	r->ptr = p;
	return 0;
}

/*
 * Lazy: only the first half gets pages, on touch, outside the call. With
 * the fake kernel driver (FAKECUDA_DRIVER) the GPU then touches the second
 * half: the driver's BH thread faults it in.
 */
static int am_alloc_managed(struct am_thread *t, struct am_rec *r,
			    unsigned long iter)
{
	(void)iter;
	r->bytes = opt.size;
	if (AM_CALL(t, cuMemAllocManaged, r->bytes,
		    (&r->ptr, r->bytes, CU_MEM_ATTACH_GLOBAL)))
		return -1;
	t->cnt.managed_touched += am_touch(r->ptr, r->bytes / 2);
	t->cnt.gpu_touched += fakecuda_gpu_touch(r->ptr + r->bytes / 2,
						 r->bytes - r->bytes / 2);
	return 0;
}

static int am_alloc_host(struct am_thread *t, struct am_rec *r,
			 unsigned long iter)
{
	void *p;

	(void)iter;
	r->bytes = opt.size;
	if (AM_CALL(t, cuMemAllocHost_v2, r->bytes, (&p, r->bytes)))
		return -1;
	r->ptr = (uintptr_t)p;
	return 0;
}

static int am_alloc_host_v1(struct am_thread *t, struct am_rec *r,
			    unsigned long iter)
{
	void *p;

	(void)iter;
	r->bytes = opt.size;
	if (AM_CALL(t, cuMemAllocHost, r->bytes, (&p, (unsigned int)r->bytes)))
		return -1;
	r->ptr = (uintptr_t)p;
	return 0;
}

static int am_alloc_hostalloc(struct am_thread *t, struct am_rec *r,
			      unsigned long iter)
{
	void *p;

	(void)iter;
	r->bytes = opt.size;
	if (AM_CALL(t, cuMemHostAlloc, r->bytes,
		    (&p, r->bytes, CU_MEMHOSTALLOC_PORTABLE)))
		return -1;
	r->ptr = (uintptr_t)p;
	return 0;
}

static void am_free_host(struct am_thread *t, struct am_rec *r)
{
	AM_CALL(t, cuMemFreeHost, r->bytes, ((void *)(uintptr_t)r->ptr));
}

/*
 * The buffer is never touched before registering, so the pin takes its
 * pages inside the call (malloc's chunk header aside; the fake measures
 * what was already resident). Even iterations use malloc, odd ones mmap.
 */
static void *am_buffer(struct am_rec *r, unsigned long iter)
{
	void *p;

	r->buf_mmapped = iter & 1;
	if (!r->buf_mmapped)
		return malloc(r->bytes);
	p = mmap(NULL, r->bytes, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static void am_buffer_free(struct am_rec *r)
{
	if (r->buf_mmapped)
		munmap(r->buf, r->bytes);
	else
		free(r->buf);
}

static int am_alloc_register(struct am_thread *t, struct am_rec *r,
			     unsigned long iter)
{
	r->bytes = opt.size;
	r->buf = am_buffer(r, iter);
	if (!r->buf)
		return -1;
	if (!AM_CALL(t, cuMemHostRegister_v2, r->bytes, (r->buf, r->bytes, 0)))
		return 0;
	am_buffer_free(r);
	return -1;
}

static int am_alloc_register_v1(struct am_thread *t, struct am_rec *r,
				unsigned long iter)
{
	r->bytes = opt.size;
	r->buf = am_buffer(r, iter);
	if (!r->buf)
		return -1;
	if (!AM_CALL(t, cuMemHostRegister, r->bytes, (r->buf, r->bytes, 0)))
		return 0;
	am_buffer_free(r);
	return -1;
}

/* Unpinning frees nothing; the pages go back in munmap/free, outside. */
static void am_free_register(struct am_thread *t, struct am_rec *r)
{
	AM_CALL(t, cuMemHostUnregister, r->bytes, (r->buf));
	am_buffer_free(r);
}

static int am_alloc_async(struct am_thread *t, struct am_rec *r,
			  unsigned long iter)
{
	(void)iter;
	r->bytes = opt.size;
	return AM_CALL(t, cuMemAllocAsync, r->bytes,
		       (&r->ptr, r->bytes, NULL)) ? -1 : 0;
}

static int am_alloc_async_ptsz(struct am_thread *t, struct am_rec *r,
			       unsigned long iter)
{
	(void)iter;
	r->bytes = opt.size;
	return AM_CALL(t, cuMemAllocAsync_ptsz, r->bytes,
		       (&r->ptr, r->bytes, NULL)) ? -1 : 0;
}

/* Nested: the fake calls cuMemAllocAsync from inside these two. */
static int am_alloc_pool(struct am_thread *t, struct am_rec *r,
			 unsigned long iter)
{
	(void)iter;
	r->bytes = opt.size;
	return AM_CALL(t, cuMemAllocFromPoolAsync, r->bytes,
		       (&r->ptr, r->bytes, AM_POOL_HANDLE, NULL)) ? -1 : 0;
}

static int am_alloc_pool_ptsz(struct am_thread *t, struct am_rec *r,
			      unsigned long iter)
{
	(void)iter;
	r->bytes = opt.size;
	return AM_CALL(t, cuMemAllocFromPoolAsync_ptsz, r->bytes,
		       (&r->ptr, r->bytes, AM_POOL_HANDLE, NULL)) ? -1 : 0;
}

static void am_free_async(struct am_thread *t, struct am_rec *r)
{
	AM_CALL(t, cuMemFreeAsync, r->bytes, (r->ptr, NULL));
}

static void am_free_async_ptsz(struct am_thread *t, struct am_rec *r)
{
	AM_CALL(t, cuMemFreeAsync_ptsz, r->bytes, (r->ptr, NULL));
}

/*
 * Reserve, commit (pages taken in cuMemCreate), map, allow access, then
 * touch every page: the pages exist already, so the touches add only page
 * tables. In discrete mode the mapping is device memory the CPU cannot
 * reach (the fake leaves it PROT_NONE): no touch.
 */
static int am_alloc_vmm(struct am_thread *t, struct am_rec *r,
			unsigned long iter)
{
	CUmemAllocationProp prop = {
		.type = CU_MEM_ALLOCATION_TYPE_PINNED,
		.location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
	};
	CUmemAccessDesc desc = {
		.location = prop.location,
		.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
	};
	uint64_t len = am_page_round(opt.size);

	(void)iter;
	r->bytes = len;
	if (AM_CALL(t, cuMemAddressReserve, len, (&r->ptr, len, 0, 0, 0)))
		return -1;
	if (AM_CALL(t, cuMemCreate, len, (&r->handle, len, &prop, 0)))
		goto free_va;
	if (AM_CALL(t, cuMemMap, len, (r->ptr, len, 0, r->handle, 0)))
		goto release;
	if (AM_CALL(t, cuMemSetAccess, len, (r->ptr, len, &desc, 1)))
		goto unmap;
	if (!am_discrete)
		am_touch(r->ptr, len);
	return 0;
unmap:
	AM_CALL(t, cuMemUnmap, len, (r->ptr, len));
release:
	AM_CALL(t, cuMemRelease, len, (r->handle));
free_va:
	AM_CALL(t, cuMemAddressFree, len, (r->ptr, len));
	return -1;
}

/* Unmap keeps the pages (the handle holds them); release frees them. */
static void am_free_vmm(struct am_thread *t, struct am_rec *r)
{
	AM_CALL(t, cuMemUnmap, r->bytes, (r->ptr, r->bytes));
	AM_CALL(t, cuMemRelease, r->bytes, (r->handle));
	AM_CALL(t, cuMemAddressFree, r->bytes, (r->ptr, r->bytes));
}

static const struct am_api_ops am_ops[AM_NR_APIS] = {
	[AM_ALLOC]	 = { "alloc", am_alloc_dev, am_free_dev },
	[AM_ALLOC_V1]	 = { "alloc_v1", am_alloc_v1, am_free_v1 },
	[AM_PITCH]	 = { "pitch", am_alloc_pitch, am_free_dev },
	[AM_PITCH_V1]	 = { "pitch_v1", am_alloc_pitch_v1, am_free_v1 },
	[AM_MANAGED]	 = { "managed", am_alloc_managed, am_free_dev },
	[AM_HOST]	 = { "host", am_alloc_host, am_free_host },
	[AM_HOST_V1]	 = { "host_v1", am_alloc_host_v1, am_free_host },
	[AM_HOSTALLOC]	 = { "hostalloc", am_alloc_hostalloc, am_free_host },
	[AM_REGISTER]	 = { "register", am_alloc_register, am_free_register },
	[AM_REGISTER_V1] = { "register_v1", am_alloc_register_v1,
			     am_free_register },
	[AM_ASYNC]	 = { "async", am_alloc_async, am_free_async },
	[AM_ASYNC_PTSZ]	 = { "async_ptsz", am_alloc_async_ptsz,
			     am_free_async_ptsz },
	[AM_POOL]	 = { "pool", am_alloc_pool, am_free_async },
	[AM_POOL_PTSZ]	 = { "pool_ptsz", am_alloc_pool_ptsz,
			     am_free_async_ptsz },
	[AM_VMM]	 = { "vmm", am_alloc_vmm, am_free_vmm },
};

/* ---- threads ---- */

static void am_free_all(struct am_thread *t)
{
	size_t i;

	for (i = 0; i < t->nrecs; i++)
		am_ops[t->recs[i].api].free(t, &t->recs[i]);
	t->nrecs = 0;
}

static void am_one(struct am_thread *t, int api, unsigned long iter)
{
	struct am_rec *r = &t->recs[t->nrecs];

	memset(r, 0, sizeof(*r));
	r->api = api;
	if (am_ops[api].alloc(t, r, iter))
		return;
	if (opt.free_each)
		am_ops[api].free(t, r);
	else
		t->nrecs++;
}

static void am_sleep_ms(unsigned long ms);

/* Host pages a job takes outside any GPU call: kept until exit. */
static void am_touch_outside(uint64_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return;
	madvise(p, len, MADV_NOHUGEPAGE);
	am_touch((uint64_t)(uintptr_t)p, len);
}

static void *am_worker(void *arg)
{
	struct am_thread *t = arg;
	char name[16];
	unsigned long i;
	unsigned int a;

	t->tid = gettid();
	snprintf(name, sizeof(name), "am-worker-%u", t->idx);
	pthread_setname_np(pthread_self(), name);
	pthread_barrier_wait(&am_barrier);
	for (i = 0; i < opt.iters; i++)
		for (a = 0; a < opt.napis; a++)
			am_one(t, opt.apis[a], i);
	/* everything is live in every thread at this point */
	pthread_barrier_wait(&am_barrier);
	if (opt.outside_bytes)
		am_touch_outside(opt.outside_bytes / opt.threads);
	if (opt.hold_ms)
		am_sleep_ms(opt.hold_ms);
	if (!opt.keep)
		am_free_all(t);
	return NULL;
}

static int am_run_workers(struct am_thread *th)
{
	size_t per_thread = opt.free_each ? 1 : opt.iters * opt.napis;
	unsigned int i;

	if (pthread_barrier_init(&am_barrier, NULL, opt.threads))
		return -1;
	for (i = 0; i < opt.threads; i++) {
		th[i].idx = i;
		th[i].recs = calloc(per_thread, sizeof(*th[i].recs));
		if (!th[i].recs)
			goto fail;
		if (pthread_create(&th[i].thread, NULL, am_worker, &th[i]))
			goto fail;
	}
	for (i = 0; i < opt.threads; i++)
		pthread_join(th[i].thread, NULL);
	return 0;
fail:
	/* the started threads wait on the barrier forever: give up */
	fprintf(stderr, "alloc_mix: cannot start thread %u\n", i);
	return -1;
}

/* ---- -x: a call still inside the driver when the process exits ---- */

static struct {
	pthread_t thread;
	pid_t tid;
	/* host bytes the fake took inside the call before it went to sleep */
	unsigned long long populated;
} am_inflight;

/* Never returns in practice: main calls _exit() while it sleeps. */
static void *am_inflight_main(void *arg)
{
	CUdeviceptr p;

	(void)arg;
	pthread_setname_np(pthread_self(), "am-inflight");
	__atomic_store_n(&am_inflight.tid, gettid(), __ATOMIC_RELEASE);
	if (!getenv("FAKECUDA_DELAY_MS"))
		fakecuda_set_thread_delay_ms(AM_INFLIGHT_MS);
	cuMemAlloc_v2(&p, opt.size);
	return NULL;
}

static void am_sleep_ms(unsigned long ms)
{
	struct timespec ts = {
		.tv_sec = ms / 1000,
		.tv_nsec = (long)(ms % 1000) * 1000000L,
	};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/*
 * Start the thread and wait (10 s at most) until it sleeps in the call;
 * the call is tallied here, since it will never return to be counted.
 */
static int am_start_inflight(struct am_counts *sum)
{
	struct fakecuda_stats before, st;
	int i;

	fakecuda_stats(&before);
	if (pthread_create(&am_inflight.thread, NULL, am_inflight_main, NULL))
		return -1;
	for (i = 0; i < 10000; i++) {
		fakecuda_stats(&st);
		if (st.sleeping) {
			/* SIZE if unified, a page if discrete, 0 if pooled */
			am_inflight.populated =
				st.populated[FAKECUDA_API_cuMemAlloc_v2] -
				before.populated[FAKECUDA_API_cuMemAlloc_v2];
			am_note(sum, FAKECUDA_API_cuMemAlloc_v2, opt.size,
				CUDA_SUCCESS);
			return 0;
		}
		am_sleep_ms(1);
	}
	return -1;
}

/* ---- report ---- */

static void am_sum(struct am_counts *sum, const struct am_counts *c)
{
	unsigned int i;

	for (i = 0; i < FAKECUDA_API_COUNT; i++) {
		sum->calls[i] += c->calls[i];
		sum->bytes[i] += c->bytes[i];
		sum->failed[i] += c->failed[i];
	}
	sum->managed_touched += c->managed_touched;
	sum->gpu_touched += c->gpu_touched;
}

static void am_json_calls(FILE *f, const struct am_counts *c)
{
	const char *sep = "";
	unsigned int i;

	fprintf(f, "  \"calls\": {");
	for (i = 0; i < FAKECUDA_API_COUNT; i++) {
		if (!c->calls[i])
			continue;
		fprintf(f, "%s\n    \"%s\": {\"calls\": %llu, \"bytes\": %llu, \"failed\": %llu}",
			sep, fakecuda_api_name(i), c->calls[i], c->bytes[i],
			c->failed[i]);
		sep = ",";
	}
	fprintf(f, "\n  },\n");
}

static void am_json_fake(FILE *f, const struct fakecuda_stats *st)
{
	const char *sep = "";
	unsigned int i;

	fprintf(f, "  \"fake\": {\n    \"populated_bytes\": %llu,\n"
		"    \"released_bytes\": %llu,\n    \"overhead_bytes\": %llu,\n"
		"    \"sleeping\": %llu,\n    \"calls\": {",
		st->populated_total, st->released_total, st->overhead_bytes,
		st->sleeping);
	for (i = 0; i < FAKECUDA_API_COUNT; i++) {
		if (!st->calls[i])
			continue;
		fprintf(f, "%s\n      \"%s\": {\"calls\": %llu, \"failed\": %llu, \"populated\": %llu, \"released\": %llu}",
			sep, fakecuda_api_name(i), st->calls[i], st->failed[i],
			st->populated[i], st->released[i]);
		sep = ",";
	}
	fprintf(f, "\n    }\n  },\n");
}

/*
 * Which driver the fake imitated, and its page pool: "pool_bytes" is host
 * memory the "driver" still held at report time apart from any live
 * allocation; "hits" calls took no page although they hold memory.
 */
static void am_json_model(FILE *f, const struct fakecuda_stats *st)
{
	fprintf(f, "  \"mode\": \"%s\",\n  \"pool\": %s,\n",
		st->mode == FAKECUDA_MODE_DISCRETE ? "discrete" : "unified",
		st->pool_enabled ? "true" : "false");
	if (st->pool_max_bytes == FAKECUDA_POOL_UNLIMITED)
		fprintf(f, "  \"pool_max_bytes\": null,\n");
	else
		fprintf(f, "  \"pool_max_bytes\": %llu,\n", st->pool_max_bytes);
	fprintf(f, "  \"pool_stats\": {\"pool_bytes\": %llu, \"chunks\": %llu, "
		"\"hits\": %llu, \"hit_bytes\": %llu, \"misses\": %llu, "
		"\"kept_bytes\": %llu, \"overflow_bytes\": %llu, "
		"\"trimmed_bytes\": %llu},\n",
		st->pool_bytes, st->pool_chunks, st->pool_hits,
		st->pool_hit_bytes, st->pool_misses, st->pool_kept_bytes,
		st->pool_overflow_bytes, st->pool_trimmed_bytes);
}

static void am_json_opts(FILE *f)
{
	unsigned int a;

	fprintf(f, "  \"page_size\": %zu,\n  \"size\": %llu,\n"
		"  \"iters\": %lu,\n  \"apis\": [",
		am_page, (unsigned long long)opt.size, opt.iters);
	for (a = 0; a < opt.napis; a++)
		fprintf(f, "%s\"%s\"", a ? ", " : "", am_ops[opt.apis[a]].name);
	fprintf(f, "],\n  \"free_each\": %s,\n  \"keep\": %s,\n",
		opt.free_each ? "true" : "false", opt.keep ? "true" : "false");
	/* Where a tracer's stack must point: the entry and its caller. */
	fprintf(f, "  \"addrs\": {\"cuMemAlloc_v2\": %llu, \"am_alloc_dev\": %llu},\n",
		(unsigned long long)(uintptr_t)cuMemAlloc_v2,
		(unsigned long long)(uintptr_t)am_alloc_dev);
}

/*
 * Memory as the kernel sees it when the report is written: with -k (or
 * -x) everything the run allocated is still mapped at that point.
 */
static void am_json_status(FILE *f)
{
	static const char *const keys[] = { "VmRSS", "RssAnon", "RssShmem" };
	unsigned long long kb[3] = { 0 };
	char line[256];
	FILE *st = fopen("/proc/self/status", "r");
	size_t i, n;

	while (st && fgets(line, sizeof(line), st)) {
		for (i = 0; i < 3; i++) {
			n = strlen(keys[i]);
			if (!strncmp(line, keys[i], n) && line[n] == ':')
				kb[i] = strtoull(line + n + 1, NULL, 10);
		}
	}
	if (st)
		fclose(st);
	fprintf(f, "  \"status_kb\": {\"VmRSS\": %llu, \"RssAnon\": %llu, \"RssShmem\": %llu},\n",
		kb[0], kb[1], kb[2]);
}

static void am_json(FILE *f, const struct am_thread *th,
		    const struct am_counts *sum,
		    const struct fakecuda_stats *st)
{
	unsigned long long failed = 0;
	unsigned int i;

	for (i = 0; i < FAKECUDA_API_COUNT; i++)
		failed += sum->failed[i];
	fprintf(f, "{\n  \"pid\": %d,\n  \"threads\": [", (int)getpid());
	for (i = 0; i < opt.threads; i++)
		fprintf(f, "%s%d", i ? ", " : "", (int)th[i].tid);
	fprintf(f, "],\n");
	am_json_model(f, st);
	am_json_opts(f);
	am_json_calls(f, sum);
	fprintf(f, "  \"failed_calls\": %llu,\n  \"populated_bytes\": %llu,\n"
		"  \"managed_touched_bytes\": %llu,\n  \"gpu_touched_bytes\": %llu,\n",
		failed, st->populated_total, sum->managed_touched, sum->gpu_touched);
	am_json_status(f);
	am_json_fake(f, st);
	if (opt.inflight)
		fprintf(f, "  \"inflight\": {\"tid\": %d, \"api\": \"cuMemAlloc_v2\", \"bytes\": %llu, \"populated\": %llu}\n}\n",
			(int)__atomic_load_n(&am_inflight.tid, __ATOMIC_ACQUIRE),
			(unsigned long long)opt.size, am_inflight.populated);
	else
		fprintf(f, "  \"inflight\": null\n}\n");
}

/*
 * -o FILE is written whole and renamed, so a reader never sees half. A
 * device (-o /dev/null) is written in place: a rename would replace it
 * with a plain file, for every program on the host.
 */
static int am_write_report(const struct am_thread *th,
			   const struct am_counts *sum,
			   const struct fakecuda_stats *st)
{
	char tmp[4096];
	struct stat sb;
	FILE *f;

	if (!opt.out) {
		am_json(stdout, th, sum, st);
		return fflush(stdout) ? -1 : 0;
	}
	if (!stat(opt.out, &sb) && !S_ISREG(sb.st_mode)) {
		f = fopen(opt.out, "w");
		if (!f)
			return -1;
		am_json(f, th, sum, st);
		return fclose(f) ? -1 : 0;
	}
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", opt.out) >= (int)sizeof(tmp))
		return -1;
	f = fopen(tmp, "w");
	if (!f)
		return -1;
	am_json(f, th, sum, st);
	if (fclose(f))
		return -1;
	return rename(tmp, opt.out);
}

/* ---- command line ---- */

static char am_ckpt_text[64];
static size_t am_ckpt_len;

/* Async-signal-safe: open, write and close only. */
static void am_on_usr1(int sig)
{
	int fd = open(opt.checkpoint, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int saved = errno;

	(void)sig;
	if (fd >= 0) {
		if (write(fd, am_ckpt_text, am_ckpt_len) < 0)
			saved = errno;
		close(fd);
	}
	errno = saved;
}

static void am_catch_usr1(void)
{
	struct sigaction sa = { .sa_handler = am_on_usr1, .sa_flags = SA_RESTART };

	am_ckpt_len = (size_t)snprintf(am_ckpt_text, sizeof(am_ckpt_text), "checkpoint %d\n",
				       (int)getpid());
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
}

static void am_usage(void)
{
	unsigned int a;

	fprintf(stderr,
		"usage: alloc_mix [-t THREADS] [-n ITERS] [-s SIZE] [-a API[,API...]]\n"
		"                 [-F] [-k] [-o FILE] [-x] [-d DELAY_MS] [-w HOLD_MS] [-m SIZE]\n"
		"                 [-c CHECKPOINT_FILE]\n"
		"  SIZE takes K, M or G; API is 'all' or one of:");
	for (a = 0; a < AM_NR_APIS; a++)
		fprintf(stderr, " %s", am_ops[a].name);
	fprintf(stderr, "\n");
	exit(2);
}

static int am_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	}
	if (shift)
		end++;
	if (*end || !v || v > (UINT64_MAX >> shift))
		return -1;
	*out = v << shift;
	return 0;
}

static unsigned long am_parse_ulong(const char *s)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 0);
	if (errno || end == s || *end)
		am_usage();
	return v;
}

static int am_api_by_name(const char *name)
{
	int a;

	for (a = 0; a < AM_NR_APIS; a++)
		if (!strcmp(am_ops[a].name, name))
			return a;
	return AM_API_NONE;
}

static int am_parse_apis(const char *list)
{
	char *copy = strdup(list), *tok, *save = NULL;
	int a;

	if (!copy)
		return -1;
	opt.napis = 0;
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "all")) {
			for (a = 0; a < AM_NR_APIS && opt.napis < AM_NR_APIS; a++)
				opt.apis[opt.napis++] = a;
			continue;
		}
		a = am_api_by_name(tok);
		if (a == AM_API_NONE || opt.napis == AM_NR_APIS)
			goto bad;
		opt.apis[opt.napis++] = a;
	}
	free(copy);
	return opt.napis ? 0 : -1;
bad:
	free(copy);
	return -1;
}

static bool am_uses_v1(void)
{
	unsigned int a;

	for (a = 0; a < opt.napis; a++)
		if (opt.apis[a] == AM_ALLOC_V1 || opt.apis[a] == AM_PITCH_V1 ||
		    opt.apis[a] == AM_HOST_V1)
			return true;
	return false;
}

static void am_parse(int argc, char **argv)
{
	int c;

	opt.apis[0] = AM_ALLOC;
	opt.napis = 1;
	while ((c = getopt(argc, argv, "t:n:s:a:Fko:xd:w:m:c:h")) != -1) {
		switch (c) {
		case 't':
			opt.threads = (unsigned int)am_parse_ulong(optarg);
			break;
		case 'n':
			opt.iters = am_parse_ulong(optarg);
			break;
		case 's':
			if (am_parse_size(optarg, &opt.size))
				am_usage();
			break;
		case 'a':
			if (am_parse_apis(optarg))
				am_usage();
			break;
		case 'F':
			opt.free_each = true;
			break;
		case 'k':
			opt.keep = true;
			break;
		case 'o':
			opt.out = optarg;
			break;
		case 'x':
			opt.inflight = true;
			break;
		case 'w':
			opt.hold_ms = am_parse_ulong(optarg);
			break;
		case 'm':
			if (am_parse_size(optarg, &opt.outside_bytes))
				am_usage();
			break;
		case 'd':
			opt.start_delay_ms = am_parse_ulong(optarg);
			break;
		case 'c':
			opt.checkpoint = optarg;
			break;
		default:
			am_usage();
		}
	}
	if (optind != argc || !opt.threads || opt.threads > AM_MAX_THREADS)
		am_usage();
	/* legacy entry points take 32-bit sizes */
	if (am_uses_v1() && opt.size > UINT32_MAX)
		am_usage();
}

int main(int argc, char **argv)
{
	static struct am_thread th[AM_MAX_THREADS];
	struct am_counts sum = { 0 };
	struct fakecuda_stats st;
	unsigned int i;

	am_page = (size_t)sysconf(_SC_PAGESIZE);
	am_parse(argc, argv);
	if (opt.checkpoint)
		am_catch_usr1();
	if (opt.start_delay_ms) {
		fprintf(stderr, "alloc_mix: pid %d, starting in %lu ms\n",
			(int)getpid(), opt.start_delay_ms);
		am_sleep_ms(opt.start_delay_ms);
	}
	if (am_note(&sum, FAKECUDA_API_cuInit, 0, cuInit(0))) {
		fprintf(stderr, "alloc_mix: cuInit failed\n");
		return 1;
	}
	fakecuda_stats(&st);
	am_discrete = st.mode == FAKECUDA_MODE_DISCRETE;
	if (am_run_workers(th))
		return 1;
	for (i = 0; i < opt.threads; i++)
		am_sum(&sum, &th[i].cnt);
	if (opt.inflight && am_start_inflight(&sum)) {
		fprintf(stderr, "alloc_mix: -x: no call in flight\n");
		return 1;
	}
	fakecuda_stats(&st);
	if (am_write_report(th, &sum, &st)) {
		perror("alloc_mix: writing the report");
		return 1;
	}
	if (opt.inflight)
		_exit(0);
	return 0;
}
