// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The caching allocator's model (user/model/torch.h) driven with synthetic
 * samples shaped like torch_alloc's modes: a step every 100 ms, allocated
 * swinging from the step's floor to its peak; rules of 1 s warm-up and
 * 2 s windows, so a verdict comes within a few simulated seconds.
 */
#include <errno.h>
#include <string.h>
#include "check.h"
#include "attach/torch.h"
#include "cookie.h"
#include "export/torch_out.h"
#include "lib/procfs.h"
#include "model/cuda_api.h"
#include "model/torch.h"

#define MIB (1ULL << 20)
#define GIB (1ULL << 30)
#define MS 1000000ULL
#define STEP_NS (100 * MS)
#define T0 (1000 * 1000 * MS)	/* a monotonic time well past 0 */

struct step {
	uint64_t floor, peak, reserved;
};

static void rules(struct torch_rules *r)
{
	torch_rules__default(r);
	r->warmup_ns = 1000 * MS;
	r->window_ns = 2000 * MS;
}

static void sample(struct torch_model *m, uint32_t pid, uint32_t dev, unsigned int i,
		   const struct step *s, uint32_t flags)
{
	struct torch_sample t;

	memset(&t, 0, sizeof(t));
	t.ts_ns = T0 + i * STEP_NS;
	t.pid = pid;
	t.device = dev;
	t.flags = flags;
	t.allocated = s->floor;
	t.reserved = flags & TORCH_S_TOTALS ? s->reserved : 0;
	t.alloc_low = s->floor;
	t.alloc_high = s->peak;
	t.peak_allocated = s->peak;
	t.peak_reserved = t.reserved;
	t.allocs = 8ULL * (i + 1);
	t.frees = 8ULL * (i + 1) - 2;
	strcpy(t.comm, "job");
	CHECK(!torch_model__add(m, &t), "add", "");
}

enum mode { STEADY, FRAGMENT, FRAGMENT_ES, LEAK, CACHE, EMPTY };

/* torch_alloc's modes in figures: step i's floor, peak and reserved. */
static struct step shape(enum mode mode, unsigned int i)
{
	struct step s = { 40 * MIB, 83 * MIB, 94 * MIB };
	double g = 1.0;
	unsigned int k;

	for (k = 0; k < i; k++)
		g *= 1.05;
	switch (mode) {
	case FRAGMENT:	/* cached blocks stop fitting: new segments */
		s.peak = (uint64_t)(43 * MIB * g) + s.floor;
		s.reserved = (uint64_t)(94 * MIB * g * g);
		break;
	case FRAGMENT_ES:	/* pages follow the peak */
		s.peak = (uint64_t)(43 * MIB * g) + s.floor;
		s.reserved = (s.peak + 20 * MIB - 1) / (20 * MIB) * 20 * MIB;
		break;
	case LEAK:
		s.floor += 3 * MIB * i;
		s.peak = s.floor + 43 * MIB;
		s.reserved = 94 * MIB + 20 * MIB * (i / 6);
		break;
	case CACHE:	/* step 1 a 4x peak: its segments stay */
		s.reserved = 222 * MIB;
		if (i == 1)
			s.peak = 212 * MIB;
		break;
	case EMPTY:	/* empty_cache() at step 30 */
		if (i >= 30)
			s.reserved = s.peak = s.floor;
		break;
	default:
		break;
	}
	return s;
}

static void run(struct torch_model *m, enum mode mode, unsigned int steps, uint32_t flags)
{
	unsigned int i;

	for (i = 0; i < steps; i++) {
		struct step s = shape(mode, i);

		sample(m, 100, 0, i, &s, flags);
	}
}

static void judge(struct torch_model *m, enum mode mode, unsigned int steps, uint32_t flags,
		  struct torch_verdict *v)
{
	struct torch_rules r;

	rules(&r);
	torch_model__init(m, &r);
	run(m, mode, steps, flags);
	CHECK(torch_model__judge_pid(m, 100, v), "judge_pid", "never reported");
}

static void test_modes(void)
{
	static const struct {
		enum mode mode;
		enum torch_kind kind;
		const char *name;
	} cases[] = {
		{ STEADY, TORCH_OK, "steady" },
		{ FRAGMENT, TORCH_FRAGMENTATION, "fragment" },
		{ LEAK, TORCH_LEAK, "leak" },
		{ CACHE, TORCH_CACHE_HELD, "cache" },
		{ EMPTY, TORCH_OK, "empty" },
	};
	struct torch_model m;
	struct torch_verdict v;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		judge(&m, cases[i].mode, 40, TORCH_S_TOTALS, &v);
		CHECK(!v.warmup && v.kind == cases[i].kind, cases[i].name,
		      "%s (warm-up %d), expected %s", torch_kind__name(v.kind), v.warmup,
		      torch_kind__name(cases[i].kind));
		torch_model__free(&m);
	}
}

/* Figures: the last sample's, cached its reserved less allocated. */
static void test_figures(void)
{
	struct torch_model m;
	struct torch_verdict v;

	judge(&m, STEADY, 5, TORCH_S_TOTALS, &v);
	CHECK_EQ(v.allocated, 40 * MIB, "allocated");
	CHECK_EQ(v.reserved, 94 * MIB, "reserved");
	CHECK_EQ(v.cached, 54 * MIB, "cached");
	CHECK(v.cached_share > 0.574 && v.cached_share < 0.575, "share", "%f", v.cached_share);
	CHECK_EQ(v.peak_allocated, 83 * MIB, "peak");
	torch_model__free(&m);
}

