/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* The libcuda entry points umtrace probes, and how to read their arguments. */
#ifndef UMTRACE_CUDA_API_H
#define UMTRACE_CUDA_API_H

#include <stdbool.h>
#include <stdint.h>

enum umt_api {
	UMT_API_MEM_ALLOC_V2,
	UMT_API_MEM_ALLOC,
	UMT_API_MEM_ALLOC_PITCH_V2,
	UMT_API_MEM_ALLOC_PITCH,
	UMT_API_MEM_ALLOC_MANAGED,
	UMT_API_MEM_ALLOC_HOST_V2,
	UMT_API_MEM_ALLOC_HOST,
	UMT_API_MEM_HOST_ALLOC,
	UMT_API_MEM_HOST_REGISTER_V2,
	UMT_API_MEM_HOST_REGISTER,
	UMT_API_MEM_ALLOC_ASYNC,
	UMT_API_MEM_ALLOC_ASYNC_PTSZ,
	UMT_API_MEM_ALLOC_FROM_POOL_ASYNC,
	UMT_API_MEM_ALLOC_FROM_POOL_ASYNC_PTSZ,
	UMT_API_MEM_CREATE,
	UMT_API_MEM_MAP,
	UMT_API_MEM_ADDRESS_RESERVE,
	UMT_API_MEM_FREE_V2,
	UMT_API_MEM_FREE,
	UMT_API_MEM_FREE_HOST,
	UMT_API_MEM_HOST_UNREGISTER,
	UMT_API_MEM_FREE_ASYNC,
	UMT_API_MEM_FREE_ASYNC_PTSZ,
	UMT_API_MEM_RELEASE,
	UMT_API_MEM_UNMAP,
	UMT_API_MEM_ADDRESS_FREE,
	UMT_API__COUNT,
};

/*
 * Which handle namespace an entry point allocates in or frees from: a
 * free is matched to the allocation with the same (pid, space, handle).
 */
enum umt_space {
	UMT_SPACE_DPTR,		/* device pointers: cuMemAlloc*, managed */
	UMT_SPACE_HOSTPTR,	/* pinned host allocations */
	UMT_SPACE_REGISTERED,	/* host ranges registered with the driver */
	UMT_SPACE_PHYS,		/* cuMemCreate handles */
	UMT_SPACE_MAPPING,	/* cuMemMap'ed virtual ranges */
	UMT_SPACE_VA,		/* cuMemAddressReserve'd ranges */
};

/* What kind of memory an allocation is, for summaries and cost models. */
enum umt_class {
	UMT_CLASS_DEVICE,
	UMT_CLASS_MANAGED,
	UMT_CLASS_PINNED,
	UMT_CLASS_REGISTERED,
	UMT_CLASS_VMM_PHYS,
	UMT_CLASS_VMM_MAP,
	UMT_CLASS_VA,
	UMT_CLASS__COUNT,
};

struct cuda_api {
	const char *name;
	enum umt_space space;
	enum umt_class class;
	bool is_free;
	uint64_t cookie;	/* argument layout, see bpf/umtrace.h */
};

const struct cuda_api *cuda_api__get(unsigned int api);
const char *cuda_api__name(unsigned int api);

#endif /* UMTRACE_CUDA_API_H */
