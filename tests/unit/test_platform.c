// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <string.h>
#include "check.h"
#include "model/platform.h"

#define MIB (1ULL << 20)

static struct umt_call_rec alloc(unsigned int api, uint64_t size, uint64_t pages)
{
	struct umt_call_rec r;

	memset(&r, 0, sizeof(r));
	r.type = UMT_REC_CALL;
	r.api = api;
	r.size = size;
	r.pages_taken = pages;
	return r;
}

static void test_parse(void)
{
	enum platform p;

	CHECK(!platform__parse("unified", &p) && p == PLATFORM_UNIFIED, "unified", "");
	CHECK(!platform__parse("discrete", &p) && p == PLATFORM_DISCRETE, "discrete", "");
	CHECK(!platform__parse("auto", &p) && p == PLATFORM_AUTO, "auto", "");
	CHECK_EQ(platform__parse("gb10", &p), -EINVAL, "junk");
}

/* The cost model table, both platforms. */
static void test_holds(void)
{
	struct platform_model u, d;

	platform__init(&u, PLATFORM_UNIFIED);
	platform__init(&d, PLATFORM_DISCRETE);
	CHECK_EQ(platform__holds(&u, UMT_CLASS_DEVICE, 40 * MIB, 0), 40 * MIB, "unified device: pooled pages");
	CHECK_EQ(platform__holds(&d, UMT_CLASS_DEVICE, 40 * MIB, 4096), 4096, "discrete device");
	CHECK_EQ(platform__holds(&u, UMT_CLASS_VMM_PHYS, 2 * MIB, 2 * MIB), 2 * MIB, "unified vmm");
	CHECK_EQ(platform__holds(&d, UMT_CLASS_VMM_PHYS, 2 * MIB, 0), 0, "discrete vmm");
	CHECK_EQ(platform__holds(&d, UMT_CLASS_PINNED, 8 * MIB, 8 * MIB), 8 * MIB, "pinned");
	CHECK_EQ(platform__holds(&d, UMT_CLASS_REGISTERED, 8 * MIB, 0), 8 * MIB, "registered");
	CHECK_EQ(platform__holds(&u, UMT_CLASS_MANAGED, 8 * MIB, 0), 0, "managed: at the call");
	CHECK_EQ(platform__holds(&u, UMT_CLASS_VA, 1ULL << 30, 0), 0, "reservation");
	CHECK_EQ(platform__holds(&u, UMT_CLASS_VMM_MAP, 2 * MIB, 0), 0, "mapping");
}

static void observe_n(struct platform_model *m, unsigned int api, uint64_t size,
		      uint64_t pages, int n)
{
	struct umt_call_rec r = alloc(api, size, pages);

	while (n--)
		platform__observe(m, &r, 4096);
}

static void test_auto(void)
{
	struct platform_model m;

	/* Where the driver says nothing (this machine): by evidence. */
	platform__init(&m, PLATFORM_AUTO);
	if (m.decided != PLATFORM_AUTO) {
		printf("  (the driver decided: %s)\n", m.why);
		return;
	}
	observe_n(&m, UMT_API_MEM_ALLOC_V2, 16 * MIB, 4096, 3);
	CHECK_EQ(platform__current(&m), PLATFORM_AUTO, "48 MiB is not enough evidence");
	observe_n(&m, UMT_API_MEM_ALLOC_V2, 512 * 1024, 128, 1000);
	CHECK_EQ(platform__current(&m), PLATFORM_AUTO, "small calls are not evidence");
	observe_n(&m, UMT_API_MEM_HOST_ALLOC, 64 * MIB, 16384, 2);
	CHECK_EQ(platform__current(&m), PLATFORM_AUTO, "pinned memory is not evidence");
	observe_n(&m, UMT_API_MEM_CREATE, 16 * MIB, 4096, 1);
	CHECK_EQ(platform__current(&m), PLATFORM_UNIFIED, "64 MiB taken in host pages");

	platform__init(&m, PLATFORM_AUTO);
	observe_n(&m, UMT_API_MEM_ALLOC_V2, 1ULL << 30, 1, 1);
	CHECK_EQ(platform__current(&m), PLATFORM_DISCRETE, "1 GiB for one page");

	platform__init(&m, PLATFORM_DISCRETE);
	observe_n(&m, UMT_API_MEM_ALLOC_V2, 1ULL << 30, 262144, 1);
	CHECK_EQ(platform__current(&m), PLATFORM_DISCRETE, "forced stays");
}

int main(void)
{
	RUN_SUBTEST(test_parse);
	RUN_SUBTEST(test_holds);
	RUN_SUBTEST(test_auto);
	return CHECK_EXIT();
}