/* Reserved racing up from the first step: no verdict in the warm-up. */
static void test_no_verdict_in_warmup(void)
{
	struct torch_model m;
	struct torch_verdict v;
	unsigned int steps;

	for (steps = 1; steps <= 17; steps++) {
		judge(&m, FRAGMENT, steps, TORCH_S_TOTALS, &v);
		/* 1 s of warm-up, then 3 slots of 250 ms */
		if (steps <= 10)
			CHECK(v.warmup && v.kind == TORCH_OK, "warm-up", "%u steps: %s", steps,
			      torch_kind__name(v.kind));
		torch_model__free(&m);
	}
	judge(&m, FRAGMENT, 20, TORCH_S_TOTALS, &v);
	CHECK(!v.warmup && v.kind == TORCH_FRAGMENTATION, "after it", "%s",
	      torch_kind__name(v.kind));
	CHECK(v.slots >= TORCH_MIN_SLOTS, "slots", "%u", v.slots);
	torch_model__free(&m);
}

/* A warm-up's jump in reserved, then flat: not fragmentation, not a leak. */
static void test_warmup_jump(void)
{
	struct torch_rules r;
	struct torch_model m;
	struct torch_verdict v;
	unsigned int i;

	rules(&r);
	torch_model__init(&m, &r);
	for (i = 0; i < 40; i++) {
		struct step s = shape(STEADY, i);

		if (i >= 12) {	/* the optimizer's state, once, after the warm-up */
			s.floor += 30 * MIB;
			s.peak += 30 * MIB;
			s.reserved += 40 * MIB;
		}
		sample(&m, 100, 0, i, &s, TORCH_S_TOTALS);
		if (i < 11)
			continue;
		torch_model__judge_pid(&m, 100, &v);
		CHECK(v.kind == TORCH_OK, "one jump", "step %u: %s", i, torch_kind__name(v.kind));
	}
	torch_model__free(&m);
}

/*
 * Reserved growing with the peak (longer sequences each step), half as
 * fast again, over a large cache: the unused bytes grow too, but demand
 * drives it: not fragmentation.
 */
static void test_growing_demand(void)
{
	struct torch_rules r;
	struct torch_model m;
	struct torch_verdict v;
	unsigned int i;

	rules(&r);
	torch_model__init(&m, &r);
	for (i = 0; i < 40; i++) {
		struct step s = { 40 * MIB, 80 * MIB + 5 * MIB * i, 200 * MIB + 15 * MIB * i / 2 };

		sample(&m, 100, 0, i, &s, TORCH_S_TOTALS);
	}
	torch_model__judge_pid(&m, 100, &v);
	CHECK(v.kind == TORCH_OK && v.unused_share >= 0.25, "demand", "%s, unused %.2f",
	      torch_kind__name(v.kind), v.unused_share);
	torch_model__free(&m);
}

/* The same fragmenting shapes with expandable segments: reserved follows the peak. */
static void test_expandable(void)
{
	struct umt_call_rec r;
	struct torch_rules ru;
	struct torch_model m;
	struct torch_verdict v;

	rules(&ru);
	torch_model__init(&m, &ru);
	memset(&r, 0, sizeof(r));
	r.pid = 100;
	r.api = UMT_API_MEM_CREATE;
	r.size = 20 * MIB;
	torch_model__call(&m, &r, 0);
	run(&m, FRAGMENT_ES, 40, TORCH_S_TOTALS);
	torch_model__judge_pid(&m, 100, &v);
	CHECK(v.expandable == TORCH_ES_ON, "on", "%d", v.expandable);
	CHECK(v.kind == TORCH_OK, "ok", "%s", torch_kind__name(v.kind));
	/* A report judges after the end: what its calls said stays. */
	torch_model__exit(&m, 100);
	torch_model__judge_pid(&m, 100, &v);
	CHECK(v.expandable == TORCH_ES_ON, "on after exit", "%d", v.expandable);
	torch_model__free(&m);

	/* cuMemCreate of another size (NCCL's buffers): not the allocator's pages */
	torch_model__init(&m, &ru);
	r.size = 4 * MIB;
	torch_model__call(&m, &r, 0);
	r.api = UMT_API_MEM_ALLOC_V2;
	r.size = 20 * MIB;
	torch_model__call(&m, &r, 0);
	run(&m, STEADY, 3, TORCH_S_TOTALS);
	torch_model__judge_pid(&m, 100, &v);
	CHECK(v.expandable == TORCH_ES_OFF, "classic", "%d", v.expandable);
	torch_model__free(&m);

	/* a failed cuMemCreate (a fabric-handle probe) says nothing */
	torch_model__init(&m, &ru);
	r.api = UMT_API_MEM_CREATE;
	r.size = 2 * MIB;
	r.ret = 2;
	torch_model__call(&m, &r, 0);
	run(&m, STEADY, 3, TORCH_S_TOTALS);
	torch_model__judge_pid(&m, 100, &v);
	CHECK(v.expandable == TORCH_ES_UNKNOWN, "failed create", "%d", v.expandable);
	torch_model__free(&m);
}

