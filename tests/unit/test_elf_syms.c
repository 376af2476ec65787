// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include "check.h"
#include "model/cuda_api.h"
#include "attach/elf_syms.h"

/* Set by tests/run.py: the fake libcuda and the CUDA toolkit's stub. */
static const char *fake_lib, *stub_lib;

static int resolve_all(const char *path, uint64_t *offs, const char **why)
{
	const char *names[UMT_API__COUNT];
	unsigned int i;

	for (i = 0; i < UMT_API__COUNT; i++)
		names[i] = cuda_api__name(i);
	return elf_syms__resolve(path, names, UMT_API__COUNT, offs, why);
}

static void test_fake_libcuda(void)
{
	uint64_t offs[UMT_API__COUNT];
	const char *why;
	unsigned int i, j;
	int n = resolve_all(fake_lib, offs, &why);

	CHECK_EQ(n, UMT_API__COUNT, "all entry points");
	for (i = 0; i < UMT_API__COUNT; i++)
		for (j = 0; j < i; j++)
			CHECK(offs[i] != offs[j], cuda_api__name(i), "same offset as %s",
			      cuda_api__name(j));
}

static void test_toolkit_stub(void)
{
	uint64_t offs[UMT_API__COUNT];
	const char *why;
	int n = resolve_all(stub_lib, offs, &why);

	CHECK_EQ(n, UMT_API__COUNT, "every probed symbol in NVIDIA's stub");
}

static void test_bad_files(void)
{
	uint64_t offs[UMT_API__COUNT];
	const char *why;

	CHECK_EQ(resolve_all("/nonexistent/libcuda.so.1", offs, &why), -ENOENT, "missing");
	CHECK_EQ(resolve_all("/proc/self/status", offs, &why), -ENOEXEC, "not ELF");
	CHECK(why != NULL, "reason", "no reason given");
	CHECK_EQ(resolve_all("/", offs, &why), -EINVAL, "directory");
	CHECK_EQ(resolve_all("/dev/null", offs, &why), -EINVAL, "a device is never read");
	/* An ELF file without the symbols: found nothing, no error. */
	CHECK_EQ(resolve_all("/proc/self/exe", offs, &why), 0, "no cuda symbols");
}

int main(void)
{
	fake_lib = getenv("UMT_FAKE_LIBCUDA");
	stub_lib = getenv("UMT_STUB_LIBCUDA");
	if (fake_lib)
		RUN_SUBTEST(test_fake_libcuda);
	else
		SKIP_SUBTEST(test_fake_libcuda, "UMT_FAKE_LIBCUDA not set");
	if (stub_lib && !access(stub_lib, R_OK))
		RUN_SUBTEST(test_toolkit_stub);
	else
		SKIP_SUBTEST(test_toolkit_stub, "CUDA toolkit stub libcuda.so not installed");
	RUN_SUBTEST(test_bad_files);
	return CHECK_EXIT();
}
