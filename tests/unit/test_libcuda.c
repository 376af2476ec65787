// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "attach/libcuda.h"

static void test_kinds(void)
{
	CHECK_EQ(lib_kind__of("/usr/lib/x86_64-linux-gnu/libcuda.so.1"), LIB_CUDA, "libcuda.so.1");
	CHECK_EQ(lib_kind__of("libcuda.so.580.65.06"), LIB_CUDA, "versioned");
	CHECK_EQ(lib_kind__of("/opt/torch/lib/libc10.so"), LIB_C10, "libc10");
	CHECK_EQ(lib_kind__of("/opt/torch/lib/libc10_cuda.so"), -1, "libc10_cuda");
	CHECK_EQ(lib_kind__of("/lib64/ld-linux-x86-64.so.2"), LIB_LOADER, "x86 loader");
	CHECK_EQ(lib_kind__of("/lib/ld-linux-aarch64.so.1"), LIB_LOADER, "arm64 loader");
	CHECK_EQ(lib_kind__of("/lib/x86_64-linux-gnu/ld-2.31.so"), LIB_LOADER, "old glibc");
	CHECK_EQ(lib_kind__of("/usr/bin/ld-wrapper"), -1, "not a loader");
	CHECK_EQ(lib_kind__of("/usr/lib/libcudart.so.12"), -1, "libcudart");
}

/* This test program is dynamically linked: its own maps hold its loader. */
static void test_scan_finds_own_loader(void)
{
	struct libcuda_set set = {};
	int n;

	set.skip = 1U << LIB_CUDA | 1U << LIB_C10;
	n = libcuda_set__scan_pid(&set, getpid());
	CHECK_EQ(n, 1, "one loader");
	CHECK_EQ(libcuda_set__count(&set, LIB_LOADER), 1, "counted");
	CHECK(set.n == 1 && strstr(set.libs[0].path, "/ld-") != NULL, "path", "%s",
	      set.n ? set.libs[0].path : "(none)");
	/* The same file again is not new. */
	CHECK_EQ(libcuda_set__scan_pid(&set, getpid()), 0, "again");
	libcuda_set__free(&set);
	/* Not looked for: nothing. */
	set.skip = 1U << LIB_LOADER;
	CHECK_EQ(libcuda_set__scan_pid(&set, getpid()), 0, "skipped");
	libcuda_set__free(&set);
}

int main(void)
{
	RUN_SUBTEST(test_kinds);
	RUN_SUBTEST(test_scan_finds_own_loader);
	return CHECK_EXIT();
}
