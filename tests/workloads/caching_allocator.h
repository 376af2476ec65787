/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * PyTorch's CUDA caching allocator in miniature (caching_allocator.c): one
 * device, one stream, segments from the fake libcuda.so.1, every block
 * allocation and free reported to the fake libc10.so's profiler hook.
 * Single-threaded. torch_alloc.c drives it.
 */
#ifndef CACHING_ALLOCATOR_H
#define CACHING_ALLOCATOR_H

#include <stdbool.h>
#include <stdint.h>

#include "cuda_fake.h"

#define CA_KiB		(1ULL << 10)
#define CA_MiB		(1ULL << 20)
/* kLargeBuffer: the segment (or expandable page) of 1 to 10 MiB requests */
#define CA_LARGE_BUFFER	(20 * CA_MiB)

/* Which form of c10::reportMemoryUsageToProfiler to call (c10_fake.h). */
enum ca_hook {
	CA_HOOK_SIZE_T,		/* 5 arguments, size_t totals */
	CA_HOOK_INT64,		/* 5 arguments, int64_t totals */
	CA_HOOK_V1,		/* 3 arguments, no totals */
};

struct ca_config {
	bool expandable;	/* expandable_segments:True */
	enum ca_hook hook;
	uint64_t gpu_mem;	/* expandable: reserve 1.125 x this per pool */
	bool verify;		/* check every invariant after every change */
};

/* What the allocator did; the CUDA figures are those the hook was given. */
struct ca_stats {
	/* allocated_bytes and reserved_bytes (aggregate, current) */
	uint64_t allocated, reserved;
	/* the largest values the hook reported: every increase is reported */
	uint64_t peak_allocated, peak_reserved;
	/* hook calls with the CUDA device: allocations, frees, their bytes */
	unsigned long long allocs, frees, alloc_bytes, free_bytes;
	/* the last such call */
	bool reported;
	uint64_t last_ptr, last_allocated, last_reserved;
	int64_t last_size;
	/* hook calls with the CPU device (ca_report_cpu) */
	uint64_t cpu_allocated;
	unsigned long long cpu_allocs, cpu_frees, cpu_bytes;
	/* driver calls made, by fakecuda entry-point index, and their sizes */
	unsigned long long calls[FAKECUDA_API_COUNT];
	unsigned long long bytes[FAKECUDA_API_COUNT];
};

struct ca_block;

void ca_init(const struct ca_config *cfg);
/* A tensor's storage: the block, as PyTorch's allocator hands it out. */
struct ca_block *ca_malloc(uint64_t size);
void ca_free(struct ca_block *b);
/* release_cached_blocks(); no hook call. Returns the reserved bytes freed. */
uint64_t ca_empty_cache(void);
/* A CPU allocator's call to the same hook: c10::Device(kCPU), own totals. */
void ca_report_cpu(void *buf, int64_t size);
/* The device ca_report_cpu() reports on: c10::Device(kCPU) unless set. */
void ca_set_cpu_device(int8_t type, int8_t index);
const struct ca_stats *ca_stats(void);

/* One line on stderr ("torch_alloc: ..."), exit status 1. */
void ca_die(const char *fmt, ...)
	__attribute__((noreturn, format(printf, 1, 2)));
/* Count a driver call; any failure is fatal. */
void ca_check(unsigned int api, uint64_t bytes, CUresult ret);

#define CA_CU(name, bytes, args) \
	ca_check(FAKECUDA_API_##name, (bytes), name args)

#endif /* CACHING_ALLOCATOR_H */
