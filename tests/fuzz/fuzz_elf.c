// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libFuzzer target for the entry point lookup (user/attach/elf_syms.c), which
 * umtrace runs on every libcuda file it finds, including ones inside
 * containers it does not control. elf_syms__resolve() takes a path: the
 * input is written to a memfd and resolved by its /proc/self/fd path, so
 * libelf maps it as it maps a real library.
 *
 * Whatever the bytes: no crash, a result no larger than the names asked
 * for, a reason whenever it fails, and no offset for a name it says it
 * did not find.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <linux/types.h>
#include "model/cuda_api.h"
#include "attach/elf_syms.h"

/* Every probed entry point, and names a real libcuda has beside them. */
#define N_EXTRA 3
static const char *names[UMT_API__COUNT + N_EXTRA];
static size_t n_names;
static int elf_fd = -1;
static char elf_path[64];
static volatile size_t sink;

static void setup(void)
{
	static const char *const extra[N_EXTRA] = { "cuInit", "cuGetProcAddress", "" };
	unsigned int i;

	for (i = 0; i < UMT_API__COUNT; i++)
		names[n_names++] = cuda_api__name(i);
	for (i = 0; i < N_EXTRA; i++)
		names[n_names++] = extra[i];
	elf_fd = memfd_create("fuzz-libcuda.so.1", MFD_CLOEXEC);
	if (elf_fd < 0)
		abort();
	snprintf(elf_path, sizeof(elf_path), "/proc/self/fd/%d", elf_fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t offsets[UMT_API__COUNT + N_EXTRA];
	const char *why = NULL;
	size_t i, nonzero = 0;
	int found;

	if (elf_fd < 0)
		setup();
	if (ftruncate(elf_fd, 0) ||
	    (size && pwrite(elf_fd, data, size, 0) != (ssize_t)size))
		abort();
	found = elf_syms__resolve(elf_path, names, n_names, offsets, &why);
	if (found < 0) {
		if (!why)
			abort();	/* every failure says why */
		sink += strlen(why);
		return 0;
	}
	for (i = 0; i < n_names; i++)
		nonzero += offsets[i] != 0;
	/* found counts the names given an offset, each once */
	if ((size_t)found > n_names || (size_t)found != nonzero)
		abort();
	return 0;
}