static void test_advice(void)
{
	struct torch_model m;
	struct torch_verdict v;
	char buf[1024];

	judge(&m, FRAGMENT, 40, TORCH_S_TOTALS | TORCH_S_CONF, &v);
	CHECK(v.expandable == TORCH_ES_OFF, "env read: off", "%d", v.expandable);
	CHECK(v.advice == TORCH_ADV_EXPANDABLE, "expandable", "%#x", v.advice);
	torch_out__advice(&v, NULL, buf, sizeof(buf));
	CHECK(strstr(buf, "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True") &&
	      !strstr(buf, "max_split"), "words", "%s", buf);
	torch_model__free(&m);

	judge(&m, FRAGMENT, 40, TORCH_S_TOTALS | TORCH_S_CONF | TORCH_S_CONF_SET |
	      TORCH_S_MAX_SPLIT, &v);
	CHECK(v.advice == (TORCH_ADV_EXPANDABLE | TORCH_ADV_NO_MAX_SPLIT), "with max_split",
	      "%#x", v.advice);
	torch_out__advice(&v, NULL, buf, sizeof(buf));
	CHECK(strstr(buf, "without max_split_size_mb"), "words", "%s", buf);
	torch_model__free(&m);

	/* on already, and still fragmenting: max_split_size_mb is why */
	judge(&m, FRAGMENT, 40, TORCH_S_TOTALS | TORCH_S_CONF | TORCH_S_CONF_SET |
	      TORCH_S_EXPANDABLE | TORCH_S_MAX_SPLIT, &v);
	CHECK(v.kind == TORCH_FRAGMENTATION && v.advice == TORCH_ADV_NO_MAX_SPLIT,
	      "on + max_split", "%s %#x", torch_kind__name(v.kind), v.advice);
	torch_model__free(&m);

	judge(&m, FRAGMENT, 40, TORCH_S_TOTALS | TORCH_S_CONF | TORCH_S_CONF_SET |
	      TORCH_S_EXPANDABLE, &v);
	CHECK(v.advice == (TORCH_ADV_EMPTY_CACHE | TORCH_ADV_FRACTION), "on", "%#x", v.advice);
	torch_model__free(&m);

	judge(&m, CACHE, 40, TORCH_S_TOTALS, &v);
	CHECK(v.advice == (TORCH_ADV_EMPTY_CACHE | TORCH_ADV_FRACTION), "cache-held", "%#x",
	      v.advice);
	torch_out__advice(&v, NULL, buf, sizeof(buf));
	CHECK(strstr(buf, "torch.cuda.empty_cache()") && strstr(buf, "139M"), "words", "%s", buf);
	torch_model__free(&m);

	judge(&m, LEAK, 40, TORCH_S_TOTALS, &v);
	CHECK(v.advice == TORCH_ADV_LEAK_SITES, "leak", "%#x", v.advice);
	torch_out__advice(&v, NULL, buf, sizeof(buf));
	CHECK(strstr(buf, "floor") && strstr(buf, "umtrace report"), "words", "%s", buf);
	torch_model__free(&m);

	judge(&m, STEADY, 40, TORCH_S_TOTALS, &v);
	CHECK(!v.advice, "ok: none", "%#x", v.advice);
	torch_model__free(&m);
}

/*
 * The call sites of a process's segments, most bytes first, the first
 * TORCH_SITES kept; frees and reservations are none; kept past its exit.
 */
static void test_sites(void)
{
	static const struct { uint32_t pid, api, site; uint64_t size; } calls[] = {
		{ 100, UMT_API_MEM_ALLOC_V2, 7, 20 * MIB },
		{ 100, UMT_API_MEM_ALLOC_V2, 8, 2 * MIB },
		{ 100, UMT_API_MEM_ALLOC_V2, 7, 20 * MIB },
		{ 100, UMT_API_MEM_CREATE, 9, 64 * MIB },
		{ 100, UMT_API_MEM_ADDRESS_RESERVE, 10, 1ULL << 40 },	/* no memory */
		{ 100, UMT_API_MEM_FREE_V2, 11, 0 },
		{ 200, UMT_API_MEM_ALLOC_V2, 12, 512 * MIB },	/* another process */
		{ 100, UMT_API_MEM_ALLOC_V2, 13, 1 * MIB },
		{ 100, UMT_API_MEM_ALLOC_V2, 14, 4 * MIB },	/* the smallest goes */
	};
	struct torch_verdict v;
	struct umt_call_rec r;
	struct torch_model m;
	size_t i;

	torch_model__init(&m, NULL);
	for (i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
		memset(&r, 0, sizeof(r));
		r.pid = calls[i].pid;
		r.api = calls[i].api;
		r.size = calls[i].size;
		torch_model__call(&m, &r, calls[i].site);
	}
	run(&m, STEADY, 3, TORCH_S_TOTALS);
	torch_model__exit(&m, 100);
	torch_model__judge_pid(&m, 100, &v);
	CHECK(v.n_sites == 4 && v.sites[0] == 9 && v.sites[1] == 7 && v.sites[2] == 14 &&
	      v.sites[3] == 8, "sites", "%u: %u %u %u %u", v.n_sites, v.sites[0], v.sites[1],
	      v.sites[2], v.sites[3]);
	torch_model__free(&m);
}

