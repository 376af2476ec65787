// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "check.h"
#include "stacks/stackset.h"

static const uint64_t one_call[STACK_VAL__COUNT] = { 1, 4096, 1 << 20 };

static int count_cb(const struct stack *st, void *ctx)
{
	(void)st;
	(*(size_t *)ctx)++;
	return 0;
}

static void test_sums_duplicates(void)
{
	const char *a[] = { "main", "train_step", "cuMemAlloc_v2" };
	const char *b[] = { "main", "load", "cuMemAlloc_v2" };
	const uint64_t v[STACK_VAL__COUNT] = { 2, 100, 200 };
	struct stackset *s = stackset__new(0);
	const struct stack **sorted = NULL;
	size_t n = 0;

	if (!CHECK(s, "new", "errno %d", errno))
		return;
	CHECK_EQ(stackset__add(s, 42, "python3", a, 3, one_call), 0, "add a");
	CHECK_EQ(stackset__add(s, 42, "python3", a, 3, v), 0, "add a again");
	CHECK_EQ(stackset__add(s, 42, "python3", b, 3, one_call), 0, "add b");
	CHECK_EQ(stackset__add(s, 43, "python3", a, 3, one_call), 0, "a, other pid");
	CHECK_EQ(stackset__add(s, 42, "other", a, 3, one_call), 0, "a, other comm");
	CHECK_EQ(stackset__count(s), 4, "count");
	CHECK_EQ(stackset__total(s, STACK_VAL__CALLS), 6, "total calls");
	CHECK_EQ(stackset__total(s, STACK_VAL__HOST_BYTES), 4 * 4096 + 100, "total host");
	CHECK_EQ(stackset__refused(s), 0, "refused");
	stackset__for_each(s, count_cb, &n);
	CHECK_EQ(n, 4, "for_each");

	sorted = stackset__sorted(s);
	if (!CHECK(sorted, "sorted", "errno %d", errno))
		goto out;
	/* "other (42)" < "python3 (42)" < "python3 (43)"; "load" < "train_step" */
	CHECK(!strcmp(sorted[0]->frames[0], "other (42)"), "root 0", "%s", sorted[0]->frames[0]);
	CHECK(!strcmp(sorted[1]->frames[0], "python3 (42)") &&
	      !strcmp(sorted[1]->frames[2], "load"), "root 1", "%s %s",
	      sorted[1]->frames[0], sorted[1]->frames[2]);
	CHECK(!strcmp(sorted[2]->frames[2], "train_step"), "frame 2", "%s", sorted[2]->frames[2]);
	CHECK_EQ(sorted[2]->values[STACK_VAL__CALLS], 3, "summed calls");
	CHECK_EQ(sorted[2]->values[STACK_VAL__HOST_BYTES], 4096 + 100, "summed host");
	CHECK_EQ(sorted[2]->values[STACK_VAL__GPU_BYTES], (1 << 20) + 200, "summed gpu");
	CHECK_EQ(sorted[2]->n_frames, 4, "process frame added");
	CHECK(!strcmp(sorted[2]->frames[3], "cuMemAlloc_v2"), "leaf", "%s", sorted[2]->frames[3]);
	CHECK(!strcmp(sorted[2]->comm, "python3") && sorted[2]->pid == 42, "comm", "%s %u",
	      sorted[2]->comm, sorted[2]->pid);
	CHECK(!strcmp(stackset__name(s, sorted[2]->comm_id), "python3"), "comm id", "%u",
	      sorted[2]->comm_id);
	CHECK(!strcmp(stackset__name(s, sorted[2]->frame_ids[1]), "main"), "ids", "%u",
	      sorted[2]->frame_ids[1]);
	CHECK(sorted[4] == NULL, "terminated", "%p", (const void *)sorted[4]);
	/* Interned: "main" is one string for all stacks. */
	CHECK(sorted[1]->frames[1] == sorted[2]->frames[1], "interned", "%p %p",
	      (const void *)sorted[1]->frames[1], (const void *)sorted[2]->frames[1]);
out:
	free(sorted);
	stackset__free(s);
}

