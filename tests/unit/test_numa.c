// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <string.h>
#include "check.h"
#include "lib/numa.h"

static bool bit(const uint64_t *b, unsigned int n)
{
	return b[n / 64] & (1ULL << (n % 64));
}

static void test_parse_list(void)
{
	uint64_t b[UMT_MAX_NODES / 64];
	char why[160];

	CHECK_EQ(numa__parse_list("1,3-4,1023", b, why, sizeof(why)), 0, "list");
	CHECK(!bit(b, 0) && bit(b, 1) && !bit(b, 2) && bit(b, 3) && bit(b, 4) &&
	      !bit(b, 5) && bit(b, 1023), "bits", "wrong nodes set");
	CHECK_EQ(numa__parse_list("none", b, why, sizeof(why)), 0, "none");
	CHECK(!bit(b, 1) && !bit(b, 3), "none clears", "nodes left set");
	CHECK(numa__parse_list("", b, why, sizeof(why)) < 0, "empty", "accepted");
	CHECK(numa__parse_list("1,", b, why, sizeof(why)) < 0, "trailing comma", "accepted");
	CHECK(numa__parse_list("4-3", b, why, sizeof(why)) < 0, "backwards", "accepted");
	CHECK(numa__parse_list("1024", b, why, sizeof(why)) < 0, "too big", "accepted");
	CHECK(numa__parse_list("-1", b, why, sizeof(why)) < 0, "negative", "accepted");
	CHECK(numa__parse_list("x", b, why, sizeof(why)) < 0, "word", "accepted");
	CHECK(strstr(why, "'x'") != NULL, "why", "%s", why);
}

static void test_flags_shift(void)
{
	const char *ok = "# c\nCONFIG_64BIT=y\nCONFIG_NUMA=y\nCONFIG_NODES_SHIFT=10\n"
			 "CONFIG_SPARSEMEM_VMEMMAP=y\n";
	const char *six = "CONFIG_64BIT=y\nCONFIG_NUMA=y\nCONFIG_NODES_SHIFT=6\n"
			  "CONFIG_SPARSEMEM_VMEMMAP=y\n";
	const char *no_numa = "CONFIG_64BIT=y\n# CONFIG_NUMA is not set\n"
			      "CONFIG_SPARSEMEM_VMEMMAP=y\n";
	const char *no_vmemmap = "CONFIG_64BIT=y\nCONFIG_NUMA=y\nCONFIG_NODES_SHIFT=10\n";

	CHECK_EQ(numa__flags_shift(ok), 54, "shift 10");
	CHECK_EQ(numa__flags_shift(six), 58, "shift 6");
	CHECK_EQ(numa__flags_shift(no_numa), 0, "no NUMA");
	CHECK_EQ(numa__flags_shift(no_vmemmap), 0, "no vmemmap");
	CHECK_EQ(numa__flags_shift(""), 0, "empty");
}

static void test_format(void)
{
	struct numa_nodes n;
	char why[160], buf[64];

	memset(&n, 0, sizeof(n));
	numa__parse_list("1,3-5,9", n.device, why, sizeof(why));
	CHECK(!strcmp(numa__format(&n, buf, sizeof(buf)), "1,3-5,9"), "format", "%s", buf);
}

int main(void)
{
	RUN_SUBTEST(test_parse_list);
	RUN_SUBTEST(test_flags_shift);
	RUN_SUBTEST(test_format);
	return CHECK_EXIT();
}