/* The 3-argument hook: reserved unknown, a leak still shows, fragmentation cannot. */
static void test_no_totals(void)
{
	struct torch_model m;
	struct torch_verdict v;

	judge(&m, FRAGMENT, 40, 0, &v);
	CHECK(!v.reserved_known && v.kind == TORCH_OK && !v.reserved, "fragment", "%s",
	      torch_kind__name(v.kind));
	torch_model__free(&m);
	judge(&m, LEAK, 40, 0, &v);
	CHECK(v.kind == TORCH_LEAK, "leak", "%s", torch_kind__name(v.kind));
	torch_model__free(&m);
}

/* Gone quiet: the verdict of its last window stays. */
static void test_idle_keeps_verdict(void)
{
	struct torch_model m;
	struct torch_verdict v1, v2;

	judge(&m, CACHE, 40, TORCH_S_TOTALS, &v1);
	torch_model__judge_pid(&m, 100, &v2);
	CHECK(v1.kind == TORCH_CACHE_HELD && v2.kind == v1.kind, "same", "");
	torch_model__free(&m);
}

/* Two devices: figures summed, the worst verdict shown. */
static void test_devices(void)
{
	struct torch_rules r;
	struct torch_model m;
	struct torch_verdict v;
	unsigned int i;

	rules(&r);
	torch_model__init(&m, &r);
	for (i = 0; i < 40; i++) {
		struct step a = shape(CACHE, i), b = shape(LEAK, i);

		sample(&m, 100, 1, i, &a, TORCH_S_TOTALS);
		sample(&m, 100, 0, i, &b, TORCH_S_TOTALS);
		sample(&m, 99, 0, i, &a, TORCH_S_TOTALS);
	}
	CHECK_EQ(m.n, 3, "devices");
	CHECK(torch_model__dev(&m, 0)->pid == 99 && torch_model__dev(&m, 2)->device == 1,
	      "sorted", "");
	torch_model__judge_pid(&m, 100, &v);
	CHECK(v.kind == TORCH_LEAK, "worst", "%s", torch_kind__name(v.kind));
	CHECK_EQ(v.reserved, 222 * MIB + shape(LEAK, 39).reserved, "summed");
	CHECK(!torch_model__judge_pid(&m, 101, &v), "none", "");
	torch_model__exit(&m, 100);
	CHECK(m.n == 3 && torch_model__dev(&m, 1)->exited, "kept, exited", "");
	m.forget_exited = true;
	torch_model__exit(&m, 100);
	CHECK_EQ(m.n, 1, "forgotten");
	torch_model__free(&m);
}

/* A sample read from the map after a newer record must not win. */
static void test_out_of_order(void)
{
	struct torch_rules r;
	struct torch_model m;
	struct torch_sample s;
	const struct torch_dev *d;

	rules(&r);
	torch_model__init(&m, &r);
	memset(&s, 0, sizeof(s));
	s.pid = 7;
	s.flags = TORCH_S_TOTALS;
	s.ts_ns = T0 + 200 * MS;
	s.allocs = 10;
	s.allocated = 2 * MIB;
	torch_model__add(&m, &s);
	s.ts_ns = T0 + 100 * MS;
	s.allocs = 9;
	s.allocated = 1 * MIB;
	torch_model__add(&m, &s);
	d = m.n == 1 ? torch_model__dev(&m, 0) : NULL;
	CHECK(d && d->last.allocated == 2 * MIB && d->first_ns == T0 + 100 * MS, "last", "");
	torch_model__free(&m);
}

/*
 * The seed's slide, 1 GiB an hour for 16 minutes, a sample each 250 ms: too
 * slow for the window (0.6 MiB in 2 s), named on the 15 min horizon with
 * its rate; the floor's slide is a leak, reserved's without it
 * fragmentation; a flat job is neither.
 */
static void slide(struct torch_model *m, double floor_h, double reserved_h, double peak_h,
		  unsigned int seconds)
{
	struct torch_sample t;
	unsigned int i;

	for (i = 0; i <= seconds * 4; i++) {
		memset(&t, 0, sizeof(t));
		t.ts_ns = T0 + i * 250 * MS;
		t.pid = 7;
		t.flags = TORCH_S_TOTALS;
		t.allocated = t.alloc_low = GIB + (uint64_t)(floor_h * i / 4 / 3600);
		t.alloc_high = t.peak_allocated = t.allocated + 512 * MIB +
						  (uint64_t)(peak_h * i / 4 / 3600);
		t.reserved = t.peak_reserved = 2 * GIB + (uint64_t)(reserved_h * i / 4 / 3600);
		t.allocs = 8ULL * (i + 1);
		t.frees = 8ULL * (i + 1) - 2;
		strcpy(t.comm, "job");
		CHECK(!torch_model__add(m, &t), "add", "%u", i);
	}
}

