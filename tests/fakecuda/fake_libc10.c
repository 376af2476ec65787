// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A fake libc10.so: PyTorch's memory profiler hook and nothing else, so
 * that umtrace can be tested on the allocator's own totals without
 * PyTorch (tests/workloads/torch_alloc.c calls it as the CUDA caching
 * allocator does). See c10_fake.h for the three forms and their ABI.
 *
 * In PyTorch the hook forwards to a profiler only when one is active; here
 * it does nothing at all. Each form is a real function of its own: never
 * inlined, cloned, merged with another (gcc's identical code folding would
 * turn one into a jump to the other, and a probe on both would count every
 * call twice) nor reduced to a tail call, so a uprobe on its entry sees
 * every call with the arguments in the registers the C++ ABI puts them in.
 * libc10.map exports the mangled names only.
 */
#include "c10_fake.h"

#if defined(__clang__)
#define C10_PROBE_TARGET __attribute__((noinline, used))
#else
#define C10_PROBE_TARGET __attribute__((noipa, used))
#endif

C10_PROBE_TARGET void c10_report_memory_usage(void *ptr, int64_t alloc_size,
					       size_t total_allocated,
					       size_t total_reserved,
					       struct c10_device device)
{
	(void)ptr;
	(void)alloc_size;
	(void)total_allocated;
	(void)total_reserved;
	(void)device;
	asm volatile("" ::: "memory");
}

C10_PROBE_TARGET void c10_report_memory_usage_i64(void *ptr,
						   int64_t alloc_size,
						   int64_t total_allocated,
						   int64_t total_reserved,
						   struct c10_device device)
{
	(void)ptr;
	(void)alloc_size;
	(void)total_allocated;
	(void)total_reserved;
	(void)device;
	asm volatile("" ::: "memory");
}

C10_PROBE_TARGET void c10_report_memory_usage_v1(void *ptr,
						  int64_t alloc_size,
						  struct c10_device device)
{
	(void)ptr;
	(void)alloc_size;
	(void)device;
	asm volatile("" ::: "memory");
}
