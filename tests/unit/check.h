/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Unit test helpers in the manner of the kernel's BPF selftests: every
 * CHECK logs "name:FAIL:detail" and returns whether it held; each subtest
 * prints one PASS/FAIL/SKIP line that tests/run.py counts.
 */
#ifndef UMTRACE_CHECK_H
#define UMTRACE_CHECK_H

#include <stdbool.h>
#include <stdio.h>

static int check_failed_in_subtest;
static int check_subtests_failed;

#define CHECK(cond, name, fmt, ...)					\
	({								\
		bool __ok = (cond);					\
		if (!__ok) {						\
			check_failed_in_subtest++;			\
			printf("  %s:FAIL:%s:%d: " fmt "\n", name,	\
			       __FILE__, __LINE__, ##__VA_ARGS__);	\
		}							\
		__ok;							\
	})

/* Each side once: a call with side effects must not run again to be shown. */
#define CHECK_EQ(a, b, name)						\
	({								\
		long long __a = (long long)(a), __b = (long long)(b);	\
		CHECK(__a == __b, name, "%s == %lld, expected %lld", #a, \
		      __a, __b);					\
	})

#define RUN_SUBTEST(fn)							\
	do {								\
		check_failed_in_subtest = 0;				\
		fn();							\
		printf("%s %s\n", check_failed_in_subtest ? "FAIL" : "PASS", #fn); \
		check_subtests_failed += !!check_failed_in_subtest;	\
	} while (0)

#define SKIP_SUBTEST(fn, why) printf("SKIP %s: %s\n", #fn, why)

#define CHECK_EXIT() (check_subtests_failed ? 1 : 0)

/* dir/name; four may be in use at once: a buffer is reused four calls later. */
static inline const char *check_path(const char *dir, const char *name)
{
	static char paths[4][256];
	static unsigned int next;
	char *p = paths[next++ % 4];

	snprintf(p, sizeof(paths[0]), "%s/%s", dir, name);
	return p;
}

#endif /* UMTRACE_CHECK_H */