static void test_slow_slides(void)
{
	static const struct {
		double floor_h, reserved_h, peak_h;
		unsigned int seconds;
		enum torch_kind kind;
		uint64_t horizon;
	} cases[] = {
		{ GIB, GIB, 0, 960, TORCH_LEAK, 900 },
		{ 0, GIB, 0, 960, TORCH_FRAGMENTATION, 900 },
		/* Reserved grows with the tensors' peak: demand, not fragmentation. */
		{ 0, GIB, GIB, 960, TORCH_OK, 0 },
		{ 0, 0, 0, 960, TORCH_OK, 0 },
		/* 5 minutes of it: under half the quarter's span, and a minute moves 17 MiB. */
		{ GIB, GIB, 0, 300, TORCH_OK, 0 },
	};
	struct torch_rules r;
	struct torch_model m;
	struct torch_verdict v;
	unsigned int i;

	rules(&r);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		torch_model__init(&m, &r);
		slide(&m, cases[i].floor_h, cases[i].reserved_h, cases[i].peak_h, cases[i].seconds);
		CHECK(torch_model__judge_pid(&m, 7, &v), "judged", "%u", i);
		CHECK(v.kind == cases[i].kind && v.slide_horizon == cases[i].horizon, "named",
		      "%u: %s on %llu s", i, torch_kind__name(v.kind),
		      (unsigned long long)v.slide_horizon);
		if (cases[i].horizon)
			CHECK(v.slide_per_hour > 0.9 * GIB && v.slide_per_hour < 1.1 * GIB, "rate",
			      "%u: %.0f MiB/h", i, v.slide_per_hour / MIB);
		CHECK(cases[i].kind == TORCH_OK || v.advice, "advice", "%u: none", i);
		/* its episode: on the same horizon, from about when it could be named */
		CHECK(v.has_cause == !!cases[i].horizon, "cause", "%u", i);
		if (cases[i].horizon)
			CHECK(v.cause.kind == cases[i].kind &&
			      v.cause.horizon_s == cases[i].horizon &&
			      v.cause.per_hour > 0.9 * GIB && v.cause.per_hour < 1.1 * GIB &&
			      v.cause.end_ns + 5000 * MS >= T0 + cases[i].seconds * 1000 * MS &&
			      v.cause.start_ns < T0 + 60 * 1000 * MS &&
			      (v.cause.kind == TORCH_LEAK ? v.cause.floor : v.cause.reserved)[1] >
			      (v.cause.kind == TORCH_LEAK ? v.cause.floor : v.cause.reserved)[0] +
			      200 * MIB, "episode", "%u: %s on %llu s, %.0f MiB/h, %.0f to %.0f s", i,
			      torch_kind__name(v.cause.kind), (unsigned long long)v.cause.horizon_s,
			      v.cause.per_hour / MIB, (v.cause.start_ns - T0) / 1e9,
			      (v.cause.end_ns - T0) / 1e9);
		torch_model__free(&m);
	}
}

/*
 * The horizons are parameters, as the window is: the tests' spec
 * (TORCH_TEST_HORIZONS) is read whole or not at all, and a slide of
 * 60 GiB/h, too slow for the window (17 MiB a second of 1 GiB), is named
 * on a horizon of 20 s with its rate, as the seed's is on the quarter.
 */
static void test_horizons(void)
{
	static const char *const bad[] = {
		"20,60", "20,60,240,", "60,20,240", "20,20,240", "9,60,240", "x",
		"20,,240", "20,60,-1", "20,60,99999999999999999999", "",
	};
	struct torch_rules r;
	struct torch_model m;
	struct torch_verdict v;
	unsigned int i;

	rules(&r);
	CHECK(r.horizon_s[0] == 60 && r.horizon_s[1] == 900 && r.horizon_s[2] == 3600,
	      "default", "%llu", (unsigned long long)r.horizon_s[0]);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(torch_rules__horizons(&r, bad[i]) == -EINVAL && r.horizon_s[0] == 60,
		      "refused", "'%s'", bad[i]);
	CHECK(!torch_rules__horizons(&r, NULL) && r.horizon_s[2] == 3600, "none", "");
	CHECK(!torch_rules__horizons(&r, "20,60,240") && r.horizon_s[0] == 20 &&
	      r.horizon_s[1] == 60 && r.horizon_s[2] == 240, "taken", "");
	torch_model__init(&m, &r);
	slide(&m, 60.0 * GIB, 60.0 * GIB, 0, 70);
	CHECK(torch_model__judge_pid(&m, 7, &v), "judged", "");
	CHECK(v.kind == TORCH_LEAK && v.slide_horizon == 20 && v.slide_per_hour > 54.0 * GIB &&
	      v.slide_per_hour < 66.0 * GIB, "compressed", "%s on %llu s at %.1f GiB/h",
	      torch_kind__name(v.kind), (unsigned long long)v.slide_horizon,
	      v.slide_per_hour / GIB);
	CHECK(v.has_cause && v.cause.horizon_s == 20, "its episode", "%llu",
	      (unsigned long long)v.cause.horizon_s);
	torch_model__free(&m);
}

/* One sample at step i (100 ms each): allocated's floor and peak, reserved. */
static void step_at(struct torch_model *m, unsigned int i, uint64_t floor, uint64_t peak,
		    uint64_t reserved)
{
	struct step s = { floor, peak, reserved };

	sample(m, 100, 0, i, &s, TORCH_S_TOTALS);
}

/* The root cause's advice and the window's kind now, of pid 100. */
static const struct torch_episode *episodes_of(struct torch_model *m, size_t *n)
{
	const struct torch_episode *e = NULL;

	*n = m->n ? torch_dev__episodes(torch_model__dev(m, 0), &e) : 0;
	return e;
}

