// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <string.h>
#include "check.h"
#include "lib/meminfo.h"
#include "lib/numa.h"

#define KB 1024ULL

static const char meminfo_text[] =
	"MemTotal:       24683656 kB\n"
	"MemFree:        23639292 kB\n"
	"MemAvailable:   24283520 kB\n"
	"Buffers:           52004 kB\n"
	"Active(file):     600000 kB\n"
	"Inactive(file):   200000 kB\n"
	"KReclaimable:      80000 kB\n";

/* A GH200-like HBM node: memory, no CPU, a little page cache. */
static const char hbm_node[] =
	"Node 1 MemTotal:       10000000 kB\n"
	"Node 1 MemFree:         9000000 kB\n"
	"Node 1 MemUsed:         1000000 kB\n"
	"Node 1 Active(file):     300000 kB\n"
	"Node 1 FilePages:        400000 kB\n"
	"Node 1 KReclaimable:      50000 kB\n"
	"Node 1 SReclaimable:      50000 kB\n";

static void test_parse(void)
{
	struct meminfo m;

	CHECK_EQ(meminfo__parse(meminfo_text, &m), 0, "parse");
	CHECK_EQ(m.total, 24683656 * KB, "total");
	CHECK_EQ(m.free, 23639292 * KB, "free");
	CHECK_EQ(m.available, 24283520 * KB, "available");
	CHECK_EQ(m.file, 800000 * KB, "file");
	CHECK_EQ(m.kreclaim, 80000 * KB, "kreclaim");
	CHECK(meminfo__parse("MemTotal: 1 kB\nMemFree: 1 kB\n", &m) < 0, "no available",
	      "accepted");
	/* Fields older kernels lack are 0, not an error. */
	CHECK_EQ(meminfo__parse("MemTotal: 1 kB\nMemFree: 1 kB\nMemAvailable: 1 kB\n", &m), 0,
		 "minimal");
	CHECK(m.file == 0 && m.kreclaim == 0, "minimal fields", "file %llu kreclaim %llu",
	      (unsigned long long)m.file, (unsigned long long)m.kreclaim);
	/* A name inside another name's line is not that field. */
	CHECK(meminfo__parse("XMemTotal: 1 kB\nMemFree: 1 kB\nMemAvailable: 1 kB\n", &m) < 0,
	      "prefix", "accepted");
}

static void test_subtract_node(void)
{
	struct meminfo m;

	meminfo__parse(meminfo_text, &m);
	CHECK_EQ(meminfo__subtract_node(&m, hbm_node), 0, "subtract");
	CHECK_EQ(m.total, (24683656 - 10000000) * KB, "host total");
	CHECK_EQ(m.free, (23639292 - 9000000) * KB, "host free");
	/* free + file pages + reclaimable kernel memory: 9,450,000 kB */
	CHECK_EQ(m.available, (24283520 - 9450000) * KB, "host available");
	/* The LRU's file pages, not FilePages, as the kernel's formula counts. */
	CHECK_EQ(m.file, (800000 - 300000) * KB, "host file");
	CHECK_EQ(m.kreclaim, (80000 - 50000) * KB, "host kreclaim");
}

static void test_subtract_clamps(void)
{
	struct meminfo m = { .total = 100 * KB, .free = 10 * KB, .available = 20 * KB };

	/* Figures read at different moments may overlap: never wrap. */
	CHECK_EQ(meminfo__subtract_node(&m, hbm_node), 0, "subtract");
	CHECK_EQ(m.total, 0, "total");
	CHECK_EQ(m.free, 0, "free");
	CHECK_EQ(m.available, 0, "available");
}

static void test_subtract_bad(void)
{
	struct meminfo m = { .total = 1, .free = 1, .available = 1 };

	CHECK(meminfo__subtract_node(&m, "") < 0, "empty", "accepted");
	CHECK(meminfo__subtract_node(&m, "Node 1 MemTotal: 5 kB\n") < 0, "no free",
	      "accepted");
	CHECK(meminfo__subtract_node(&m, meminfo_text) < 0, "global file", "accepted");
	CHECK(m.total == 1 && m.free == 1 && m.available == 1, "untouched",
	      "a refused node changed the figures");
}

static const char zoneinfo_text[] =
	"Node 0, zone   Normal\n"
	"  pages free     1606698\n"
	"        min      14327\n"
	"        low      17908\n"
	"        high     21489\n"
	"        protection: (0, 0, 0, 0, 0)\n"
	"  pagesets\n"
	"    cpu: 0\n"
	"              count: 10\n"
	"              high:  100\n"
	"    cpu: 1\n"
	"              count: 20\n"
	"              high:  200\n"
	"Node 1, zone  Movable\n"
	"        low      500\n"
	"  pagesets\n"
	"    cpu: 0\n"
	"              count: 1000\n"
	"              high:  5000\n"
	"Node 2, zone   Normal\n"
	"  pagesets\n"
	"    cpu: 0\n"
	"              count: 10\n"
	"              high:  100000\n"
	"              batch: 63\n"
	"              high_min: 1000\n"
	"              high_max: 337140\n"
	"    cpu: 1\n"
	"              count: 5000\n"
	"              high:  1000\n"
	"              batch: 63\n";

static void test_pcp_skips_device_nodes(void)
{
	struct numa_nodes nodes;
	struct pcp_info p;

	CHECK_EQ(meminfo__parse_pcp(zoneinfo_text, 4096, NULL, &p), 0, "all");
	CHECK_EQ(p.count, 6040 * 4096ULL, "all count");
	CHECK_EQ(p.high, 106300 * 4096ULL, "all high");
	/*
	 * Without a batch, high - count; with one, at most batch << 6; a
	 * list over its (just lowered) high mark takes nothing.
	 */
	CHECK_EQ(p.refill, (90 + 180 + 4000 + (63 << PCP_REFILL_SHIFT)) * 4096ULL, "refill");
	CHECK_EQ(p.low, (17908 + 500) * 4096ULL, "low watermarks");
	memset(&nodes, 0, sizeof(nodes));
	nodes.device[0] = 1ULL << 1;
	nodes.n_device = 1;
	CHECK_EQ(meminfo__parse_pcp(zoneinfo_text, 4096, &nodes, &p), 0, "host");
	CHECK_EQ(p.count, 5040 * 4096ULL, "host count");
	CHECK_EQ(p.high, 101300 * 4096ULL, "host high");
	CHECK_EQ(p.refill, (270 + (63 << PCP_REFILL_SHIFT)) * 4096ULL, "host refill");
	CHECK_EQ(p.low, 17908 * 4096ULL, "host low watermarks");
}

int main(void)
{
	RUN_SUBTEST(test_parse);
	RUN_SUBTEST(test_subtract_node);
	RUN_SUBTEST(test_subtract_clamps);
	RUN_SUBTEST(test_subtract_bad);
	RUN_SUBTEST(test_pcp_skips_device_nodes);
	return CHECK_EXIT();
}
