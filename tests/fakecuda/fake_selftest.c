// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * fakecuda_selftest: checks that the fake libcuda.so.1 keeps the promises
 * the tracer's tests rely on (pages in or out of the call, error codes,
 * nesting, VMM reference counting), without any tracer. Prints TAP; exits
 * non-zero if a check fails.
 *
 * The fake reads its model knobs (FAKECUDA_MODE, FAKECUDA_POOL,
 * FAKECUDA_POOL_MAX_BYTES) once at load, so the checks of each other
 * configuration run in a child: this program again, with the knobs set and
 * "--child NAME". The parent relays the child's TAP lines under its own
 * numbering, prefixed with the configuration's name, and checks that the
 * child ran to its plan line.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuda_fake.h"

#define MIB (1024ULL * 1024)

static unsigned int nr_checks, nr_failed;
static size_t page;

static void ok(bool cond, const char *what)
{
	nr_checks++;
	if (!cond)
		nr_failed++;
	printf("%sok %u - %s\n", cond ? "" : "not ", nr_checks, what);
}

static struct fakecuda_stats snap(void)
{
	struct fakecuda_stats st;

	fakecuda_stats(&st);
	return st;
}

/* Populated-bytes delta of one entry point between two snapshots. */
#define POP(a, b, api) ((b).populated[FAKECUDA_API_##api] - \
			(a).populated[FAKECUDA_API_##api])
#define REL(a, b, api) ((b).released[FAKECUDA_API_##api] - \
			(a).released[FAKECUDA_API_##api])
#define CALLS(a, b, api) ((b).calls[FAKECUDA_API_##api] - \
			  (a).calls[FAKECUDA_API_##api])

#define POOL(a, b, field) ((b).field - (a).field)

/* Resident pages of [p, p + len); (size_t)-1 if not all of it is mapped. */
static size_t resident_pages(uint64_t p, size_t len)
{
	unsigned char vec[1024];
	size_t n = len / page, done = 0, i, k, r = 0;

	while (done < n) {
		k = n - done < sizeof(vec) ? n - done : sizeof(vec);
		if (mincore((void *)(uintptr_t)(p + done * page), k * page,
			    vec))
			return (size_t)-1;
		for (i = 0; i < k; i++)
			r += vec[i] & 1;
		done += k;
	}
	return r;
}

/* Is any page of [p, p + len) mapped in this process? */
static bool mapped(uint64_t p, size_t len)
{
	unsigned char v;
	size_t off;

	for (off = 0; off < len; off += page)
		if (!mincore((void *)(uintptr_t)(p + off), page, &v) ||
		    errno != ENOMEM)
			return true;
	return false;
}

/*
 * The process's resident anonymous pages, exactly: /proc/self/smaps_rollup
 * walks the page tables, where statm's counters are per-CPU batched and
 * can be off by tens of pages. File pages are left out: the first call of
 * a libc function maps a few of them (fault-around) without allocating
 * anything. Read without stdio, so measuring allocates nothing itself.
 */
static long anon_pages(void)
{
	char buf[4096], *anon;
	ssize_t n;
	int fd = open("/proc/self/smaps_rollup", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	anon = strstr(buf, "\nAnonymous:");
	return anon ? strtol(anon + 11, NULL, 10) * 1024 / (long)page : -1;
}

/* Minor faults of this thread: a page fault that took a page, mostly. */
static long minflt(void)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	return ru.ru_minflt;
}

/* The permissions /proc/self/maps shows for the mapping holding @p. */
static bool maps_perms(uint64_t p, char perms[5])
{
	unsigned long lo, hi;
	char line[512], pr[5];
	bool found = false;
	FILE *f = fopen("/proc/self/maps", "r");

	while (f && !found && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx %4s", &lo, &hi, pr) == 3 &&
		    p >= lo && p < hi) {
			memcpy(perms, pr, 5);
			found = true;
		}
	}
	if (f)
		fclose(f);
	return found;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void test_init(void)
{
	CUdeviceptr p;

	ok(cuMemAlloc_v2(&p, page) == CUDA_ERROR_NOT_INITIALIZED,
	   "calls before cuInit fail with NOT_INITIALIZED");
	ok(cuInit(1) == CUDA_ERROR_INVALID_VALUE, "cuInit rejects flags");
	ok(cuInit(0) == CUDA_SUCCESS, "cuInit(0)");
}

static void test_device(void)
{
	struct fakecuda_stats a = snap(), b;
	CUdeviceptr p;
	void *h;

	ok(cuMemAlloc_v2(NULL, page) == CUDA_ERROR_INVALID_VALUE,
	   "NULL out-pointer is INVALID_VALUE");
	ok(cuMemAlloc_v2(&p, 0) == CUDA_ERROR_INVALID_VALUE,
	   "zero size is INVALID_VALUE");
	ok(cuMemAlloc_v2(&p, MIB + 1) == CUDA_SUCCESS, "cuMemAlloc_v2");
	b = snap();
	ok(POP(a, b, cuMemAlloc_v2) == MIB + page,
	   "populated counts whole pages");
	ok(resident_pages(p, MIB + page) == (MIB + page) / page,
	   "every page is resident when the call returns");
	ok(cuMemFreeHost((void *)(uintptr_t)p) == CUDA_ERROR_INVALID_VALUE,
	   "cuMemFreeHost refuses device memory");
	ok(cuMemFree_v2(p) == CUDA_SUCCESS, "cuMemFree_v2");
	ok(cuMemFree_v2(p) == CUDA_ERROR_INVALID_VALUE, "double free refused");
	a = snap();
	ok(REL(b, a, cuMemFree_v2) == MIB + page, "released counts the free");
	ok(cuMemHostAlloc(&h, page, 0) == CUDA_SUCCESS &&
	   cuMemFree_v2((uintptr_t)h) == CUDA_ERROR_INVALID_VALUE &&
	   cuMemFreeHost(h) == CUDA_SUCCESS,
	   "host memory is freed by cuMemFreeHost only");
}

static void test_legacy(void)
{
	CUdeviceptr_v1 p;
	unsigned int pitch;
	void *h;

	ok(cuMemAlloc(&p, 64 * 1024) == CUDA_SUCCESS && p && cuMemFree(p) == 0,
	   "cuMemAlloc (v1) gives a 32-bit pointer");
	ok(cuMemAllocPitch(&p, &pitch, 1000, 3, 4) == CUDA_SUCCESS &&
	   pitch == 1024 && cuMemFree(p) == CUDA_SUCCESS,
	   "cuMemAllocPitch (v1) rounds the pitch to 512");
	ok(cuMemAllocHost(&h, 4096) == CUDA_SUCCESS && cuMemFreeHost(h) == 0,
	   "cuMemAllocHost (v1)");
}

static void test_pitch(void)
{
	struct fakecuda_stats a = snap(), b;
	CUdeviceptr p;
	size_t pitch;

	ok(cuMemAllocPitch_v2(&p, &pitch, 1000, 3, 3) ==
	   CUDA_ERROR_INVALID_VALUE, "pitch: element size 3 refused");
	ok(cuMemAllocPitch_v2(&p, &pitch, 1000, 5, 4) == CUDA_SUCCESS &&
	   pitch == 1024, "pitch: width rounded up to 512");
	b = snap();
	ok(POP(a, b, cuMemAllocPitch_v2) == page * 2,
	   "pitch: pitch * height bytes, page rounded");
	cuMemFree_v2(p);
}

static void test_managed(void)
{
	struct fakecuda_stats a = snap(), b;
	CUdeviceptr p;

	ok(cuMemAllocManaged(&p, MIB, 0) == CUDA_ERROR_INVALID_VALUE,
	   "managed: attach flag required");
	ok(cuMemAllocManaged(&p, MIB, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS,
	   "cuMemAllocManaged");
	b = snap();
	ok(POP(a, b, cuMemAllocManaged) == 0 && resident_pages(p, MIB) == 0,
	   "managed: no page taken in the call");
	memset((void *)(uintptr_t)p, 1, MIB / 2);
	ok(resident_pages(p, MIB) == MIB / 2 / page,
	   "managed: pages arrive on touch");
	ok(cuMemFree_v2(p) == CUDA_SUCCESS, "managed: freed by cuMemFree_v2");
}

static void test_register(void)
{
	size_t len = 16 * page;
	struct fakecuda_stats a, b;
	char *buf = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (buf == MAP_FAILED) {
		ok(false, "register: mmap");
		return;
	}
	memset(buf, 1, 4 * page);
	a = snap();
	ok(cuMemHostRegister_v2(buf, len, 0) == CUDA_SUCCESS,
	   "cuMemHostRegister_v2");
	b = snap();
	ok(POP(a, b, cuMemHostRegister_v2) == 12 * page,
	   "register: only the pages not yet present are counted");
	ok(resident_pages((uintptr_t)buf, len) == 16,
	   "register: all pages present after the call");
	ok(cuMemHostRegister(buf, len, 0) == CUDA_ERROR_INVALID_VALUE,
	   "register: twice refused");
	ok(cuMemHostUnregister(buf) == CUDA_SUCCESS, "cuMemHostUnregister");
	ok(cuMemHostUnregister(buf) == CUDA_ERROR_INVALID_VALUE,
	   "unregister: twice refused");
	ok(resident_pages((uintptr_t)buf, len) == 16,
	   "unregister: pages stay with the caller");
	munmap(buf, len);
}

static void test_pool(void)
{
	struct fakecuda_stats a = snap(), b;
	CUdeviceptr p;

	ok(cuMemAllocFromPoolAsync(&p, MIB, (CUmemoryPool)&a, NULL) ==
	   CUDA_SUCCESS, "cuMemAllocFromPoolAsync");
	b = snap();
	ok(CALLS(a, b, cuMemAllocFromPoolAsync) == 1 &&
	   CALLS(a, b, cuMemAllocAsync) == 1,
	   "pool: cuMemAllocAsync is called nested");
	ok(POP(a, b, cuMemAllocAsync) == MIB &&
	   POP(a, b, cuMemAllocFromPoolAsync) == 0,
	   "pool: bytes counted once, under cuMemAllocAsync");
	ok(cuMemFreeAsync_ptsz(p, NULL) == CUDA_SUCCESS, "cuMemFreeAsync_ptsz");
}

static CUmemAllocationProp vmm_prop(void)
{
	CUmemAllocationProp prop;

	memset(&prop, 0, sizeof(prop));
	prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	return prop;
}

/* Two maps of one handle; the pages go with the last reference. */
static void test_vmm(void)
{
	CUmemAllocationProp prop = vmm_prop();
	struct fakecuda_stats a = snap(), b;
	CUmemGenericAllocationHandle h;
	CUdeviceptr va;

	ok(cuMemAddressReserve(&va, 8 * MIB, 2 * MIB, 0, 0) == CUDA_SUCCESS &&
	   !(va & (2 * MIB - 1)), "reserve: aligned as asked");
	ok(cuMemCreate(&h, 4 * MIB, &prop, 0) == CUDA_SUCCESS, "cuMemCreate");
	b = snap();
	ok(POP(a, b, cuMemCreate) == 4 * MIB, "create: pages taken here");
	ok(cuMemMap(va, 4 * MIB, 0, h, 0) == CUDA_SUCCESS &&
	   cuMemMap(va + 4 * MIB, 4 * MIB, 0, h, 0) == CUDA_SUCCESS,
	   "cuMemMap twice");
	memset((void *)(uintptr_t)va, 7, 4 * MIB);
	ok(((volatile char *)(uintptr_t)va)[4 * MIB + 100] == 7,
	   "both maps show the same memory");
	ok(cuMemRelease(h) == CUDA_SUCCESS, "cuMemRelease while mapped");
	ok(cuMemMap(va, 4 * MIB, 0, h, 0) == CUDA_ERROR_INVALID_VALUE,
	   "map of a released handle refused");
	ok(cuMemUnmap(va, 4 * MIB) == CUDA_SUCCESS, "first cuMemUnmap");
	a = snap();
	ok(REL(b, a, cuMemRelease) == 0 && REL(b, a, cuMemUnmap) == 0,
	   "pages live on while mapped once more");
	ok(cuMemUnmap(va + 4 * MIB, 4 * MIB) == CUDA_SUCCESS,
	   "last cuMemUnmap");
	b = snap();
	ok(REL(a, b, cuMemUnmap) == 4 * MIB, "last unmap frees the pages");
	ok(cuMemAddressFree(va, 8 * MIB) == CUDA_SUCCESS &&
	   cuMemAddressFree(va, 8 * MIB) == CUDA_ERROR_INVALID_VALUE,
	   "cuMemAddressFree, then refused");
	ok(cuMemRelease(h) == CUDA_ERROR_INVALID_VALUE, "unknown handle");
}

static void test_thread_delay(void)
{
	CUdeviceptr p;
	double t0;

	fakecuda_set_thread_delay_ms(50);
	t0 = now_ms();
	cuMemAlloc_v2(&p, page);
	ok(now_ms() - t0 >= 50, "per-thread delay sleeps inside the call");
	fakecuda_set_thread_delay_ms(0);
	t0 = now_ms();
	cuMemFree_v2(p);
	ok(now_ms() - t0 < 50, "frees never sleep");
}

static void test_names(void)
{
	ok(!strcmp(fakecuda_api_name(FAKECUDA_API_cuMemAllocFromPoolAsync_ptsz),
		   "cuMemAllocFromPoolAsync_ptsz") &&
	   fakecuda_api_name(FAKECUDA_API_COUNT) == NULL,
	   "fakecuda_api_name");
}

/* ---- FAKECUDA_MODE=discrete ---- */

#define DEV_BASE	0x700000000000ULL
#define DEV32_BASE	0xc0000000ULL

static void discrete_device(void)
{
	struct fakecuda_stats a, b;
	CUdeviceptr p = 0, q = 0;
	long anon0, anon1, flt0, flt1;

	/* a first round warms the code path up: the second faults no more */
	ok(cuMemAlloc_v2(&p, MIB) == CUDA_SUCCESS &&
	   cuMemFree_v2(p) == CUDA_SUCCESS, "warm-up allocation and free");
	a = snap();
	anon0 = anon_pages();
	flt0 = minflt();
	ok(cuMemAlloc_v2(&p, 64 * MIB) == CUDA_SUCCESS,
	   "cuMemAlloc_v2 of 64 MiB");
	flt1 = minflt();
	anon1 = anon_pages();
	b = snap();
	ok(POP(a, b, cuMemAlloc_v2) == page,
	   "cuMemAlloc_v2 takes one bookkeeping page, whatever the size");
	ok(flt1 - flt0 == 1 && anon1 - anon0 == 1,
	   "exactly one page fault and one anonymous page in the call");
	ok(p >= DEV_BASE && !mapped(p, 64 * MIB),
	   "the device pointer is not host memory");
	ok(cuMemAlloc_v2(&q, 64 * MIB) == CUDA_SUCCESS &&
	   (q >= p + 64 * MIB || q + 64 * MIB <= p),
	   "two device allocations do not overlap");
	ok(cuMemFreeHost((void *)(uintptr_t)p) == CUDA_ERROR_INVALID_VALUE,
	   "cuMemFreeHost refuses device memory");
	a = snap();
	anon0 = anon_pages();
	ok(cuMemFree_v2(p) == CUDA_SUCCESS && cuMemFree_v2(q) == CUDA_SUCCESS,
	   "cuMemFree_v2");
	anon1 = anon_pages();
	b = snap();
	ok(REL(a, b, cuMemFree_v2) == 2 * page && anon0 - anon1 == 2,
	   "each free gives back its one bookkeeping page");
	ok(cuMemFree_v2(p) == CUDA_ERROR_INVALID_VALUE, "double free refused");
}

static void discrete_other_device_calls(void)
{
	struct fakecuda_stats a = snap(), b;
	CUdeviceptr_v1 p32 = 0, q32 = 0;
	unsigned int pitch32 = 0;
	CUdeviceptr p = 0, q = 0;
	size_t pitch = 0;

	ok(cuMemAlloc(&p32, 8 * MIB) == CUDA_SUCCESS && p32 >= DEV32_BASE &&
	   !mapped(p32, 8 * MIB), "cuMemAlloc (v1): 32-bit, unmapped");
	ok(cuMemAllocPitch(&q32, &pitch32, 1000, 3, 4) == CUDA_SUCCESS &&
	   pitch32 == 1024 && q32 != p32, "cuMemAllocPitch (v1)");
	ok(cuMemAllocPitch_v2(&p, &pitch, 4096, 1024, 4) == CUDA_SUCCESS &&
	   !mapped(p, 4 * MIB), "cuMemAllocPitch_v2");
	ok(cuMemAllocFromPoolAsync(&q, 4 * MIB, (CUmemoryPool)&a, NULL) ==
	   CUDA_SUCCESS && !mapped(q, 4 * MIB), "cuMemAllocFromPoolAsync");
	b = snap();
	ok(POP(a, b, cuMemAlloc) == page &&
	   POP(a, b, cuMemAllocPitch) == page &&
	   POP(a, b, cuMemAllocPitch_v2) == page &&
	   POP(a, b, cuMemAllocAsync) == page &&
	   POP(a, b, cuMemAllocFromPoolAsync) == 0,
	   "one page each, nested pool call counted once");
	ok(cuMemFree(p32) == 0 && cuMemFree_v2(q32) == 0 &&
	   cuMemFree_v2(p) == 0 && cuMemFreeAsync(q, NULL) == 0,
	   "all freed");
	a = snap();
	ok(REL(b, a, cuMemFree) == page &&
	   REL(b, a, cuMemFree_v2) == 2 * page &&
	   REL(b, a, cuMemFreeAsync) == page, "each free gives back one page");
}

static void discrete_host(void)
{
	struct fakecuda_stats a = snap(), b;
	long anon0 = anon_pages(), anon1;
	CUdeviceptr m = 0;
	void *h = NULL;

	ok(cuMemHostAlloc(&h, 64 * MIB, 0) == CUDA_SUCCESS,
	   "cuMemHostAlloc of 64 MiB");
	anon1 = anon_pages();
	b = snap();
	ok(POP(a, b, cuMemHostAlloc) == 64 * MIB &&
	   anon1 - anon0 >= (long)(64 * MIB / page),
	   "pinned host memory takes its size inside the call");
	ok(cuMemFreeHost(h) == CUDA_SUCCESS &&
	   REL(b, snap(), cuMemFreeHost) == 64 * MIB,
	   "cuMemFreeHost gives it back");
	a = snap();
	ok(cuMemAllocManaged(&m, MIB, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS &&
	   POP(a, snap(), cuMemAllocManaged) == 0 &&
	   resident_pages(m, MIB) == 0,
	   "managed: no page in the call");
	memset((void *)(uintptr_t)m, 1, MIB / 2);
	ok(resident_pages(m, MIB) == MIB / 2 / page,
	   "managed: host pages arrive on CPU touch");
	ok(cuMemFree_v2(m) == CUDA_SUCCESS, "managed: cuMemFree_v2");
}

static void discrete_vmm(void)
{
	CUmemAllocationProp prop = vmm_prop();
	CUmemAccessDesc desc = {
		.location = prop.location,
		.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
	};
	struct fakecuda_stats a = snap(), b;
	CUmemGenericAllocationHandle h = 0;
	char perms[5] = "";
	CUdeviceptr va = 0;
	long anon0;

	ok(cuMemAddressReserve(&va, 8 * MIB, 2 * MIB, 0, 0) == CUDA_SUCCESS,
	   "vmm: reserve");
	anon0 = anon_pages();
	ok(cuMemCreate(&h, 4 * MIB, &prop, 0) == CUDA_SUCCESS, "cuMemCreate");
	b = snap();
	ok(POP(a, b, cuMemCreate) == page && anon_pages() - anon0 == 1,
	   "create: one bookkeeping page, not the size");
	ok(cuMemMap(va, 4 * MIB, 0, h, 0) == CUDA_SUCCESS &&
	   cuMemMap(va + 4 * MIB, 4 * MIB, 0, h, 0) == CUDA_SUCCESS &&
	   cuMemSetAccess(va, 8 * MIB, &desc, 1) == CUDA_SUCCESS,
	   "cuMemMap twice, cuMemSetAccess");
	ok(maps_perms(va, perms) && !strcmp(perms, "---p") &&
	   maps_perms(va + 4 * MIB, perms) && !strcmp(perms, "---p") &&
	   resident_pages(va, 8 * MIB) == 0,
	   "mapped device memory stays PROT_NONE for the CPU");
	ok(cuMemRelease(h) == CUDA_SUCCESS && cuMemUnmap(va, 4 * MIB) == 0,
	   "release while mapped, first unmap");
	a = snap();
	ok(REL(b, a, cuMemRelease) == 0 && REL(b, a, cuMemUnmap) == 0,
	   "the page lives on while mapped once more");
	ok(cuMemUnmap(va + 4 * MIB, 4 * MIB) == CUDA_SUCCESS &&
	   REL(a, snap(), cuMemUnmap) == page,
	   "last unmap gives the page back");
	ok(cuMemAddressFree(va, 8 * MIB) == CUDA_SUCCESS, "cuMemAddressFree");
}

static void child_discrete(void)
{
	struct fakecuda_stats st = snap();

	ok(st.mode == FAKECUDA_MODE_DISCRETE && !st.pool_enabled,
	   "stats report discrete mode, no pool");
	ok(cuInit(0) == CUDA_SUCCESS, "cuInit(0)");
	discrete_device();
	discrete_other_device_calls();
	discrete_host();
	test_register();
	discrete_vmm();
}

/* ---- FAKECUDA_POOL=1 (unified) ---- */

static void pool_device(void)
{
	struct fakecuda_stats a = snap(), b;
	CUdeviceptr p = 0, q = 0, r = 0;
	long anon0, anon1, flt0, flt1;

	ok(cuMemAlloc_v2(&p, 8 * MIB) == CUDA_SUCCESS, "cuMemAlloc_v2 8 MiB");
	b = snap();
	ok(POP(a, b, cuMemAlloc_v2) == 8 * MIB &&
	   POOL(a, b, pool_misses) == 1 && POOL(a, b, pool_hits) == 0,
	   "empty pool: a miss, pages taken");
	anon0 = anon_pages();
	ok(cuMemFree_v2(p) == CUDA_SUCCESS, "cuMemFree_v2");
	anon1 = anon_pages();
	a = snap();
	ok(REL(b, a, cuMemFree_v2) == 0 && a.pool_bytes == 8 * MIB &&
	   a.pool_chunks == 1 && POOL(b, a, pool_kept_bytes) == 8 * MIB,
	   "the free keeps the pages in the pool");
	ok(anon1 == anon0 && resident_pages(p, 8 * MIB) == 8 * MIB / page,
	   "pooled pages stay resident");
	/* one hit to warm up the path, then the measured one */
	ok(cuMemAlloc_v2(&q, 8 * MIB) == CUDA_SUCCESS && q == p &&
	   cuMemFree_v2(q) == CUDA_SUCCESS, "same size again: the same chunk");
	a = snap();
	anon0 = anon_pages();
	flt0 = minflt();
	ok(cuMemAlloc_v2(&q, 8 * MIB) == CUDA_SUCCESS, "pool hit");
	flt1 = minflt();
	anon1 = anon_pages();
	b = snap();
	ok(POP(a, b, cuMemAlloc_v2) == 0 && POOL(a, b, pool_hits) == 1 &&
	   POOL(a, b, pool_hit_bytes) == 8 * MIB && b.pool_bytes == 0,
	   "a hit populates nothing and empties the pool");
	ok(flt1 == flt0 && anon1 == anon0,
	   "a hit takes no page: no fault, anonymous RSS unchanged");
	ok(cuMemAlloc_v2(&r, 4 * MIB) == CUDA_SUCCESS &&
	   POP(b, snap(), cuMemAlloc_v2) == 4 * MIB,
	   "another size misses and takes pages");
	ok(cuMemFree_v2(q) == 0 && cuMemFree_v2(r) == 0 &&
	   snap().pool_bytes == 12 * MIB, "both freed into the pool");
}

static void pool_other_calls(void)
{
	struct fakecuda_stats a = snap(), b;
	CUdeviceptr_v1 p32 = 0, q32 = 0;
	CUdeviceptr p = 0, m = 0;
	void *h = NULL;

	ok(cuMemAllocFromPoolAsync(&p, 4 * MIB, (CUmemoryPool)&a, NULL) == 0,
	   "cuMemAllocFromPoolAsync");
	b = snap();
	ok(POP(a, b, cuMemAllocAsync) == 0 && POOL(a, b, pool_hits) == 1,
	   "nested cuMemAllocAsync served from the pool");
	ok(cuMemFreeAsync(p, NULL) == CUDA_SUCCESS &&
	   REL(b, snap(), cuMemFreeAsync) == 0, "cuMemFreeAsync pools too");
	a = snap();
	ok(cuMemAlloc(&p32, MIB) == CUDA_SUCCESS && cuMemFree(p32) == 0 &&
	   cuMemAlloc(&q32, MIB) == CUDA_SUCCESS && q32 == p32,
	   "v1: a 32-bit chunk comes back to a v1 call");
	b = snap();
	ok(POP(a, b, cuMemAlloc) == MIB && POOL(a, b, pool_hits) == 1,
	   "v1: one miss, one hit");
	cuMemFree(q32);
	a = snap();
	ok(cuMemHostAlloc(&h, MIB, 0) == 0 && cuMemFreeHost(h) == 0 &&
	   cuMemAllocManaged(&m, MIB, CU_MEM_ATTACH_GLOBAL) == 0 &&
	   cuMemFree_v2(m) == 0, "host and managed memory");
	b = snap();
	ok(REL(a, b, cuMemFreeHost) == MIB && REL(a, b, cuMemFree_v2) == MIB &&
	   b.pool_bytes == a.pool_bytes && b.pool_misses == a.pool_misses,
	   "host and managed memory are never pooled");
}

static void pool_vmm(void)
{
	CUmemAllocationProp prop = vmm_prop();
	struct fakecuda_stats a = snap(), b;
	CUmemGenericAllocationHandle h = 0;
	CUdeviceptr va = 0;

	ok(cuMemAddressReserve(&va, 4 * MIB, 0, 0, 0) == CUDA_SUCCESS &&
	   cuMemCreate(&h, 4 * MIB, &prop, 0) == CUDA_SUCCESS,
	   "vmm: reserve, create");
	b = snap();
	ok(POP(a, b, cuMemCreate) == 4 * MIB && POOL(a, b, pool_misses) == 1,
	   "create: a pooled mapping of the same size does not serve a memfd");
	ok(cuMemMap(va, 4 * MIB, 0, h, 0) == 0 && cuMemRelease(h) == 0 &&
	   cuMemUnmap(va, 4 * MIB) == 0, "map, release while mapped, unmap");
	a = snap();
	ok(REL(b, a, cuMemRelease) == 0 && REL(b, a, cuMemUnmap) == 0 &&
	   POOL(b, a, pool_bytes) == 4 * MIB,
	   "the last reference puts the physical memory in the pool");
	ok(cuMemCreate(&h, 4 * MIB, &prop, 0) == CUDA_SUCCESS, "create again");
	b = snap();
	ok(POP(a, b, cuMemCreate) == 0 && POOL(a, b, pool_hits) == 1,
	   "create: served from the pool");
	ok(cuMemMap(va, 4 * MIB, 0, h, 0) == 0 &&
	   memset((void *)(uintptr_t)va, 9, 4 * MIB) &&
	   ((volatile char *)(uintptr_t)va)[4 * MIB - 1] == 9,
	   "pooled physical memory maps and works");
	ok(cuMemUnmap(va, 4 * MIB) == 0 && cuMemRelease(h) == 0 &&
	   REL(b, snap(), cuMemRelease) == 0, "released into the pool again");
	cuMemAddressFree(va, 4 * MIB);
}

static void pool_trim(void)
{
	struct fakecuda_stats a = snap(), b;
	long anon0 = anon_pages();

	ok(a.pool_bytes > 0 && fakecuda_pool_trim() == a.pool_bytes,
	   "fakecuda_pool_trim gives back everything held");
	b = snap();
	ok(b.pool_bytes == 0 && b.pool_chunks == 0 &&
	   POOL(a, b, pool_trimmed_bytes) == a.pool_bytes &&
	   b.released_total == a.released_total,
	   "trimmed outside any entry point");
	ok(anon0 - anon_pages() >= (long)(12 * MIB / page),
	   "the pooled mappings' pages left the process");
	ok(fakecuda_pool_trim() == 0, "a second trim finds nothing");
}

static void child_pool(void)
{
	struct fakecuda_stats st = snap();

	ok(st.mode == FAKECUDA_MODE_UNIFIED && st.pool_enabled &&
	   st.pool_max_bytes == FAKECUDA_POOL_UNLIMITED,
	   "stats report unified mode, unlimited pool");
	ok(cuInit(0) == CUDA_SUCCESS, "cuInit(0)");
	pool_device();
	pool_other_calls();
	pool_vmm();
	pool_trim();
}

/* ---- FAKECUDA_POOL=1 FAKECUDA_POOL_MAX_BYTES=6M ---- */

static void child_pool_cap(void)
{
	struct fakecuda_stats a = snap(), b;
	CUdeviceptr p = 0, q = 0, r = 0;

	ok(a.pool_max_bytes == 6 * MIB, "stats report the 6 MiB cap");
	ok(cuInit(0) == CUDA_SUCCESS && cuMemAlloc_v2(&p, 4 * MIB) == 0 &&
	   cuMemAlloc_v2(&q, 4 * MIB) == 0 && cuMemAlloc_v2(&r, 2 * MIB) == 0,
	   "three allocations");
	a = snap();
	ok(cuMemFree_v2(p) == 0 && REL(a, snap(), cuMemFree_v2) == 0,
	   "4 MiB fit under the cap: pooled");
	a = snap();
	ok(cuMemFree_v2(q) == 0, "free past the cap");
	b = snap();
	ok(REL(a, b, cuMemFree_v2) == 4 * MIB &&
	   POOL(a, b, pool_overflow_bytes) == 4 * MIB &&
	   b.pool_bytes == 4 * MIB,
	   "past the cap the pages go back inside the free");
	ok(cuMemFree_v2(r) == 0 && REL(b, snap(), cuMemFree_v2) == 0 &&
	   snap().pool_bytes == 6 * MIB, "up to the cap exactly: pooled");
	ok(fakecuda_pool_trim() == 6 * MIB, "trim");
}

/* ---- FAKECUDA_MODE=discrete FAKECUDA_POOL=1 ---- */

static void child_discrete_pool(void)
{
	CUmemAllocationProp prop = vmm_prop();
	struct fakecuda_stats a, b;
	CUmemGenericAllocationHandle h = 0;
	CUdeviceptr p = 0, q = 0;
	long flt0, flt1;

	ok(cuInit(0) == CUDA_SUCCESS && cuMemAlloc_v2(&p, 64 * MIB) == 0 &&
	   cuMemFree_v2(p) == 0 && cuMemAlloc_v2(&p, 64 * MIB) == 0 &&
	   cuMemFree_v2(p) == 0, "warm-up");
	a = snap();
	ok(a.pool_bytes == page && a.pool_chunks == 1,
	   "the freed bookkeeping page is pooled");
	flt0 = minflt();
	ok(cuMemAlloc_v2(&q, MIB) == CUDA_SUCCESS, "another size");
	flt1 = minflt();
	b = snap();
	ok(POP(a, b, cuMemAlloc_v2) == 0 && POOL(a, b, pool_hits) == 1 &&
	   flt1 == flt0 && !mapped(q, MIB),
	   "bookkeeping pages serve any size: no page taken");
	ok(cuMemFree_v2(q) == 0 && cuMemCreate(&h, 4 * MIB, &prop, 0) == 0 &&
	   POP(b, snap(), cuMemCreate) == 0, "cuMemCreate reuses it too");
	ok(cuMemRelease(h) == 0 && fakecuda_pool_trim() == page,
	   "release pools the page, trim gives it back");
}

/* ---- bad knobs ---- */

static void child_bad_knob(void)
{
	CUdeviceptr p = 0;

	ok(cuInit(0) == CUDA_ERROR_INVALID_VALUE, "cuInit fails");
	ok(cuMemAlloc_v2(&p, page) == CUDA_ERROR_NOT_INITIALIZED,
	   "and nothing works");
}

/* ---- running the configurations ---- */

static const char *const knobs[] = {
	"FAKECUDA_MODE", "FAKECUDA_POOL", "FAKECUDA_POOL_MAX_BYTES",
	"FAKECUDA_DELAY_MS", "FAKECUDA_SPIN_MS", "FAKECUDA_FAIL_EVERY", "FAKECUDA_TABLE_SLOTS",
	"FAKECUDA_THP",
};

static const struct config {
	const char *name;
	const char *mode, *pool, *max;	/* the knobs; NULL: unset */
	const char *expect;		/* must appear in its output */
	void (*run)(void);
} configs[] = {
	{ "discrete", "discrete", NULL, NULL, NULL, child_discrete },
	{ "pool", NULL, "1", NULL, NULL, child_pool },
	{ "pool-cap", "unified", "1", "6M", NULL, child_pool_cap },
	{ "discrete+pool", "discrete", "1", NULL, NULL, child_discrete_pool },
	{ "bad-knob", "gpu", "1", NULL, "fakecuda: FAKECUDA_MODE=gpu",
	  child_bad_knob },
};

#define NR_CONFIGS (sizeof(configs) / sizeof(configs[0]))

static void child_exec(const struct config *c, int out)
{
	size_t i;

	dup2(out, STDOUT_FILENO);
	dup2(out, STDERR_FILENO);
	for (i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++)
		unsetenv(knobs[i]);
	if (c->mode)
		setenv("FAKECUDA_MODE", c->mode, 1);
	if (c->pool)
		setenv("FAKECUDA_POOL", c->pool, 1);
	if (c->max)
		setenv("FAKECUDA_POOL_MAX_BYTES", c->max, 1);
	execl("/proc/self/exe", "fakecuda_selftest", "--child", c->name,
	      (char *)NULL);
	_exit(127);
}

/* Run one configuration in a child and relay its results as ours. */
static void run_config(const struct config *c)
{
	unsigned int seen = 0, plan = 0;
	bool expected = !c->expect;
	char *line = NULL, what[256];
	size_t cap = 0;
	int fds[2], status = 0;
	const char *desc;
	ssize_t n;
	pid_t pid;
	FILE *f;

	fflush(stdout);
	if (pipe(fds) || (pid = fork()) < 0) {
		ok(false, c->name);
		return;
	}
	if (!pid)
		child_exec(c, fds[1]);
	close(fds[1]);
	f = fdopen(fds[0], "r");
	while (f && (n = getline(&line, &cap, f)) > 0) {
		if (line[n - 1] == '\n')
			line[n - 1] = 0;
		if (!strncmp(line, "ok ", 3) || !strncmp(line, "not ok ", 7)) {
			desc = strstr(line, " - ");
			snprintf(what, sizeof(what), "%s: %s", c->name,
				 desc ? desc + 3 : line);
			ok(line[0] == 'o', what);
			seen++;
		} else if (sscanf(line, "1..%u", &plan) != 1) {
			if (c->expect && strstr(line, c->expect))
				expected = true;
			printf("# %s: %s\n", c->name, line);
		}
	}
	free(line);
	if (f)
		fclose(f);
	waitpid(pid, &status, 0);
	snprintf(what, sizeof(what), "%s: ran to its plan%s", c->name,
		 c->expect ? ", said what was wrong" : "");
	ok(WIFEXITED(status) && seen && plan == seen && expected, what);
}

static int child_main(const char *name)
{
	size_t i;

	for (i = 0; i < NR_CONFIGS; i++) {
		if (strcmp(configs[i].name, name))
			continue;
		configs[i].run();
		printf("1..%u\n", nr_checks);
		return nr_failed ? 1 : 0;
	}
	fprintf(stderr, "fakecuda_selftest: no configuration %s\n", name);
	return 2;
}

int main(int argc, char **argv)
{
	size_t i;

	page = (size_t)sysconf(_SC_PAGESIZE);
	if (argc == 3 && !strcmp(argv[1], "--child"))
		return child_main(argv[2]);
	/* the default checks need the default fake: drop inherited knobs */
	for (i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++) {
		if (!getenv(knobs[i]))
			continue;
		for (i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++)
			unsetenv(knobs[i]);
		execv("/proc/self/exe", argv);
		perror("fakecuda_selftest: re-running without FAKECUDA_*");
		return 1;
	}
	test_init();
	test_device();
	test_legacy();
	test_pitch();
	test_managed();
	test_register();
	test_pool();
	test_vmm();
	test_thread_delay();
	test_names();
	for (i = 0; i < NR_CONFIGS; i++)
		run_config(&configs[i]);
	printf("1..%u\n", nr_checks);
	return nr_failed ? 1 : 0;
}