/*
 * The shape, with the default rules (2 s warm-up, 4 s windows):
 * steady for 4 s, then reserved from 94 MiB to 4.4 GiB in 6 s while
 * allocated's floor stays and its peak barely moves (cached blocks of the
 * wrong sizes), then a minute of steps from the cache. The window says
 * cache-held now; the root cause stays fragmentation, from 4 s to 10 s,
 * with its fix, expandable segments.
 */
static void test_burst_then_steady(void)
{
	const struct torch_episode *e;
	struct torch_model m;
	struct torch_verdict v;
	uint64_t reserved = 94 * MIB;
	unsigned int i;
	char line[128];
	size_t n;

	torch_model__init(&m, NULL);
	for (i = 0; i < 700; i++) {
		if (i >= 40 && i < 100)
			reserved += (uint64_t)(4.4 * GIB - 94 * MIB) / 60;
		step_at(&m, i, 40 * MIB, 83 * MIB + (i >= 40 && i < 100 ? (i - 40) * MIB / 4 :
						     i >= 100 ? 15 * MIB : 0), reserved);
		if (i == 200) {
			torch_model__judge_pid(&m, 100, &v);
			CHECK(v.kind == TORCH_CACHE_HELD && v.has_cause &&
			      v.cause.kind == TORCH_FRAGMENTATION, "at 20 s", "%s, cause %s",
			      torch_kind__name(v.kind), torch_kind__name(v.cause.kind));
		}
	}
	torch_model__judge_pid(&m, 100, &v);
	CHECK(v.kind == TORCH_CACHE_HELD, "now", "%s", torch_kind__name(v.kind));
	CHECK(v.has_cause && v.cause.kind == TORCH_FRAGMENTATION, "cause", "%s",
	      torch_kind__name(v.cause.kind));
	CHECK(v.advice == TORCH_ADV_EXPANDABLE, "advice", "%#x", v.advice);
	CHECK(v.cause.horizon_s == 0, "on the window", "%llu",
	      (unsigned long long)v.cause.horizon_s);
	/* the burst: steps 40 to 99 */
	CHECK(v.cause.start_ns >= T0 + 3900 * MS && v.cause.start_ns <= T0 + 4100 * MS, "start",
	      "%.2f s", (v.cause.start_ns - T0) / 1e9);
	CHECK(v.cause.end_ns >= T0 + 9800 * MS && v.cause.end_ns <= T0 + 10100 * MS, "end",
	      "%.2f s", (v.cause.end_ns - T0) / 1e9);
	CHECK(v.cause.reserved[0] < 100 * MIB && v.cause.reserved[1] > 4 * GIB, "reserved",
	      "%llu -> %llu MiB", (unsigned long long)(v.cause.reserved[0] / MIB),
	      (unsigned long long)(v.cause.reserved[1] / MIB));
	CHECK(v.cause.floor[0] == 40 * MIB && v.cause.floor[1] == 40 * MIB, "floor flat", "");
	CHECK(v.cause.unused[1] > v.cause.unused[0] && v.cause.peak[1] < 120 * MIB, "unused",
	      "%llu MiB", (unsigned long long)(v.cause.unused[1] / MIB));
	CHECK_EQ(v.first_ns, T0, "first");
	torch_out__episode(&v.cause, v.first_ns, line, sizeof(line));
	CHECK(!strcmp(line, "fragmentation 4.0s-9.9s: reserved +4.3G, floor flat, "
		      "unused 4.3G (98%)"), "worded", "%s", line);
	CHECK(!strcmp(torch_out__episode(&v.cause, v.first_ns, line, 20), "fragmentation 4.0s-"),
	      "cut", "%s", line);
	e = episodes_of(&m, &n);
	CHECK(n == 2 && e[0].kind == TORCH_FRAGMENTATION && e[1].kind == TORCH_CACHE_HELD,
	      "episodes", "%zu: %s, %s", n, n ? torch_kind__name(e[0].kind) : "-",
	      n > 1 ? torch_kind__name(e[1].kind) : "-");
	CHECK(n == 2 && e[1].start_ns >= e[0].end_ns && e[1].end_ns >= T0 + 66 * 1000 * MS,
	      "cache-held after", "%.1f s to %.1f s, after %.1f s",
	      n == 2 ? (e[1].start_ns - T0) / 1e9 : 0, n == 2 ? (e[1].end_ns - T0) / 1e9 : 0,
	      n ? (e[0].end_ns - T0) / 1e9 : 0);
	torch_model__free(&m);
}

