// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * nofp_chain: main -> chain_a -> chain_b -> chain_c -> cuMemAlloc_v2,
 * built with -O2 -fomit-frame-pointer (tests/tests.mk). No function here
 * keeps a frame pointer, so no frame record links their frames: a
 * frame-pointer walk from the driver call finds chain_c (the return
 * address at the entry point's stack pointer) and then only whatever rbp
 * happens to hold. Their call frame information (.eh_frame, there by
 * default) still describes every frame, which is what a DWARF unwinder
 * follows to name chain_b, chain_a and main.
 *
 * usage: nofp_chain [-n ITERATIONS] [-s BYTES] [-w MS]
 *
 * Each iteration allocates BYTES (default 1 MiB) through the chain and
 * frees it from main; then it waits MS milliseconds (default 0) before
 * exiting: umtrace report reads a process's mappings when its records
 * arrive, and a job this short could otherwise be gone by then. Exit
 * status 0, or 1 if a call failed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cuda_fake.h"

/*
 * Out of line and not cloned, so each function keeps its own name; each
 * uses its result after the call, so none ends in a tail call that would
 * take its frame off the stack.
 */
#define CHAIN __attribute__((noinline, noclone))

static volatile unsigned long sink;

static void check(CUresult r, const char *what)
{
	if (r == CUDA_SUCCESS)
		return;
	fprintf(stderr, "nofp_chain: %s failed: %d\n", what, (int)r);
	exit(1);
}

/* Frames of different sizes, so each one has its own CFA rule. */
CHAIN CUdeviceptr chain_c(size_t size)
{
	volatile char scratch[40];
	CUdeviceptr p = 0;

	scratch[0] = (char)size;
	check(cuMemAlloc_v2(&p, size), "cuMemAlloc_v2");
	sink += scratch[0];
	return p;
}

/* salt lives across the call: a callee-saved register to restore. */
CHAIN CUdeviceptr chain_b(size_t size, unsigned long salt)
{
	CUdeviceptr p = chain_c(size);

	sink += salt;
	return p;
}

CHAIN CUdeviceptr chain_a(size_t size, unsigned long salt)
{
	volatile unsigned long scratch[24];
	CUdeviceptr p;

	scratch[salt % 24] = salt;
	p = chain_b(size, salt * 3 + 1);
	sink += scratch[salt % 24];
	return p;
}

int main(int argc, char **argv)
{
	unsigned long i, n = 3, wait_ms = 0;
	size_t size = 1 << 20;
	struct timespec ts;
	int opt;

	while ((opt = getopt(argc, argv, "n:s:w:")) != -1) {
		switch (opt) {
		case 'n':
			n = strtoul(optarg, NULL, 0);
			break;
		case 's':
			size = strtoul(optarg, NULL, 0);
			break;
		case 'w':
			wait_ms = strtoul(optarg, NULL, 0);
			break;
		default:
			fprintf(stderr, "usage: nofp_chain [-n ITERATIONS] [-s BYTES] [-w MS]\n");
			return 2;
		}
	}
	check(cuInit(0), "cuInit");
	for (i = 0; i < n; i++) {
		CUdeviceptr p = chain_a(size, i);

		check(cuMemFree_v2(p), "cuMemFree_v2");
	}
	ts.tv_sec = wait_ms / 1000;
	ts.tv_nsec = (long)(wait_ms % 1000) * 1000000L;
	nanosleep(&ts, NULL);
	return 0;
}
