// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Reserved between the hook's samples, from the driver calls that make the
 * allocator's segments (user/model/torch_seg.h): moved at once while the
 * calls agree with the hook, left alone when they do not.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "export/torch_out.h"
#include "model/cuda_api.h"
#include "model/torch.h"

#define MIB (1ULL << 20)
#define MS 1000000ULL
#define T0 (1000 * 1000 * MS)

static uint64_t hook_calls;

static void call(struct torch_model *m, uint32_t pid, enum umt_api api, uint64_t size,
		 uint64_t handle, uint64_t ms)
{
	const struct cuda_api *a = cuda_api__get(api);
	struct umt_call_rec r;

	memset(&r, 0, sizeof(r));
	r.type = UMT_REC_CALL;
	r.api = api;
	r.ts_ns = T0 + ms * MS;
	r.duration_ns = 1000;
	r.pid = pid;
	r.size = size;
	r.handle = handle;
	r.end = UMT_END_RETURNED;
	r.is_free = a->is_free;
	torch_model__call(m, &r, 0);
}

/* A hook sample of pid's device at T0 + ms: hook calls made since. */
static void sample(struct torch_model *m, uint32_t pid, uint32_t dev, uint64_t ms,
		   uint64_t allocated, uint64_t reserved)
{
	struct torch_sample s;

	memset(&s, 0, sizeof(s));
	s.ts_ns = T0 + ms * MS;
	s.pid = pid;
	s.device = dev;
	s.flags = TORCH_S_TOTALS | TORCH_S_WINDOWED;
	s.allocated = s.alloc_low = s.alloc_high = s.peak_allocated = allocated;
	s.reserved = s.peak_reserved = reserved;
	hook_calls += 2;
	s.allocs = hook_calls;
	s.frees = hook_calls - 1;
	strcpy(s.comm, "job");
	CHECK(!torch_model__add(m, &s), "add", "");
}

static void verdict(const struct torch_model *m, uint32_t pid, uint32_t dev,
		    struct torch_verdict *v)
{
	size_t i;

	memset(v, 0, sizeof(*v));
	for (i = 0; i < m->n; i++)
		if (m->devs[i].pid == pid && m->devs[i].device == dev)
			torch_model__judge(m, &m->devs[i], v);
}

/* pid's device's reserved now, and whether its segments' calls moved it. */
static void expect(const struct torch_model *m, uint32_t pid, uint32_t dev, uint64_t reserved,
		   bool from_calls, const char *what)
{
	struct torch_verdict v;

	verdict(m, pid, dev, &v);
	CHECK(v.reserved == reserved && v.reserved_from_calls == from_calls, "seg",
	      "%s: reserved %llu KiB, from calls %d", what,
	      (unsigned long long)(v.reserved >> 10), v.reserved_from_calls);
}

/* Two weights' segments, a sample, one more segment and a sample: confirmed. */
static void confirmed(struct torch_model *m, uint32_t pid)
{
	call(m, pid, UMT_API_MEM_ALLOC_V2, 20 * MIB, 0x1000, 0);
	call(m, pid, UMT_API_MEM_ALLOC_V2, 20 * MIB, 0x2000, 1);
	sample(m, pid, 0, 2, 40 * MIB, 40 * MIB);
	call(m, pid, UMT_API_MEM_ALLOC_V2, 2 * MIB, 0x3000, 10);
	sample(m, pid, 0, 11, 41 * MIB, 42 * MIB);
}

/* The highest reserved of the slot at T0 + ms, of the model's first device. */
static uint64_t slot_max(const struct torch_model *m, uint64_t ms)
{
	uint64_t n = (T0 + ms * MS) / (m->rules.window_ns / TORCH_SLOTS) + 1;
	const struct torch_slot *sl = &m->devs[0].slots[n % TORCH_SLOTS];

	return sl->n == n ? sl->reserved_max : 0;
}