/* The modes alone: steady and empty leave no episode; the others one, their cause. */
static void test_episode_modes(void)
{
	static const struct {
		enum mode mode;
		enum torch_kind kind;
	} cases[] = {
		{ STEADY, TORCH_OK }, { EMPTY, TORCH_OK }, { LEAK, TORCH_LEAK },
		{ CACHE, TORCH_CACHE_HELD }, { FRAGMENT, TORCH_FRAGMENTATION },
	};
	const struct torch_episode *e;
	struct torch_model m;
	struct torch_verdict v;
	size_t i, n;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		judge(&m, cases[i].mode, 40, TORCH_S_TOTALS, &v);
		torch_model__exit(&m, 100);	/* its last window, whole */
		e = episodes_of(&m, &n);
		torch_model__judge_pid(&m, 100, &v);
		if (cases[i].kind == TORCH_OK) {
			CHECK(!n && !v.has_cause && !v.advice, "none", "%zu: %zu episodes", i, n);
		} else {
			CHECK(n == 1 && e[0].kind == cases[i].kind, "one", "%zu: %zu, %s", i, n,
			      n ? torch_kind__name(e[0].kind) : "-");
			CHECK(v.has_cause && v.cause.kind == cases[i].kind &&
			      v.cause.end_ns == T0 + 39 * STEP_NS, "cause", "%zu: %s", i,
			      torch_kind__name(v.cause.kind));
		}
		torch_model__free(&m);
	}
	/* A leak's episode: the floor from 40 MiB, 3 MiB a step. */
	judge(&m, LEAK, 40, TORCH_S_TOTALS, &v);
	CHECK(v.cause.floor[1] > v.cause.floor[0] + 20 * MIB &&
	      v.advice == TORCH_ADV_LEAK_SITES, "leak", "%llu -> %llu MiB, %#x",
	      (unsigned long long)(v.cause.floor[0] / MIB),
	      (unsigned long long)(v.cause.floor[1] / MIB), v.advice);
	torch_model__free(&m);
}

/*
 * Two hours of cycles, 40 s each: 4 s of fragmenting growth, 26 s held in
 * cache, then empty_cache() and 10 s ok; in the third cycle the floor
 * also leaks 60 MiB over 2 s and stays. At most TORCH_EPISODES kept at
 * any time, the leak kept as the root cause, the newest the last cycle's
 * cache-held (its last 10 s are ok).
 */
static void test_episode_bound(void)
{
	const struct torch_episode *e;
	struct torch_rules r;
	struct torch_model m;
	struct torch_verdict v;
	unsigned int i, c, at, most = 0;
	uint64_t floor = 40 * MIB, reserved;
	size_t n;

	rules(&r);
	torch_model__init(&m, &r);
	for (i = 0; i < 2 * 36000; i++) {
		c = i / 400;
		at = i % 400;
		if (c == 3 && at >= 100 && at < 120)
			floor += 3 * MIB;
		if (at < 40)		/* the burst */
			reserved = 200 * MIB + at * 25 * MIB;
		else if (at < 300)	/* held */
			reserved = 1200 * MIB;
		else			/* emptied */
			reserved = 0;
		if (reserved < floor + 54 * MIB)
			reserved = floor + 54 * MIB;
		step_at(&m, i, floor, floor + 43 * MIB, reserved);
		episodes_of(&m, &n);
		most = n > most ? n : most;
	}
	CHECK(most == TORCH_EPISODES, "bound", "at most %u", most);
	torch_model__judge_pid(&m, 100, &v);
	CHECK(v.has_cause && v.cause.kind == TORCH_LEAK, "root kept", "%s",
	      torch_kind__name(v.cause.kind));
	CHECK(v.cause.start_ns >= T0 + 1290 * STEP_NS && v.cause.start_ns <= T0 + 1310 * STEP_NS,
	      "its start", "%.1f s", (v.cause.start_ns - T0) / 1e9);
	e = episodes_of(&m, &n);
	CHECK(n && e[n - 1].kind == TORCH_CACHE_HELD && e[n - 1].end_ns > T0 + 71850 * STEP_NS &&
	      v.kind == TORCH_OK, "newest", "%.1f s",
	      n ? (e[n - 1].end_ns - T0) / 1e9 : 0);
	for (i = 1; i < n; i++)
		CHECK(e[i].start_ns >= e[i - 1].start_ns, "in order", "%u", i);
	torch_model__free(&m);
}

static void test_conf(void)
{
	CHECK_EQ(torch_conf__parse(NULL), 0, "unset");
	CHECK_EQ(torch_conf__parse(""), TORCH_S_CONF_SET, "empty");
	CHECK_EQ(torch_conf__parse("expandable_segments:True"),
		 TORCH_S_CONF_SET | TORCH_S_EXPANDABLE, "on");
	CHECK_EQ(torch_conf__parse("expandable_segments:False"), TORCH_S_CONF_SET, "off");
	CHECK_EQ(torch_conf__parse("max_split_size_mb:128,expandable_segments:True"),
		 TORCH_S_CONF_SET | TORCH_S_EXPANDABLE | TORCH_S_MAX_SPLIT, "both");
	CHECK_EQ(torch_conf__parse("garbage_collection_threshold:0.6, max_split_size_mb:64"),
		 TORCH_S_CONF_SET | TORCH_S_MAX_SPLIT, "spaces");
	CHECK_EQ(torch_conf__parse("xexpandable_segments:True"), TORCH_S_CONF_SET, "prefix");
}

static void test_hook_forms(void)
{
	CHECK_EQ(torch_hook__cookie("_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE"),
		 UMT_TORCH_CK_TOTALS, "size_t");
	CHECK_EQ(torch_hook__cookie("_ZN3c1027reportMemoryUsageToProfilerEPvlllNS_6DeviceE"),
		 UMT_TORCH_CK_TOTALS, "int64_t");
	CHECK_EQ(torch_hook__cookie("_ZN3c1027reportMemoryUsageToProfilerEPvlyyN3c106DeviceE"),
		 UMT_TORCH_CK_TOTALS, "long long, unsubstituted");
	CHECK_EQ(torch_hook__cookie("_ZN3c1027reportMemoryUsageToProfilerEPvlNS_6DeviceE"), 0,
		 "3 arguments");
	CHECK_EQ(torch_hook__cookie("_ZN3c1027reportMemoryUsageToProfilerEPvlmNS_6DeviceE"), -1,
		 "one total");
	CHECK_EQ(torch_hook__cookie("_ZN3c1027reportMemoryUsageToProfilerEPvliiNS_6DeviceE"), -1,
		 "32-bit totals");
	CHECK_EQ(torch_hook__cookie("_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceEb"),
		 -1, "more");
	CHECK_EQ(torch_hook__cookie("_ZN3c1018reportOutOfMemoryToProfilerElmmNS_6DeviceE"), -1,
		 "other");
}

