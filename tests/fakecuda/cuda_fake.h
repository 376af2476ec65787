/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The slice of the CUDA driver API that the fake libcuda.so.1 implements,
 * declared from the public prototypes (no NVIDIA header is used), plus the
 * fakecuda_* extension that lets test workloads read the fake's own counts.
 *
 * By default the fake stands in for a unified-memory driver (DGX Spark
 * style): every "device" allocation is host memory, and its pages are taken
 * inside the call, in the calling thread. FAKECUDA_MODE=discrete makes it a
 * discrete GPU's driver instead (device memory costs one bookkeeping page of
 * host RAM), and FAKECUDA_POOL=1 adds a driver-590-style pool of freed pages.
 * See fake_libcuda.c for the exact rules.
 */
#ifndef CUDA_FAKE_H
#define CUDA_FAKE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cudaError_enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_OUT_OF_MEMORY = 2,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CUDA_ERROR_NOT_SUPPORTED = 801,
} CUresult;

typedef unsigned long long CUdeviceptr;
typedef unsigned int CUdeviceptr_v1;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct CUstream_st *CUstream;
typedef struct CUmemPoolHandle_st *CUmemoryPool;

/* cuMemHostAlloc flags (accepted, ignored) */
#define CU_MEMHOSTALLOC_PORTABLE	0x01
#define CU_MEMHOSTALLOC_DEVICEMAP	0x02
#define CU_MEMHOSTALLOC_WRITECOMBINED	0x04

/* cuMemHostRegister flags (accepted, ignored) */
#define CU_MEMHOSTREGISTER_PORTABLE	0x01
#define CU_MEMHOSTREGISTER_DEVICEMAP	0x02

/* cuMemAllocManaged flags: exactly one is required */
#define CU_MEM_ATTACH_GLOBAL	0x1
#define CU_MEM_ATTACH_HOST	0x2

typedef enum CUmemAllocationType_enum {
	CU_MEM_ALLOCATION_TYPE_INVALID = 0,
	CU_MEM_ALLOCATION_TYPE_PINNED = 1,
} CUmemAllocationType;

typedef enum CUmemAllocationHandleType_enum {
	CU_MEM_HANDLE_TYPE_NONE = 0,
	CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1,
} CUmemAllocationHandleType;

typedef enum CUmemLocationType_enum {
	CU_MEM_LOCATION_TYPE_INVALID = 0,
	CU_MEM_LOCATION_TYPE_DEVICE = 1,
} CUmemLocationType;

typedef enum CUmemAccess_flags_enum {
	CU_MEM_ACCESS_FLAGS_PROT_NONE = 0,
	CU_MEM_ACCESS_FLAGS_PROT_READ = 1,
	CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3,
} CUmemAccess_flags;

typedef struct CUmemLocation_st {
	CUmemLocationType type;
	int id;
} CUmemLocation;

typedef struct CUmemAllocationProp_st {
	CUmemAllocationType type;
	CUmemAllocationHandleType requestedHandleTypes;
	CUmemLocation location;
	void *win32HandleMetaData;
	struct {
		unsigned char compressionType;
		unsigned char gpuDirectRDMACapable;
		unsigned short usage;
		unsigned char reserved[4];
	} allocFlags;
} CUmemAllocationProp;

typedef struct CUmemAccessDesc_st {
	CUmemLocation location;
	CUmemAccess_flags flags;
} CUmemAccessDesc;

CUresult cuInit(unsigned int flags);

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize);
CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch,
			    size_t WidthInBytes, size_t Height,
			    unsigned int ElementSizeBytes);
CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch,
			 unsigned int WidthInBytes, unsigned int Height,
			 unsigned int ElementSizeBytes);
CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize,
			   unsigned int flags);
CUresult cuMemAllocHost_v2(void **pp, size_t bytesize);
CUresult cuMemAllocHost(void **pp, unsigned int bytesize);
CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags);
CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags);
CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags);
CUresult cuMemHostUnregister(void *p);
CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
			      CUstream hStream);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize,
				 CUmemoryPool pool, CUstream hStream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
				      CUmemoryPool pool, CUstream hStream);

CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemFree(CUdeviceptr_v1 dptr);
CUresult cuMemFreeHost(void *p);
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
			     CUdeviceptr addr, unsigned long long flags);
CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size);
CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
		     const CUmemAllocationProp *prop, unsigned long long flags);
CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
		  CUmemGenericAllocationHandle handle,
		  unsigned long long flags);
CUresult cuMemUnmap(CUdeviceptr ptr, size_t size);
CUresult cuMemRelease(CUmemGenericAllocationHandle handle);
CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size,
			const CUmemAccessDesc *desc, size_t count);

/*
 * Test-only extension. Every exported entry point has an index; the list
 * order is the index order and is also the order of the counters below.
 */
