// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "model/alloc_table.h"
#include "check.h"

static struct alloc_entry entry(uint32_t pid, uint32_t space, uint64_t handle,
				uint64_t size, uint64_t host)
{
	struct alloc_entry e = {
		.key = { pid, space, handle }, .size = size, .host_bytes = host,
	};
	return e;
}

static void test_insert_remove(void)
{
	struct alloc_table t = {};
	struct alloc_entry e1 = entry(1, 0, 0x1000, 100, 4096), out, old;
	struct alloc_entry e2 = entry(1, 1, 0x1000, 200, 8192);	/* same handle, other space */

	CHECK_EQ(alloc_table__insert(&t, &e1, &old), 0, "insert e1");
	CHECK_EQ(alloc_table__insert(&t, &e2, &old), 0, "insert e2");
	CHECK_EQ(t.count, 2, "count");
	CHECK_EQ(t.size_bytes, 300, "size");
	CHECK_EQ(t.host_bytes, 12288, "host");
	CHECK(alloc_table__remove(&t, &e1.key, &out), "remove e1", "not found");
	CHECK_EQ(out.size, 100, "removed entry");
	CHECK(!alloc_table__remove(&t, &e1.key, &out), "remove twice", "found again");
	CHECK_EQ(t.count, 1, "count after");
	CHECK_EQ(t.host_bytes, 8192, "host after");
	alloc_table__free(&t);
	CHECK_EQ(t.count, 0, "freed");
}

static void test_replace(void)
{
	struct alloc_table t = {};
	struct alloc_entry a = entry(7, 0, 0xdead, 10, 4096), b = entry(7, 0, 0xdead, 20, 0), old;

	alloc_table__insert(&t, &a, &old);
	CHECK_EQ(alloc_table__insert(&t, &b, &old), 1, "replace");
	CHECK_EQ(old.size, 10, "old entry returned");
	CHECK_EQ(t.count, 1, "count");
	CHECK_EQ(t.size_bytes, 20, "size");
	CHECK_EQ(t.host_bytes, 0, "host");
	alloc_table__free(&t);
}

static void sum_sizes(const struct alloc_entry *e, void *ctx)
{
	*(uint64_t *)ctx += e->size;
}

static void test_many(void)
{
	struct alloc_table t = {};
	struct alloc_entry e, old;
	uint64_t i, sum = 0;

	for (i = 0; i < 100000; i++) {
		e = entry(i % 13, 0, i * 4096, i, 0);
		alloc_table__insert(&t, &e, &old);
	}
	for (i = 0; i < 100000; i += 2) {
		e = entry(i % 13, 0, i * 4096, i, 0);
		alloc_table__remove(&t, &e.key, NULL);
	}
	CHECK_EQ(t.count, 50000, "count");
	alloc_table__for_each(&t, sum_sizes, &sum);
	CHECK_EQ(sum, t.size_bytes, "walk matches totals");
	CHECK_EQ(sum, 2500000000ULL, "odd sizes summed");
	alloc_table__free(&t);
}

static void test_cap(void)
{
	struct alloc_table t = { .max = 3 };
	struct alloc_entry e, old;
	int i;

	for (i = 0; i < 5; i++) {
		e = entry(1, 0, 0x1000 * (i + 1), 10, 0);
		alloc_table__insert(&t, &e, &old);
	}
	CHECK_EQ(t.count, 3, "capped");
	CHECK_EQ(t.refused, 2, "refusals counted");
	e = entry(1, 0, 0x1000, 20, 0);	/* replacing an existing key still works */
	CHECK_EQ(alloc_table__insert(&t, &e, &old), 1, "replace at cap");
	alloc_table__remove(&t, &e.key, NULL);
	e = entry(1, 0, 0x9000, 10, 0);
	CHECK_EQ(alloc_table__insert(&t, &e, &old), 0, "room again");
	alloc_table__free(&t);
}

int main(void)
{
	RUN_SUBTEST(test_cap);
	RUN_SUBTEST(test_insert_remove);
	RUN_SUBTEST(test_replace);
	RUN_SUBTEST(test_many);
	return CHECK_EXIT();
}