static void test_cap_counts_refusals(void)
{
	const char *f[3][2] = { { "a", "cuMemAlloc_v2" }, { "b", "cuMemAlloc_v2" },
				{ "c", "cuMemAlloc_v2" } };
	struct stackset *s = stackset__new(2);

	if (!CHECK(s, "new", "errno %d", errno))
		return;
	CHECK_EQ(stackset__add(s, 1, "x", f[0], 2, one_call), 0, "first");
	CHECK_EQ(stackset__add(s, 1, "x", f[1], 2, one_call), 0, "second");
	CHECK_EQ(stackset__add(s, 1, "x", f[2], 2, one_call), -ENOSPC, "third refused");
	CHECK_EQ(stackset__add(s, 2, "x", f[0], 2, one_call), -ENOSPC, "other pid refused");
	CHECK_EQ(stackset__add(s, 1, "x", f[0], 2, one_call), 0, "known still counted");
	CHECK_EQ(stackset__refused(s), 2, "refused");
	CHECK_EQ(stackset__count(s), 2, "count");
	CHECK_EQ(stackset__total(s, STACK_VAL__CALLS), 3, "calls");
	/* Refused stacks leave no names behind: "c" was never interned. */
	CHECK_EQ(stackset__n_names(s), 5, "names");	/* x, x (1), a, b, cuMemAlloc_v2 */
	stackset__free(s);
}

static void test_bad_input(void)
{
	const char *f[] = { "a", NULL };
	const char **deep = calloc(STACKSET_MAX_DEPTH + 1, sizeof(*deep));
	struct stackset *s = stackset__new(0);
	size_t i;

	if (!CHECK(s && deep, "new", "errno %d", errno))
		goto out;
	for (i = 0; i <= STACKSET_MAX_DEPTH; i++)
		deep[i] = "f";
	CHECK_EQ(stackset__add(s, 1, "x", f, 0, one_call), -EINVAL, "no frames");
	CHECK_EQ(stackset__add(s, 1, "x", f, 2, one_call), -EINVAL, "NULL frame");
	CHECK_EQ(stackset__add(s, 1, NULL, f, 1, one_call), -EINVAL, "NULL comm");
	CHECK_EQ(stackset__add(s, 1, "x", deep, STACKSET_MAX_DEPTH + 1, one_call), -E2BIG, "deep");
	CHECK_EQ(stackset__add(s, 1, "x", deep, STACKSET_MAX_DEPTH, one_call), 0, "max depth");
	CHECK_EQ(stackset__count(s), 1, "count");
out:
	free(deep);
	stackset__free(s);
}

static void test_text_clean(void)
{
	char b[64];

	text__clean(b, sizeof(b), "plain name");
	CHECK(!strcmp(b, "plain name"), "plain", "%s", b);
	text__clean(b, sizeof(b), "a\nb\tc\x7f");
	CHECK(!strcmp(b, "a b c "), "controls", "%s", b);
	/* C1 (xterm's CSI) and a bidi override: one space each, the rest kept. */
	CHECK_EQ(text__clean(b, sizeof(b), "a\xc2\x9b" "b\xe2\x80\xae" "c\xe2"), 8, "length");
	CHECK(!strcmp(b, "a b c\xef\xbf\xbd"), "C1 and bidi", "%s", b);
	text__clean(b, sizeof(b), "caf\xc3\xa9 \xe2\x82\xac");
	CHECK(!strcmp(b, "caf\xc3\xa9 \xe2\x82\xac"), "utf8 kept", "%s", b);
	text__clean(b, sizeof(b), "x\xff" "y\xc3");
	CHECK(!strcmp(b, "x\xef\xbf\xbdy\xef\xbf\xbd"), "invalid", "%s", b);
	text__clean(b, sizeof(b), "\xed\xa0\x80\xef\xbf\xbe");	/* surrogate, U+FFFE */
	CHECK(!strncmp(b, "\xef\xbf\xbd", 3) && !strstr(b, "\xef\xbf\xbe"), "xml-illegal", "%s", b);
	text__clean(b, 5, "\xe2\x82\xac\xe2\x82\xac");
	CHECK(!strcmp(b, "\xe2\x82\xac"), "cut at a boundary", "%s", b);
}

