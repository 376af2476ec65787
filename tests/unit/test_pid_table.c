// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* lib/pid_table: rows found by pid, zeroed when new, kept across growth. */
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

int main(void)
{
	RUN_SUBTEST(test_get_adds_once);
	return check_subtests_failed ? 1 : 0;
}