static void test_moves_between_samples(void)
{
	struct torch_model m;
	struct torch_verdict v;
	struct torch_sample again;

	torch_model__init(&m, NULL);
	confirmed(&m, 7);
	verdict(&m, 7, 0, &v);
	CHECK_EQ(v.reserved, 42 * MIB, "the hook's, calls agreeing");
	CHECK(!v.reserved_from_calls, "seg", "no call since the sample");
	/* A 64 MiB segment made and given back with no sample between. */
	call(&m, 7, UMT_API_MEM_ALLOC_V2, 64 * MIB, 0x4000, 300);
	verdict(&m, 7, 0, &v);
	CHECK_EQ(v.reserved, 106 * MIB, "moved by the segment");
	CHECK(v.reserved_from_calls, "seg", "said so");
	CHECK_EQ(v.cached, 65 * MIB, "cached with it");
	CHECK_EQ(v.allocated, 41 * MIB, "allocated: the last sample's");
	call(&m, 7, UMT_API_MEM_FREE_V2, 0, 0x4000, 400);
	verdict(&m, 7, 0, &v);
	CHECK_EQ(v.reserved, 42 * MIB, "given back");
	CHECK(!v.reserved_from_calls, "seg", "the hook's figure again");
	CHECK_EQ(v.peak_reserved, 106 * MIB, "the peak keeps it");
	CHECK_EQ(slot_max(&m, 300), 106 * MIB, "in its slot's highest");
	/* empty_cache: a segment back with no hook call after it. */
	call(&m, 7, UMT_API_MEM_FREE_V2, 0, 0x3000, 500);
	verdict(&m, 7, 0, &v);
	CHECK_EQ(v.reserved, 40 * MIB, "after empty_cache");
	/* Not a segment of its: no move. */
	call(&m, 7, UMT_API_MEM_FREE_V2, 0, 0x9999, 510);
	call(&m, 7, UMT_API_MEM_ALLOC_V2, 3 * MIB, 0x5000, 520);
	verdict(&m, 7, 0, &v);
	CHECK_EQ(v.reserved, 40 * MIB, "odd sizes and unknown handles");
	/* The sample sent at its exit: the last hook call's figures, timed then. */
	again = m.devs[0].last;
	again.ts_ns = T0 + 900 * MS;
	CHECK(!torch_model__add(&m, &again), "add", "");
	expect(&m, 7, 0, 40 * MIB, true, "a repeated figure changes nothing");
	torch_model__free(&m);
}

/* The hook's reserved moves as the calls do: agree; else not used until they do. */
static void test_agreement(void)
{
	struct torch_model m;
	struct torch_verdict v;

	torch_model__init(&m, NULL);
	/* Anchored, not confirmed: neither moved yet. */
	call(&m, 8, UMT_API_MEM_ALLOC_V2, 20 * MIB, 0x1000, 0);
	sample(&m, 8, 0, 1, 10 * MIB, 20 * MIB);
	sample(&m, 8, 0, 100, 12 * MIB, 20 * MIB);
	call(&m, 8, UMT_API_MEM_ALLOC_V2, 20 * MIB, 0x2000, 200);
	expect(&m, 8, 0, 20 * MIB, false, "unconfirmed: the hook's");
	/* A figure read from the table: its clock older than its last calls'. */
	sample(&m, 8, 0, 150, 30 * MIB, 40 * MIB);
	call(&m, 8, UMT_API_MEM_ALLOC_V2, 2 * MIB, 0x3000, 300);
	expect(&m, 8, 0, 42 * MIB, true, "confirmed: moved");
	/* NCCL's buffer: a segment-like call the allocator does not count. */
	call(&m, 8, UMT_API_MEM_ALLOC_V2, 32 * MIB, 0x4000, 400);
	sample(&m, 8, 0, 410, 30 * MIB, 42 * MIB);
	expect(&m, 8, 0, 42 * MIB, false, "disagreement: the hook's");
	call(&m, 8, UMT_API_MEM_ALLOC_V2, 2 * MIB, 0x5000, 500);
	verdict(&m, 8, 0, &v);
	CHECK_EQ(v.reserved, 42 * MIB, "not moved while they disagree");
	/* Both move alike again: confirmed, the buffer in the offset. */
	sample(&m, 8, 0, 510, 30 * MIB, 44 * MIB);
	call(&m, 8, UMT_API_MEM_ALLOC_V2, 20 * MIB, 0x6000, 600);
	expect(&m, 8, 0, 64 * MIB, true, "agreed again: moved");
	torch_model__free(&m);
}

static void test_several_devices(void)
{
	struct torch_model m;
	struct torch_verdict v;

	torch_model__init(&m, NULL);
	confirmed(&m, 9);
	sample(&m, 9, 1, 20, 10 * MIB, 20 * MIB);
	call(&m, 9, UMT_API_MEM_ALLOC_V2, 64 * MIB, 0x4000, 300);
	expect(&m, 9, 0, 42 * MIB, false, "device 0 not moved");
	verdict(&m, 9, 0, &v);
	CHECK_EQ(v.peak_reserved, 42 * MIB, "nor its peak");
	expect(&m, 9, 1, 20 * MIB, false, "device 1 not moved");
	torch_model__free(&m);
}

