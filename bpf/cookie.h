/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The uprobe cookie: how the one pair of GPU call programs finds an entry
 * point's arguments. Shared by the BPF side, which reads it, and user
 * space, which packs it per entry point (no record carries it).
 */
#ifndef UMTRACE_COOKIE_H
#define UMTRACE_COOKIE_H

/*
 * Per-attachment description of a libcuda entry point, passed to the
 * generic entry/return programs as the uprobe's BPF cookie. User space
 * owns the API table and packs each entry point's layout here; the BPF
 * side only follows these indexes and knows no entry point by name.
 *
 *   bits  0..7   api id: an index user space gives each entry point
 *   bits  8..11  argument holding the out-pointer written by the call
 *   bits 12..15  argument holding the handle passed in (frees, register, map)
 *   bits 16..19  argument holding the size in bytes
 *   bits 20..23  argument multiplied into the size (pitch: height)
 *   bits 24..27  argument holding the flags
 *   bits 28..31  argument holding an auxiliary value (cuMemMap: phys handle)
 *   bit  32      the call frees (else it allocates or maps)
 *   bit  33      handles are 32-bit (legacy v1 entry points)
 *   bit  34      size argument is 32-bit (legacy v1 entry points)
 *   bit  35      the call allocates managed memory
 * An argument index of UMT_ARG_NONE means "not present".
 */
#define UMT_ARG_NONE 0xf
#define UMT_CK_API(c)		((unsigned int)((c) & 0xff))
#define UMT_CK_OUT(c)		((unsigned int)(((c) >> 8) & 0xf))
#define UMT_CK_HANDLE(c)	((unsigned int)(((c) >> 12) & 0xf))
#define UMT_CK_SIZE(c)		((unsigned int)(((c) >> 16) & 0xf))
#define UMT_CK_SIZE2(c)		((unsigned int)(((c) >> 20) & 0xf))
#define UMT_CK_FLAGS(c)		((unsigned int)(((c) >> 24) & 0xf))
#define UMT_CK_AUX(c)		((unsigned int)(((c) >> 28) & 0xf))
#define UMT_CK_FREE		(1ULL << 32)
#define UMT_CK_HANDLE32		(1ULL << 33)
#define UMT_CK_SIZE32		(1ULL << 34)
#define UMT_CK_MANAGED		(1ULL << 35)	/* pages come later, on CPU faults */

/*
 * The PyTorch hook's cookie (bpf/torch.bpf.c), one per mangled form of
 * c10::reportMemoryUsageToProfiler in a libc10.so:
 *   bit 0   the form carries the allocator's totals: (ptr, size,
 *           total_allocated, total_reserved, device), the device the 5th
 *           argument; without it (ptr, size, device), the device the 3rd,
 *           and allocated is kept from the signed sizes
 */
#define UMT_TORCH_CK_TOTALS	(1ULL << 0)

#endif /* UMTRACE_COOKIE_H */
