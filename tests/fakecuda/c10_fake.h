/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The slice of PyTorch's libc10.so that the fake libc10.so exports: the
 * memory profiler hook c10::reportMemoryUsageToProfiler, under its C++
 * names, in the three forms PyTorch has shipped:
 *
 *   current    (void *ptr, int64_t size, size_t total_allocated,
 *               size_t total_reserved, c10::Device device)
 *   2021 on    the same with int64_t totals: how the totals first came
 *              (pytorch PR #61282, PyTorch 1.10), later made size_t
 *   before     (void *ptr, int64_t size, c10::Device device), no totals
 *
 * The CUDA caching allocator calls it on every block allocation (size > 0)
 * and free (size < 0) with its own allocated_bytes and reserved_bytes
 * (aggregate, current) for that device; CPU allocators call it too.
 *
 * c10::Device is { int8 type; int8 index; }, trivially copyable: passed by
 * value in one integer register (x86-64 SysV and AAPCS64 alike), type in
 * the low byte, index in the next; the register's upper bits are not
 * defined by either ABI. It is the 5th integer argument (r8 / x4) of the
 * 5-argument forms and the 3rd (rdx / x2) of the 3-argument one.
 */
#ifndef C10_FAKE_H
#define C10_FAKE_H

#include <stddef.h>
#include <stdint.h>

#define C10_REPORT_SYM		"_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE"
#define C10_REPORT_I64_SYM	"_ZN3c1027reportMemoryUsageToProfilerEPvlllNS_6DeviceE"
#define C10_REPORT_V1_SYM	"_ZN3c1027reportMemoryUsageToProfilerEPvlNS_6DeviceE"

/* c10::DeviceType values (c10/core/DeviceType.h) */
enum c10_device_type {
	C10_DEVICE_CPU = 0,
	C10_DEVICE_CUDA = 1,
	C10_DEVICE_XPU = 12,	/* another backend's allocator */
};

/* c10::Device; c10::Device(kCPU) has index -1 */
struct c10_device {
	int8_t type;
	int8_t index;
};

void c10_report_memory_usage(void *ptr, int64_t alloc_size,
			     size_t total_allocated, size_t total_reserved,
			     struct c10_device device)
	__asm__(C10_REPORT_SYM);
void c10_report_memory_usage_i64(void *ptr, int64_t alloc_size,
				 int64_t total_allocated,
				 int64_t total_reserved,
				 struct c10_device device)
	__asm__(C10_REPORT_I64_SYM);
void c10_report_memory_usage_v1(void *ptr, int64_t alloc_size,
				struct c10_device device)
	__asm__(C10_REPORT_V1_SYM);

#endif /* C10_FAKE_H */
