// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <string.h>
#include <linux/types.h>
#include "check.h"
#include "cookie.h"
#include "model/cuda_api.h"
#include "umtrace.h"

/* The BPF side trusts these cookies blindly: check every row. */
static void test_cookies(void)
{
	unsigned int i, j;

	for (i = 0; i < UMT_API__COUNT; i++) {
		const struct cuda_api *a = cuda_api__get(i);
		uint64_t ck = a->cookie;
		unsigned int idx[] = { UMT_CK_OUT(ck), UMT_CK_HANDLE(ck),
				       UMT_CK_SIZE(ck), UMT_CK_SIZE2(ck),
				       UMT_CK_FLAGS(ck), UMT_CK_AUX(ck) };

		CHECK(a->name, "name", "api %u has no row", i);
		if (!a->name)
			continue;
		CHECK(UMT_CK_API(ck) == i, a->name, "cookie api %u", UMT_CK_API(ck));
		CHECK(!!(ck & UMT_CK_FREE) == a->is_free, a->name, "free bit");
		for (j = 0; j < sizeof(idx) / sizeof(idx[0]); j++)
			CHECK(idx[j] < 5 || idx[j] == UMT_ARG_NONE, a->name,
			      "argument index %u out of range", idx[j]);
		/* Exactly one of: a result written through a pointer, or a handle passed in. */
		CHECK((UMT_CK_OUT(ck) == UMT_ARG_NONE) != (UMT_CK_HANDLE(ck) == UMT_ARG_NONE),
		      a->name, "needs exactly one of out-pointer and handle");
		if (a->is_free)
			CHECK(UMT_CK_OUT(ck) == UMT_ARG_NONE, a->name, "free with out-pointer");
		for (j = 0; j < i; j++)
			CHECK(strcmp(a->name, cuda_api__name(j)), a->name, "duplicate name");
	}
	CHECK(cuda_api__get(UMT_API__COUNT) == NULL, "bounds", "past the end");
	CHECK(!strcmp(cuda_api__name(999), "unknown"), "bounds", "name past the end");
}

/* Every allocating space has a way back. */
static void test_every_space_has_a_free(void)
{
	unsigned int i, j;

	for (i = 0; i < UMT_API__COUNT; i++) {
		const struct cuda_api *a = cuda_api__get(i);
		bool found = false;

		if (a->is_free)
			continue;
		for (j = 0; j < UMT_API__COUNT; j++)
			found |= cuda_api__get(j)->is_free && cuda_api__get(j)->space == a->space;
		CHECK(found, a->name, "no free for its handle space");
	}
}

int main(void)
{
	RUN_SUBTEST(test_cookies);
	RUN_SUBTEST(test_every_space_has_a_free);
	return CHECK_EXIT();
}
