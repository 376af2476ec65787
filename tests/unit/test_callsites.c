// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <stdlib.h>
#include <string.h>
#include "model/callsites.h"
#include "check.h"
#include "export/flame_build.h"
#include "model/cuda_api.h"

static struct umt_call_rec rec(uint32_t pid, uint64_t pages)
{
	struct umt_call_rec r;

	memset(&r, 0, sizeof(r));
	r.type = UMT_REC_CALL;
	r.api = UMT_API_MEM_ALLOC_V2;
	r.pid = pid;
	r.size = pages * 4096;
	r.pages_taken = pages;
	strcpy(r.pcomm, "job");
	return r;
}

static void frames2(struct sym_frame *f, const char *caller, uint64_t addr)
{
	memset(f, 0, 2 * sizeof(*f));
	f[0].func = "cuMemAlloc_v2";
	f[0].module = "libcuda.so.1";
	f[1].func = caller;
	f[1].module = "job";
	f[1].addr = addr;
	f[1].offset = addr & 0xff;
}

/* Same function names at other addresses (ASLR, offsets): one site. */
static void test_aggregate_by_names(void)
{
	struct callsites cs;
	struct sym_frame f[2];
	struct umt_call_rec r = rec(1, 10);
	struct callsite **v;
	uint32_t a, b, c;

	callsites__init(&cs, 100);
	frames2(f, "alloc_weights", 0x401000);
	a = callsites__add(&cs, &r, f, 2, 4096);
	frames2(f, "alloc_weights", 0x7f0000401020);
	r = rec(2, 20);
	b = callsites__add(&cs, &r, f, 2, 4096);
	frames2(f, "alloc_activation", 0x401100);
	r = rec(1, 5);
	c = callsites__add(&cs, &r, f, 2, 4096);
	CHECK(a && a == b && c != a, "ids", "a %u b %u c %u", a, b, c);
	CHECK_EQ(cs.n, 2, "sites");
	CHECK_EQ(callsites__get(&cs, a)->calls, 2, "calls");
	CHECK_EQ(callsites__get(&cs, a)->host_taken, 30 * 4096, "host");
	CHECK_EQ(callsites__get(&cs, a)->n_pids, 2, "pids");
	callsites__release(&cs, a, 10 * 4096, 10 * 4096, false);
	callsites__release(&cs, a, 20 * 4096, 20 * 4096, true);
	CHECK_EQ(callsites__get(&cs, a)->held_host, 0, "released");
	CHECK_EQ(callsites__get(&cs, a)->held_size, 0, "size released");
	CHECK_EQ(callsites__get(&cs, a)->exit_count, 1, "one at exit");
	v = callsites__sorted(&cs);
	CHECK(v && v[0]->id == a && v[1]->id == c, "order", "by host bytes");
	free(v);
	callsites__free(&cs);
}

/* Past the cap, new stacks are charged to one overflow site. */
static void test_bounded(void)
{
	struct callsites cs;
	struct sym_frame f[2];
	struct umt_call_rec r = rec(1, 1);
	static char names[10][32];
	int i;

	callsites__init(&cs, 4);
	for (i = 0; i < 10; i++) {
		snprintf(names[i], sizeof(names[i]), "fn%d", i);
		frames2(f, names[i], 0x1000 + i);
		callsites__add(&cs, &r, f, 2, 4096);
	}
	CHECK_EQ(cs.n, 5, "cap plus the overflow site");
	CHECK_EQ(cs.overflowed, 6, "calls past the cap");
	CHECK_EQ(callsites__get(&cs, 5)->api, CALLSITES_ANY_API, "the overflow site's API");
	callsites__free(&cs);
}

/*
 * A process gone before its stacks could be named leaves frames with no
 * name and no file: calls of different APIs there stay apart, each under
 * its own API.
 */
static void test_unnamed_frames_keep_apis_apart(void)
{
	struct callsites cs;
	struct sym_frame f[2];
	struct umt_call_rec r = rec(1, 512);
	uint32_t dev, host;

	memset(f, 0, sizeof(f));
	f[0].addr = 0x7fad94117b80;
	f[1].addr = 0x55a5788f3512;
	callsites__init(&cs, 100);
	dev = callsites__add(&cs, &r, f, 2, 4096);
	r.api = UMT_API_MEM_ALLOC_HOST_V2;
	host = callsites__add(&cs, &r, f, 2, 4096);
	CHECK(dev && host && dev != host, "two sites", "dev %u host %u", dev, host);
	CHECK_EQ(callsites__get(&cs, dev)->api, UMT_API_MEM_ALLOC_V2, "dev api");
	CHECK_EQ(callsites__get(&cs, host)->api, UMT_API_MEM_ALLOC_HOST_V2, "host api");
	CHECK_EQ(callsites__get(&cs, host)->calls, 1, "host calls");
	callsites__free(&cs);
}

/*
 * A ';' in a function's name (a perf map can say anything) is written ':'
 * in the key, so the flamegraph that splits the key gets the frames there
 * were, not one more. The site's own frames keep the name as it was.
 */
static void test_semicolon_in_a_name(void)
{
	uint64_t v[STACK_VAL__COUNT] = { [STACK_VAL__CALLS] = 1, [STACK_VAL__HOST_BYTES] = 4096 };
	struct stackset *set = stackset__new(0);
	const struct stack **st = NULL;
	struct umt_call_rec r = rec(1, 1);
	struct callsite *c;
	struct callsites cs;
	struct sym_frame f[2];

	callsites__init(&cs, 100);
	frames2(f, "evil;main;injected", 0x401000);
	c = callsites__get(&cs, callsites__add(&cs, &r, f, 2, 4096));
	if (!CHECK(c && set, "site", "none"))
		goto out;
	CHECK(!strcmp(c->key, "cuMemAlloc_v2;evil:main:injected"), "key", "'%s'", c->key);
	CHECK(strstr(c->frames[1], "evil;main;injected+0x0 (job)") == c->frames[1], "frame",
	      "'%s'", c->frames[1]);
	CHECK_EQ(flame__add_site(set, 1, "job", c, v), 0, "flame");
	st = stackset__sorted(set);
	/* The process frame, the caller, the API. */
	if (CHECK(st && st[0], "stacks", "none"))
		CHECK_EQ(st[0]->n_frames, 3, "frames");
out:
	free(st);
	stackset__free(set);
	callsites__free(&cs);
}

int main(void)
{
	RUN_SUBTEST(test_aggregate_by_names);
	RUN_SUBTEST(test_bounded);
	RUN_SUBTEST(test_unnamed_frames_keep_apis_apart);
	RUN_SUBTEST(test_semicolon_in_a_name);
	return CHECK_EXIT();
}
