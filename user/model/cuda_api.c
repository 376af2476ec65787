// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The probed libcuda entry points: one row per exported symbol, with the
 * argument positions the BPF side reads. Prototypes are the CUDA driver
 * API's; the legacy v1 names take 32-bit device pointers and sizes.
 */
#include <stddef.h>
#include <linux/types.h>
#include "cookie.h"
#include "model/cuda_api.h"
#include "umtrace.h"

#define N UMT_ARG_NONE

/* Pack an argument layout into a uprobe cookie (bpf/umtrace.h). */
#define CK(api, out, handle, size, size2, flags, aux, extra)		\
	((uint64_t)(api) | (uint64_t)(out) << 8 | (uint64_t)(handle) << 12 | \
	 (uint64_t)(size) << 16 | (uint64_t)(size2) << 20 |		\
	 (uint64_t)(flags) << 24 | (uint64_t)(aux) << 28 | (extra))

#define ALLOC(id, nm, sp, cl, out, h, sz, sz2, fl, aux, extra)	\
	[id] = { nm, sp, cl, false, CK(id, out, h, sz, sz2, fl, aux, extra) }
#define FREE(id, nm, sp, cl, h, sz, extra)				\
	[id] = { nm, sp, cl, true, CK(id, N, h, sz, N, N, N, (extra) | UMT_CK_FREE) }