/* Expandable segments: pages made with cuMemCreate, given back with cuMemRelease. */
static void test_expandable(void)
{
	struct torch_model m;
	struct torch_verdict v;

	torch_model__init(&m, NULL);
	call(&m, 10, UMT_API_MEM_CREATE, 20 * MIB, 0x11, 0);
	call(&m, 10, UMT_API_MEM_MAP, 20 * MIB, 0x7000, 0);
	sample(&m, 10, 0, 1, 15 * MIB, 20 * MIB);
	call(&m, 10, UMT_API_MEM_CREATE, 2 * MIB, 0x12, 10);
	sample(&m, 10, 0, 11, 16 * MIB, 22 * MIB);
	call(&m, 10, UMT_API_MEM_CREATE, 20 * MIB, 0x13, 100);
	call(&m, 10, UMT_API_MEM_MAP, 20 * MIB, 0x8000, 100);
	call(&m, 10, UMT_API_MEM_CREATE, 4 * MIB, 0x14, 110);	/* not a page */
	expect(&m, 10, 0, 42 * MIB, true, "a page made: moved");
	call(&m, 10, UMT_API_MEM_UNMAP, 0, 0x8000, 200);
	call(&m, 10, UMT_API_MEM_RELEASE, 0, 0x13, 200);
	call(&m, 10, UMT_API_MEM_RELEASE, 0, 0x12, 210);
	verdict(&m, 10, 0, &v);
	CHECK_EQ(v.reserved, 20 * MIB, "pages released");
	CHECK_EQ(v.peak_reserved, 42 * MIB, "the peak");
	CHECK(v.expandable == TORCH_ES_ON, "seg", "expandable");
	torch_model__free(&m);
}

/* A process's end keeps its figure and forgets its segments. */
static void test_exit_forgets(void)
{
	struct torch_model m;

	torch_model__init(&m, NULL);
	confirmed(&m, 11);
	call(&m, 11, UMT_API_MEM_FREE_V2, 0, 0x3000, 100);
	CHECK_EQ(m.segs.count, 2, "two segments held");
	torch_model__exit(&m, 11);
	CHECK_EQ(m.segs.count, 0, "forgotten at its exit");
	expect(&m, 11, 0, 40 * MIB, true, "its last figure kept");
	/* The pid again: another process, whose frees of those handles count nothing. */
	call(&m, 11, UMT_API_MEM_FREE_V2, 0, 0x1000, 2000);
	sample(&m, 11, 0, 2001, 5 * MIB, 20 * MIB);
	call(&m, 11, UMT_API_MEM_ALLOC_V2, 2 * MIB, 0x1000, 2010);
	sample(&m, 11, 0, 2011, 6 * MIB, 22 * MIB);
	call(&m, 11, UMT_API_MEM_FREE_V2, 0, 0x1000, 2100);
	expect(&m, 11, 0, 20 * MIB, true, "the new process's own");
	torch_model__exit(&m, 11);
	CHECK_EQ(m.segs.count, 0, "none left");
	torch_model__free(&m);
}

/*
 * A figure read from the table a tick after its window closed, the job's
 * segments moving since past the log: not checked, the state stays.
 */
static void test_older_than_log(void)
{
	struct torch_model m;
	uint64_t i;

	torch_model__init(&m, NULL);
	confirmed(&m, 12);
	for (i = 0; i < TORCH_SEG_LOG; i++) {
		call(&m, 12, UMT_API_MEM_ALLOC_V2, 2 * MIB, 0x10000 + i, 100 + 2 * i);
		call(&m, 12, UMT_API_MEM_FREE_V2, 0, 0x10000 + i, 101 + 2 * i);
	}
	sample(&m, 12, 0, 50, 41 * MIB, 44 * MIB);
	call(&m, 12, UMT_API_MEM_ALLOC_V2, 2 * MIB, 0x20000, 400);
	expect(&m, 12, 0, 44 * MIB, true, "still confirmed, moved");
	torch_model__free(&m);
}

/* report's text and JSON say where reserved comes from, the text briefly. */
static void test_said(void)
{
	struct torch_model m;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	torch_model__init(&m, NULL);
	confirmed(&m, 13);
	call(&m, 13, UMT_API_MEM_ALLOC_V2, 64 * MIB, 0x4000, 300);
	f = open_memstream(&buf, &len);
	if (!CHECK(f, "said", "open_memstream"))
		return;
	export_torch_text(&m, NULL, f);
	export_torch_json(&m, NULL, f);
	fclose(f);
	CHECK(strstr(buf, "reserved 106M (from segment calls), cached 65M"), "said",
	      "text: %s", buf);
	CHECK(strstr(buf, "\"reserved\":111149056,") &&
	      strstr(buf, "\"reserved_from_calls\":true,"), "said", "JSON: %s", buf);
	CHECK(strstr(buf, "\"peak_reserved\":111149056,"), "said", "JSON's peak: %s", buf);
	free(buf);
	torch_model__free(&m);
}

int main(void)
{
	RUN_SUBTEST(test_moves_between_samples);
	RUN_SUBTEST(test_agreement);
	RUN_SUBTEST(test_several_devices);
	RUN_SUBTEST(test_expandable);
	RUN_SUBTEST(test_exit_forgets);
	RUN_SUBTEST(test_older_than_log);
	RUN_SUBTEST(test_said);
	return CHECK_EXIT();
}
