// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * hostile: a GPU job whose names are an attacker's (test_hostile.py).
 *
 * usage: hostile [-n N] [-s SIZE] [-w HOLD_MS]
 *
 * Makes N (default 4) cuMemAlloc_v2 calls of SIZE bytes (K, M, G
 * suffixes; default 1M) from one function, holds them HOLD_MS (default
 * 0), frees them and exits 0.
 *
 * The function's name is a placeholder of 48 bytes that occurs nowhere
 * else: the test patches every copy of it in the binary (.strtab,
 * .debug_str) with hostile bytes of the same length, and runs the copy
 * under a hostile file name, so that both the process's name and a frame
 * of every stack umtrace sees are the attacker's. It is neither static
 * (it keeps its own name in .symtab) nor exported (hidden: it is not in
 * .dynstr, which the dynamic linker reads).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "cuda_fake.h"

#define MAX_CALLS 4096

__attribute__((noinline, noclone, visibility("hidden")))
int umt_hostile_frame_placeholder_0123456789abcdef_x(CUdeviceptr *p, long n, size_t size);

static size_t parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 0);

	switch (*end) {
	case 'G': case 'g': v <<= 10; /* fall through */
	case 'M': case 'm': v <<= 10; /* fall through */
	case 'K': case 'k': v <<= 10; break;
	default: break;
	}
	return (size_t)v;
}

int umt_hostile_frame_placeholder_0123456789abcdef_x(CUdeviceptr *p, long n, size_t size)
{
	long i;

	for (i = 0; i < n; i++) {
		CUresult r = cuMemAlloc_v2(&p[i], size);

		if (r != CUDA_SUCCESS) {
			fprintf(stderr, "hostile: cuMemAlloc_v2: %d\n", (int)r);
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	static CUdeviceptr ptrs[MAX_CALLS];
	long n = 4, hold = 0, i;
	size_t size = 1 << 20;
	struct timespec ts;
	int opt;

	while ((opt = getopt(argc, argv, "n:s:w:")) != -1) {
		switch (opt) {
		case 'n': n = atol(optarg); break;
		case 's': size = parse_size(optarg); break;
		case 'w': hold = atol(optarg); break;
		default:
			fprintf(stderr, "usage: hostile [-n N] [-s SIZE] [-w HOLD_MS]\n");
			return 2;
		}
	}
	if (n < 1 || n > MAX_CALLS || !size || hold < 0)
		return 2;
	if (cuInit(0) != CUDA_SUCCESS)
		return 1;
	if (umt_hostile_frame_placeholder_0123456789abcdef_x(ptrs, n, size))
		return 1;
	ts.tv_sec = hold / 1000;
	ts.tv_nsec = hold % 1000 * 1000000;
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	for (i = 0; i < n; i++)
		cuMemFree_v2(ptrs[i]);
	return 0;
}
