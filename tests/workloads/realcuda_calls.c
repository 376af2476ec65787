// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * realcuda_calls: four calls into a real libcuda.so.1 (NVIDIA's, from
 * Debian's libcuda1), on a machine without a GPU. The driver runs its own
 * code up to the first error: cuInit(0) returns CUDA_ERROR_NO_DEVICE (100)
 * and the allocation calls after it CUDA_ERROR_NOT_INITIALIZED (3). A
 * tracer must see each call enter and return in NVIDIA's code, with the
 * arguments below and these return codes.
 *
 * usage: realcuda_calls LIBCUDA
 *
 * Prints one line per call, "NAME ret=N" and the arguments a tracer
 * reports (sizes, flags and the freed handle, in decimal). Exit status 0
 * once all four were called, whatever they returned; 1 if the library or
 * one of its symbols cannot be loaded. The library is dlopen()ed, so
 * nothing of the fake libcuda is linked in.
 */
#include <dlfcn.h>
#include <stdio.h>

/* The driver API's types, as the real cuda.h has them on 64-bit Linux. */
typedef int CUresult;
typedef unsigned long long CUdeviceptr;

#define RC_SIZE		(1ULL << 20)
#define RC_HOST_FLAGS	0x01U			/* CU_MEMHOSTALLOC_PORTABLE */
/* Not a pointer the driver gave out: the tracer must report it as is. */
#define RC_FREE_HANDLE	0x7e57f000ULL

struct rc_api {
	CUresult (*init)(unsigned int);
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUresult (*host_alloc)(void **, size_t, unsigned int);
	CUresult (*free)(CUdeviceptr);
};

static void *rc_sym(void *lib, const char *name)
{
	void *p = dlsym(lib, name);

	if (!p)
		fprintf(stderr, "realcuda_calls: %s: %s\n", name, dlerror());
	return p;
}

int main(int argc, char **argv)
{
	struct rc_api api;
	CUdeviceptr dptr = 0;
	void *host = NULL;
	void *lib;

	if (argc != 2) {
		fprintf(stderr, "usage: realcuda_calls LIBCUDA\n");
		return 2;
	}
	lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "realcuda_calls: %s\n", dlerror());
		return 1;
	}
	api.init = rc_sym(lib, "cuInit");
	api.alloc = rc_sym(lib, "cuMemAlloc_v2");
	api.host_alloc = rc_sym(lib, "cuMemHostAlloc");
	api.free = rc_sym(lib, "cuMemFree_v2");
	if (!api.init || !api.alloc || !api.host_alloc || !api.free)
		return 1;

	/* stdout may be a pipe: each line goes out before the next call */
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("cuInit ret=%d\n", api.init(0));
	printf("cuMemAlloc_v2 ret=%d size=%llu\n", api.alloc(&dptr, RC_SIZE),
	       RC_SIZE);
	printf("cuMemHostAlloc ret=%d size=%llu flags=%u\n",
	       api.host_alloc(&host, RC_SIZE, RC_HOST_FLAGS), RC_SIZE,
	       RC_HOST_FLAGS);
	printf("cuMemFree_v2 ret=%d handle=%llu\n", api.free(RC_FREE_HANDLE),
	       RC_FREE_HANDLE);
	return 0;
}
