// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <string.h>
#include "check.h"
#include "attach/libcuda_scan.h"

struct seen {
	uint32_t tgid[8];
	size_t n;
};

static void note(const struct umt_proc_exec *p, void *ctx)
{
	struct seen *s = ctx;

	if (s->n < 8)
		s->tgid[s->n++] = p->tgid;
}

#define P(t, s, e) { .tgid = (t), .start_ns = (s), .exec_vm = (e) }

static void test_diff_names_new_and_changed(void)
{
	const struct umt_proc_exec last[] = {
		P(1, 10, 100), P(2, 20, 200), P(4, 40, 400), P(5, 50, 500), P(9, 90, 900),
	};
	const struct umt_proc_exec now[] = {
		P(1, 10, 100),		/* as it was */
		P(2, 20, 203),		/* mapped a library */
		P(3, 30, 300),		/* new */
		P(5, 55, 500),		/* pid 5 reused by a new process */
		P(9, 90, 900),		/* as it was; 4 is gone */
		P(12, 120, 1),		/* new, past the end of last */
	};
	struct seen s = {};

	libcuda_scan__diff(last, 5, now, 6, note, &s);
	CHECK_EQ(s.n, 4, "count");
	CHECK(s.tgid[0] == 2 && s.tgid[1] == 3 && s.tgid[2] == 5 && s.tgid[3] == 12, "which",
	      "%u %u %u %u", s.tgid[0], s.tgid[1], s.tgid[2], s.tgid[3]);
}

static void test_diff_first_look_is_everything(void)
{
	const struct umt_proc_exec now[] = { P(1, 1, 1), P(7, 7, 7) };
	struct seen s = {};

	libcuda_scan__diff(NULL, 0, now, 2, note, &s);
	CHECK_EQ(s.n, 2, "all new");
	memset(&s, 0, sizeof(s));
	libcuda_scan__diff(now, 2, now, 2, note, &s);
	CHECK_EQ(s.n, 0, "nothing changed");
	libcuda_scan__diff(now, 2, NULL, 0, note, &s);
	CHECK_EQ(s.n, 0, "all gone");
}

int main(void)
{
	RUN_SUBTEST(test_diff_names_new_and_changed);
	RUN_SUBTEST(test_diff_first_look_is_everything);
	return CHECK_EXIT();
}
