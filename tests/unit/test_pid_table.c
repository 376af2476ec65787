// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * lib/pid_table: rows found by pid, zeroed when new, kept across growth,
 * found again after removals and reordering.
 */
#include <stdbool.h>
#include <stdlib.h>
#include "check.h"
#include "lib/pid_table.h"

struct row {
	uint32_t pid;
	uint64_t count;
};

static void test_get_adds_once(void)
{
	struct pid_table t;
	struct row *a, *b;
	uint32_t pid;

	pid_table__init(&t, sizeof(struct row));
	a = pid_table__get(&t, 42);
	if (!CHECK(a, "get", "out of memory"))
		return;
	CHECK(a->pid == 42 && !a->count, "new row", "pid %u count %llu", a->pid,
	      (unsigned long long)a->count);
	a->count = 7;
	/* Enough rows to grow the table several times over. */
	for (pid = 1000; pid < 3000; pid++) {
		b = pid_table__get(&t, pid);
		if (!CHECK(b && b->pid == pid && !b->count, "grow", "pid %u", pid))
			break;
		b->count = pid;
	}
	CHECK_EQ(t.n, 2001, "rows");
	a = pid_table__get(&t, 42);
	CHECK(a && a->count == 7, "found again", "count %llu", a ? (unsigned long long)a->count : 0);
	b = pid_table__get(&t, 2999);
	CHECK(b && b->count == 2999, "last", "count %llu", b ? (unsigned long long)b->count : 0);
	CHECK_EQ(t.n, 2001, "no row added by a lookup");
	CHECK(((struct row *)pid_table__row(&t, 0))->pid == 42, "row 0", "order kept");
	pid_table__free(&t);
	CHECK(!t.rows && !t.n, "freed", "not emptied");
}

static int by_pid_desc(const void *a, const void *b)
{
	const struct row *x = a, *y = b;

	return x->pid < y->pid ? 1 : x->pid > y->pid ? -1 : 0;
}

/* Every row present is found with its count, and no other pid is. */
static bool matches(const struct pid_table *t, const bool *present, uint32_t npids)
{
	const struct row *r;
	uint32_t pid;
	size_t n = 0;

	for (pid = 0; pid < npids; pid++) {
		r = pid_table__find(t, pid * 4096);
		if (!present[pid] != !r || (r && r->count != pid + 1))
			return false;
		n += present[pid];
	}
	return n == t->n;
}

/* Removals in a pseudo-random order, against a plain array of truth. */
static void test_remove_and_sort(void)
{
	enum { NPIDS = 5000 };
	static bool present[NPIDS];
	struct pid_table t;
	struct row *r;
	uint32_t i, pid, x = 1;

	pid_table__init(&t, sizeof(struct row));
	/* Pids a page apart: all would share one home without the hash. */
	for (pid = 0; pid < NPIDS; pid++) {
		r = pid_table__get(&t, pid * 4096);
		if (!CHECK(r, "get", "out of memory"))
			goto out;
		r->count = pid + 1;
		present[pid] = true;
	}
	for (i = 0; i < 3 * NPIDS; i++) {
		x = x * 1103515245 + 12345;
		pid = (x >> 8) % NPIDS;
		pid_table__remove(&t, pid * 4096);
		present[pid] = false;
	}
	CHECK(t.n < NPIDS && t.n > 0, "removed some", "%zu rows", t.n);
	CHECK(matches(&t, present, NPIDS), "after removals", "a row lost or kept");
	pid_table__remove(&t, 7);	/* never added: nothing happens */
	pid_table__sort(&t, by_pid_desc);
	r = pid_table__row(&t, 0);
	CHECK(t.n < 2 || r->pid > ((struct row *)pid_table__row(&t, 1))->pid, "sorted",
	      "row 0 pid %u", r->pid);
	CHECK(matches(&t, present, NPIDS), "after sort", "a row lost");
	r = pid_table__get(&t, 1);
	CHECK(r && r->pid == 1 && t.n == (size_t)(r - (struct row *)t.rows) + 1, "added after sort",
	      "not last");
out:
	pid_table__free(&t);
}

static void test_sorted_copy(void)
{
	struct pid_table t;
	struct row *v;

	pid_table__init(&t, sizeof(struct row));
	v = pid_table__sorted_copy(&t, by_pid_desc);
	CHECK(v, "empty copy", "NULL");
	free(v);
	pid_table__get(&t, 3);
	pid_table__get(&t, 9);
	pid_table__get(&t, 5);
	v = pid_table__sorted_copy(&t, by_pid_desc);
	if (CHECK(v, "copy", "out of memory"))
		CHECK(v[0].pid == 9 && v[1].pid == 5 && v[2].pid == 3, "copy sorted",
		      "%u %u %u", v[0].pid, v[1].pid, v[2].pid);
	CHECK(((struct row *)pid_table__row(&t, 0))->pid == 3, "table order", "changed");
	free(v);
	pid_table__free(&t);
}

int main(void)
{
	RUN_SUBTEST(test_get_adds_once);
	RUN_SUBTEST(test_remove_and_sort);
	RUN_SUBTEST(test_sorted_copy);
	return check_subtests_failed ? 1 : 0;
}