static const struct cuda_api apis[UMT_API__COUNT] = {
	/* cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) */
	ALLOC(UMT_API_MEM_ALLOC_V2, "cuMemAlloc_v2", UMT_SPACE_DPTR,
	      UMT_CLASS_DEVICE, 0, N, 1, N, N, N, 0),
	/* cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize) */
	ALLOC(UMT_API_MEM_ALLOC, "cuMemAlloc", UMT_SPACE_DPTR,
	      UMT_CLASS_DEVICE, 0, N, 1, N, N, N,
	      UMT_CK_HANDLE32 | UMT_CK_SIZE32),
	/* cuMemAllocPitch_v2(CUdeviceptr *, size_t *pitch, size_t w, size_t h, unsigned int) */
	ALLOC(UMT_API_MEM_ALLOC_PITCH_V2, "cuMemAllocPitch_v2", UMT_SPACE_DPTR,
	      UMT_CLASS_DEVICE, 0, N, 2, 3, N, N, 0),
	ALLOC(UMT_API_MEM_ALLOC_PITCH, "cuMemAllocPitch", UMT_SPACE_DPTR,
	      UMT_CLASS_DEVICE, 0, N, 2, 3, N, N,
	      UMT_CK_HANDLE32 | UMT_CK_SIZE32),
	/* cuMemAllocManaged(CUdeviceptr *, size_t, unsigned int flags) */
	ALLOC(UMT_API_MEM_ALLOC_MANAGED, "cuMemAllocManaged", UMT_SPACE_DPTR,
	      UMT_CLASS_MANAGED, 0, N, 1, N, 2, N, UMT_CK_MANAGED),
	/* cuMemAllocHost_v2(void **pp, size_t bytesize) */
	ALLOC(UMT_API_MEM_ALLOC_HOST_V2, "cuMemAllocHost_v2", UMT_SPACE_HOSTPTR,
	      UMT_CLASS_PINNED, 0, N, 1, N, N, N, 0),
	ALLOC(UMT_API_MEM_ALLOC_HOST, "cuMemAllocHost", UMT_SPACE_HOSTPTR,
	      UMT_CLASS_PINNED, 0, N, 1, N, N, N, UMT_CK_SIZE32),
	/* cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags) */
	ALLOC(UMT_API_MEM_HOST_ALLOC, "cuMemHostAlloc", UMT_SPACE_HOSTPTR,
	      UMT_CLASS_PINNED, 0, N, 1, N, 2, N, 0),
	/* cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int flags) */
	ALLOC(UMT_API_MEM_HOST_REGISTER_V2, "cuMemHostRegister_v2",
	      UMT_SPACE_REGISTERED, UMT_CLASS_REGISTERED, N, 0, 1, N, 2, N, 0),
	ALLOC(UMT_API_MEM_HOST_REGISTER, "cuMemHostRegister",
	      UMT_SPACE_REGISTERED, UMT_CLASS_REGISTERED, N, 0, 1, N, 2, N, 0),
	/* cuMemAllocAsync(CUdeviceptr *, size_t, CUstream) */
	ALLOC(UMT_API_MEM_ALLOC_ASYNC, "cuMemAllocAsync", UMT_SPACE_DPTR,
	      UMT_CLASS_DEVICE, 0, N, 1, N, N, N, 0),
	ALLOC(UMT_API_MEM_ALLOC_ASYNC_PTSZ, "cuMemAllocAsync_ptsz",
	      UMT_SPACE_DPTR, UMT_CLASS_DEVICE, 0, N, 1, N, N, N, 0),
	/* cuMemAllocFromPoolAsync(CUdeviceptr *, size_t, CUmemoryPool, CUstream) */
	ALLOC(UMT_API_MEM_ALLOC_FROM_POOL_ASYNC, "cuMemAllocFromPoolAsync",
	      UMT_SPACE_DPTR, UMT_CLASS_DEVICE, 0, N, 1, N, N, 2, 0),
	ALLOC(UMT_API_MEM_ALLOC_FROM_POOL_ASYNC_PTSZ,
	      "cuMemAllocFromPoolAsync_ptsz", UMT_SPACE_DPTR, UMT_CLASS_DEVICE,
	      0, N, 1, N, N, 2, 0),
	/* cuMemCreate(CUmemGenericAllocationHandle *, size_t, const prop *, u64 flags) */
	ALLOC(UMT_API_MEM_CREATE, "cuMemCreate", UMT_SPACE_PHYS,
	      UMT_CLASS_VMM_PHYS, 0, N, 1, N, 3, N, 0),
	/* cuMemMap(CUdeviceptr va, size_t, size_t offset, handle, u64 flags) */
	ALLOC(UMT_API_MEM_MAP, "cuMemMap", UMT_SPACE_MAPPING,
	      UMT_CLASS_VMM_MAP, N, 0, 1, N, 4, 3, 0),
	/* cuMemAddressReserve(CUdeviceptr *, size_t, size_t align, CUdeviceptr, u64) */
	ALLOC(UMT_API_MEM_ADDRESS_RESERVE, "cuMemAddressReserve", UMT_SPACE_VA,
	      UMT_CLASS_VA, 0, N, 1, N, 4, N, 0),
	/* cuMemFree_v2(CUdeviceptr) */
	FREE(UMT_API_MEM_FREE_V2, "cuMemFree_v2", UMT_SPACE_DPTR,
	     UMT_CLASS_DEVICE, 0, N, 0),
	FREE(UMT_API_MEM_FREE, "cuMemFree", UMT_SPACE_DPTR, UMT_CLASS_DEVICE,
	     0, N, UMT_CK_HANDLE32),
	/* cuMemFreeHost(void *) */
	FREE(UMT_API_MEM_FREE_HOST, "cuMemFreeHost", UMT_SPACE_HOSTPTR,
	     UMT_CLASS_PINNED, 0, N, 0),
	/* cuMemHostUnregister(void *) */
	FREE(UMT_API_MEM_HOST_UNREGISTER, "cuMemHostUnregister",
	     UMT_SPACE_REGISTERED, UMT_CLASS_REGISTERED, 0, N, 0),
	/* cuMemFreeAsync(CUdeviceptr, CUstream) */
	FREE(UMT_API_MEM_FREE_ASYNC, "cuMemFreeAsync", UMT_SPACE_DPTR,
	     UMT_CLASS_DEVICE, 0, N, 0),
	FREE(UMT_API_MEM_FREE_ASYNC_PTSZ, "cuMemFreeAsync_ptsz",
	     UMT_SPACE_DPTR, UMT_CLASS_DEVICE, 0, N, 0),
	/* cuMemRelease(CUmemGenericAllocationHandle) */
	FREE(UMT_API_MEM_RELEASE, "cuMemRelease", UMT_SPACE_PHYS,
	     UMT_CLASS_VMM_PHYS, 0, N, 0),
	/* cuMemUnmap(CUdeviceptr, size_t) */
	FREE(UMT_API_MEM_UNMAP, "cuMemUnmap", UMT_SPACE_MAPPING,
	     UMT_CLASS_VMM_MAP, 0, 1, 0),
	/* cuMemAddressFree(CUdeviceptr, size_t) */
	FREE(UMT_API_MEM_ADDRESS_FREE, "cuMemAddressFree", UMT_SPACE_VA,
	     UMT_CLASS_VA, 0, 1, 0),
};

const struct cuda_api *cuda_api__get(unsigned int api)
{
	if (api >= UMT_API__COUNT)
		return NULL;
	return &apis[api];
}

const char *cuda_api__name(unsigned int api)
{
	return api < UMT_API__COUNT ? apis[api].name : "unknown";
}

