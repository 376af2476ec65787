// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * fakecuda_selftest: checks that the fake libcuda.so.1 keeps the promises
 * the tracer's tests rely on (pages in or out of the call, error codes,
 * nesting, VMM reference counting), without any tracer. Prints TAP; exits
 * non-zero if a check fails.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
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

static size_t resident_pages(uint64_t p, size_t len)
{
	unsigned char vec[1024];
	size_t n = len / page, i, r = 0;

	if (n > sizeof(vec) || mincore((void *)(uintptr_t)p, len, vec))
		return (size_t)-1;
	for (i = 0; i < n; i++)
		r += vec[i] & 1;
	return r;
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

int main(void)
{
	page = (size_t)sysconf(_SC_PAGESIZE);
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
	printf("1..%u\n", nr_checks);
	return nr_failed ? 1 : 0;
}