static void test_environ(void)
{
	static const char env[] = "A=1\0PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\0"
				  "PYTORCH=x";
	char buf[64];

	CHECK(!proc__environ_find(env, sizeof(env) - 1, "PYTORCH_CUDA_ALLOC_CONF", buf,
				  sizeof(buf)) && !strcmp(buf, "expandable_segments:True"),
	      "found", "%s", buf);
	CHECK(!proc__environ_find(env, sizeof(env) - 1, "PYTORCH", buf, sizeof(buf)) &&
	      !strcmp(buf, "x"), "last, unterminated", "%s", buf);
	CHECK_EQ(proc__environ_find(env, sizeof(env) - 1, "PYTORCH_ALLOC_CONF", buf, sizeof(buf)),
		 -ENOENT, "absent");
	CHECK(!proc__environ_find(env, sizeof(env) - 1, "PYTORCH_CUDA_ALLOC_CONF", buf, 5) &&
	      !strcmp(buf, "expa"), "cut", "%s", buf);
}

#define SEC 1000000000ULL

/*
 * The hook's windows, on a clock driven here: a job under the budget is
 * seen on every call; one over it is detached once the budget is spent,
 * until the next period's window, which opens at a moment that moves; a
 * GPU call opens one more window a period, not two.
 */
static void test_windows(void)
{
	struct torch_window w;
	uint64_t t = 1000 * SEC, quarters[4] = {}, first;
	int i;

	torch_window__init(&w, 0, t);
	CHECK(torch_window__want(&w, t, 0, 1ULL << 40), "windows", "every call: attached");
	CHECK_EQ(torch_window__next_ns(&w), UINT64_MAX, "every call: never turns");

	torch_window__init(&w, SEC, t);
	CHECK(torch_window__want(&w, t, 0, 0) && w.fresh, "windows", "the first opens at once");
	w.fresh = false;
	for (i = 1; i <= 5; i++)
		CHECK(torch_window__want(&w, t + i * SEC / 2, 0, TORCH_WINDOW_CALLS - 1),
		      "windows", "under the budget: attached at %d", i);
	CHECK_EQ(w.spent, 0, "nothing spent");
	w.fresh = false;
	t += 3 * SEC;
	CHECK(!torch_window__want(&w, t, 0, TORCH_WINDOW_CALLS), "windows", "spent: detached");
	CHECK_EQ(w.spent, 1, "one spent");
	first = torch_window__next_ns(&w);
	CHECK(first > t && first <= t + SEC, "windows", "the next within a period (%llu)",
	      (unsigned long long)(first - t));
	CHECK(torch_window__want(&w, t + 1, t + 1, 0) && w.cued == 1, "windows", "a cue opens one");
	w.fresh = false;
	CHECK(!torch_window__want(&w, t + 2, t + 1, TORCH_WINDOW_CALLS), "windows", "spent again");
	CHECK(!torch_window__want(&w, t + 3, t + 3, 0), "windows", "a second cue a period: none");
	for (i = 0; i < 200; i++) {
		uint64_t at = torch_window__next_ns(&w);

		if (!w.opened_now)
			quarters[(at - w.period_ns) * 4 / SEC]++;
		torch_window__want(&w, at, 0, 0);
		w.fresh = false;
		torch_window__want(&w, at + 1, 0, TORCH_WINDOW_CALLS);
	}
	for (i = 0; i < 4; i++)
		CHECK(quarters[i] > 10, "windows", "opened in quarter %d of the period: %llu times",
		      i, (unsigned long long)quarters[i]);
}

int main(void)
{
	RUN_SUBTEST(test_modes);
	RUN_SUBTEST(test_figures);
	RUN_SUBTEST(test_no_verdict_in_warmup);
	RUN_SUBTEST(test_warmup_jump);
	RUN_SUBTEST(test_growing_demand);
	RUN_SUBTEST(test_expandable);
	RUN_SUBTEST(test_advice);
	RUN_SUBTEST(test_sites);
	RUN_SUBTEST(test_no_totals);
	RUN_SUBTEST(test_idle_keeps_verdict);
	RUN_SUBTEST(test_devices);
	RUN_SUBTEST(test_out_of_order);
	RUN_SUBTEST(test_slow_slides);
	RUN_SUBTEST(test_horizons);
	RUN_SUBTEST(test_burst_then_steady);
	RUN_SUBTEST(test_episode_modes);
	RUN_SUBTEST(test_episode_bound);
	RUN_SUBTEST(test_conf);
	RUN_SUBTEST(test_hook_forms);
	RUN_SUBTEST(test_windows);
	RUN_SUBTEST(test_environ);
	return CHECK_EXIT();
}
