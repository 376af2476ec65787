// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A fake libc10.so: PyTorch's memory profiler hook and nothing else, so
 * that umtrace can be tested on the allocator's own totals without
 * PyTorch (tests/workloads/torch_alloc.c calls it as the CUDA caching
 * allocator does). See c10_fake.h for the three forms and their ABI.
 *
 * In PyTorch the hook asks c10::ThreadLocalDebugInfo::get() (out of line,
 * in libc10) for the profiler's memory reporter and forwards to it when
 * there is one. Here too: the reporter is a thread-local that nothing
 * sets, read through an out-of-line getter, so each form has the shape of
 * the real one (a call, with its arguments kept across it: a prologue that
 * saves registers). That shape matters to a uprobe: the kernel emulates a
 * first instruction that pushes a register, but single-steps one it cannot
 * emulate (a bare `ret`, as an empty function compiles to), which costs 10
 * times as much on some machines. Each form is a real function of its own:
 * never inlined, cloned, merged with another (gcc's identical code folding
 * would turn one into a jump to the other, and a probe on both would count
 * every call twice) nor reduced to a tail call, so a uprobe on its entry
 * sees every call with the arguments in the registers the C++ ABI puts
 * them in. libc10.map exports the mangled names only.
 */
#include <stddef.h>
#include "c10_fake.h"

#if defined(__clang__)
#define C10_PROBE_TARGET __attribute__((noinline, used))
#else
#define C10_PROBE_TARGET __attribute__((noipa, used))
#endif

/* c10::MemoryReportingInfoBase::reportMemoryUsage, as one callback */
typedef void (*c10_reporter_fn)(void *ptr, int64_t alloc_size, size_t total_allocated,
				size_t total_reserved, struct c10_device device);

/* ThreadLocalDebugInfo's PROFILER_STATE slot: set only while profiling. */
static __thread c10_reporter_fn c10_profiler_state;

/* c10::ThreadLocalDebugInfo::get(DebugInfoKind::PROFILER_STATE) */
C10_PROBE_TARGET static c10_reporter_fn c10_debug_info_get(void)
{
	asm volatile("" ::: "memory");
	return c10_profiler_state;
}

C10_PROBE_TARGET void c10_report_memory_usage(void *ptr, int64_t alloc_size,
					       size_t total_allocated,
					       size_t total_reserved,
					       struct c10_device device)
{
	c10_reporter_fn reporter = c10_debug_info_get();

	if (reporter)
		reporter(ptr, alloc_size, total_allocated, total_reserved, device);
	asm volatile("" ::: "memory");
}

C10_PROBE_TARGET void c10_report_memory_usage_i64(void *ptr,
						   int64_t alloc_size,
						   int64_t total_allocated,
						   int64_t total_reserved,
						   struct c10_device device)
{
	c10_reporter_fn reporter = c10_debug_info_get();

	if (reporter)
		reporter(ptr, alloc_size, (size_t)total_allocated, (size_t)total_reserved,
			 device);
	asm volatile("" ::: "memory");
}

C10_PROBE_TARGET void c10_report_memory_usage_v1(void *ptr,
						  int64_t alloc_size,
						  struct c10_device device)
{
	c10_reporter_fn reporter = c10_debug_info_get();

	if (reporter)
		reporter(ptr, alloc_size, 0, 0, device);
	asm volatile("" ::: "memory");
}