#define FAKECUDA_API_LIST(X)		\
	X(cuInit)			\
	X(cuMemAlloc_v2)		\
	X(cuMemAlloc)			\
	X(cuMemAllocPitch_v2)		\
	X(cuMemAllocPitch)		\
	X(cuMemAllocManaged)		\
	X(cuMemAllocHost_v2)		\
	X(cuMemAllocHost)		\
	X(cuMemHostAlloc)		\
	X(cuMemHostRegister_v2)		\
	X(cuMemHostRegister)		\
	X(cuMemHostUnregister)		\
	X(cuMemAllocAsync)		\
	X(cuMemAllocAsync_ptsz)		\
	X(cuMemAllocFromPoolAsync)	\
	X(cuMemAllocFromPoolAsync_ptsz)	\
	X(cuMemFree_v2)			\
	X(cuMemFree)			\
	X(cuMemFreeHost)		\
	X(cuMemFreeAsync)		\
	X(cuMemFreeAsync_ptsz)		\
	X(cuMemAddressReserve)		\
	X(cuMemAddressFree)		\
	X(cuMemCreate)			\
	X(cuMemMap)			\
	X(cuMemUnmap)			\
	X(cuMemRelease)			\
	X(cuMemSetAccess)

#define FAKECUDA_API_ENUM(name) FAKECUDA_API_##name,
enum fakecuda_api {
	FAKECUDA_API_LIST(FAKECUDA_API_ENUM)
	FAKECUDA_API_COUNT
};
#undef FAKECUDA_API_ENUM

/* What FAKECUDA_MODE selected (fakecuda_stats.mode). */
enum fakecuda_mode {
	FAKECUDA_MODE_UNIFIED = 0,	/* device memory is host memory */
	FAKECUDA_MODE_DISCRETE = 1,	/* device memory is on the GPU */
};

/* fakecuda_stats.pool_max_bytes when FAKECUDA_POOL_MAX_BYTES is unset */
#define FAKECUDA_POOL_UNLIMITED	(~0ULL)

/*
 * Totals since load, each updated atomically. A call that nests another
 * entry point (cuMemAllocFromPoolAsync -> cuMemAllocAsync) counts in both
 * calls[] slots, but its bytes are counted once, under the entry point
 * that actually mapped them (the inner one).
 */
struct fakecuda_stats {
	unsigned long long calls[FAKECUDA_API_COUNT];
	unsigned long long failed[FAKECUDA_API_COUNT];
	/* bytes whose pages the entry point allocated inside the call */
	unsigned long long populated[FAKECUDA_API_COUNT];
	/*
	 * bytes the entry point unmapped or dropped, so freed inside it;
	 * for managed memory only the touched part had pages to free
	 */
	unsigned long long released[FAKECUDA_API_COUNT];
	unsigned long long populated_total;
	unsigned long long released_total;
	/* bytes of the fake's own bookkeeping populated inside a call */
	unsigned long long overhead_bytes;
	/* threads sleeping inside a call right now (delay knobs) */
	unsigned long long sleeping;

	/* configuration, fixed at load */
	unsigned long long mode;		/* enum fakecuda_mode */
	unsigned long long pool_enabled;	/* FAKECUDA_POOL=1 */
	/* FAKECUDA_POOL_MAX_BYTES, or FAKECUDA_POOL_UNLIMITED */
	unsigned long long pool_max_bytes;

	/*
	 * The driver's pool of freed pages (FAKECUDA_POOL=1; not a
	 * CUmemoryPool). Bytes are host bytes: a device allocation's size in
	 * unified mode, its one bookkeeping page in discrete mode.
	 */
	unsigned long long pool_bytes;		/* held in the pool now */
	unsigned long long pool_chunks;		/* chunks held now */
	/* allocations served from the pool: no page taken in the call */
	unsigned long long pool_hits;
	unsigned long long pool_hit_bytes;
	/* poolable allocations the pool could not serve: pages taken */
	unsigned long long pool_misses;
	/* bytes frees put in the pool instead of freeing them */
	unsigned long long pool_kept_bytes;
	/*
	 * bytes frees gave back to the kernel inside the call because the
	 * pool had no room for them (FAKECUDA_POOL_MAX_BYTES)
	 */
	unsigned long long pool_overflow_bytes;
	/* bytes fakecuda_pool_trim() gave back, outside any entry point */
	unsigned long long pool_trimmed_bytes;
};

void fakecuda_stats(struct fakecuda_stats *out);
const char *fakecuda_api_name(unsigned int api);
/*
 * Per-thread override of FAKECUDA_DELAY_MS for the calling thread's later
 * allocation calls; 0 restores the process-wide setting.
 */
void fakecuda_set_thread_delay_ms(unsigned int ms);
/*
 * Give every page held in the pool back to the kernel now, as the kernel's
 * shrinker would make the real driver do. Returns the bytes given back;
 * 0 without FAKECUDA_POOL=1. Not an entry point: nothing traces it.
 */
unsigned long long fakecuda_pool_trim(void);
/*
 * With FAKECUDA_DRIVER: the GPU touches [ptr, ptr + len) of managed
 * memory, and the fake kernel driver's "UVM GPU0 BH" thread faults those
 * pages in for this process (its mm adopted, its memory cgroup active).
 * Returns the bytes faulted in; 0 without the driver. Not an entry point.
 */
unsigned long long fakecuda_gpu_touch(CUdeviceptr ptr, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* CUDA_FAKE_H */