static void test_names_stored_clean(void)
{
	const char *f[] = { "bad\nname", "cuMemAlloc_v2" };
	struct stackset *s = stackset__new(0);
	const struct stack **v;

	if (!CHECK(s, "new", "errno %d", errno))
		return;
	CHECK_EQ(stackset__add(s, 7, "we\tird", f, 2, one_call), 0, "add");
	v = stackset__sorted(s);
	if (CHECK(v && v[0], "sorted", "errno %d", errno)) {
		CHECK(!strcmp(v[0]->frames[1], "bad name"), "frame", "%s", v[0]->frames[1]);
		CHECK(!strcmp(v[0]->frames[0], "we ird (7)"), "process", "%s", v[0]->frames[0]);
	}
	free(v);
	stackset__free(s);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A million samples over 2000 stacks: what a long recording feeds in. */
static void test_million_samples(void)
{
	static char names[64][32];
	const char *f[8];
	struct stackset *s = stackset__new(0);
	double t0, dt;
	uint64_t i;
	size_t j;

	if (!CHECK(s, "new", "errno %d", errno))
		return;
	for (j = 0; j < 64; j++)
		snprintf(names[j], sizeof(names[j]), "func_%zu (libapp.so)", j);
	t0 = now_s();
	for (i = 0; i < 1000000; i++) {
		uint64_t k = i % 2000;

		/* k's base-8 digits pick the outer frames: 2000 distinct stacks. */
		for (j = 0; j < 4; j++)
			f[j] = names[j * 8 + (k >> (3 * j)) % 8];
		for (j = 4; j < 7; j++)
			f[j] = names[32 + j];
		f[7] = "cuMemAlloc_v2";
		if (stackset__add(s, (uint32_t)(1000 + k % 3), "job", f, 8, one_call))
			break;
	}
	dt = now_s() - t0;
	CHECK_EQ(i, 1000000, "all added");
	CHECK_EQ(stackset__total(s, STACK_VAL__CALLS), 1000000, "calls");
	CHECK_EQ(stackset__count(s), 2000, "unique");
	CHECK(dt < 10, "fast", "%.2f s", dt);	/* about 1 s here, 2.3 s under ASan */
	printf("  1,000,000 samples, %zu stacks: %.2f s\n", stackset__count(s), dt);
	stackset__free(s);
}

static void test_metric_names(void)
{
	enum stack_metric m = STACK_VAL__CALLS;

	CHECK(!stack_metric__parse("host_bytes", &m) && m == STACK_VAL__HOST_BYTES, "host_bytes",
	      "%d", m);
	CHECK(!stack_metric__parse("gpu", &m) && m == STACK_VAL__GPU_BYTES, "gpu", "%d", m);
	CHECK(!stack_metric__parse("calls", &m) && m == STACK_VAL__CALLS, "calls", "%d", m);
	CHECK_EQ(stack_metric__parse("bogus", &m), -EINVAL, "bogus");
	CHECK(stack_metric__is_bytes(STACK_VAL__HOST_BYTES) &&
	      !stack_metric__is_bytes(STACK_VAL__CALLS), "is_bytes", "%d", 0);
}

int main(void)
{
	RUN_SUBTEST(test_sums_duplicates);
	RUN_SUBTEST(test_cap_counts_refusals);
	RUN_SUBTEST(test_bad_input);
	RUN_SUBTEST(test_text_clean);
	RUN_SUBTEST(test_names_stored_clean);
	RUN_SUBTEST(test_million_samples);
	RUN_SUBTEST(test_metric_names);
	return CHECK_EXIT();
}
