// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <string.h>
#include "check.h"
#include "guard/policy.h"

#define MIB (1ULL << 20)
#define GIB (1ULL << 30)
#define TOTAL (64 * GIB)
#define NO_STOP -1

static struct guard_policy policy(const char *auto_resume)
{
	struct guard_policy p;
	char err[256] = "";
	int ret = guard_policy__init(&p, TOTAL, "2500M", "3000M", "2500M", auto_resume,
				     err, sizeof(err));

	CHECK(!ret, "policy", "init failed: %s", err);
	return p;
}

static struct guard_sample sample(uint64_t t_ms, uint64_t avail_mib)
{
	struct guard_sample s = {
		.t_ms = t_ms,
		.available = avail_mib * MIB,
		.free = avail_mib * MIB / 2,
		.total = TOTAL,
	};
	return s;
}

/* Two GPU jobs; 200 holds more. */
static struct guard_candidate jobs[] = {
	{ .pid = 100, .host_bytes = 4 * GIB, .in_scope = true },
	{ .pid = 200, .host_bytes = 9 * GIB, .in_scope = true },
};

/*
 * Feed MemAvailable figures (MiB) 100 ms apart; the index of the first
 * stop, or NO_STOP. *last gets that stop, or the last action.
 */
static int first_stop(const struct guard_policy *p, struct guard_state *st, const uint64_t *mib,
		      size_t n, struct guard_action *last)
{
	struct guard_sample s;
	size_t i;

	for (i = 0; i < n; i++) {
		s = sample(st->samples * 100, mib[i]);
		s.kernel_stops = st->prev.kernel_stops;
		*last = guard_policy__decide(p, st, &s, jobs, 2);
		if (last->kind == GUARD_STOP)
			return (int)i;
	}
	return NO_STOP;
}

/* One sample, with one more kernel stop than the last. */
static int first_stop_after_kernel(const struct guard_policy *p, struct guard_state *st,
				   uint64_t mib, struct guard_action *last)
{
	struct guard_sample s = sample(st->samples * 100, mib);

	s.kernel_stops = st->prev.kernel_stops + 1;
	*last = guard_policy__decide(p, st, &s, jobs, 2);
	return last->kind == GUARD_STOP ? 0 : NO_STOP;
}

#define SERIES(p, st, last, ...)						\
	({									\
		static const uint64_t __s[] = { __VA_ARGS__ };			\
		first_stop(p, st, __s, sizeof(__s) / sizeof(__s[0]), last);	\
	})

static void test_spike_recovers(void)
{
	struct guard_policy p = policy(NULL);
	struct guard_action a;
	struct guard_state st;

	/* Under LOW by less than DROP, and one sample under FLOOR: let through. */
	guard_state__init(&st);
	CHECK_EQ(SERIES(&p, &st, &a, 20000, 18000, 5000, 2900, 4000, 3500, 2400, 3500, 6000),
		 NO_STOP, "spike");
	CHECK_EQ(a.kind, GUARD_NONE, "spike kind");
	CHECK_EQ(a.rule, GUARD_RULE_NONE, "spike reason");
	CHECK(!a.text[0], "spike text", "got '%s'", a.text);
}

static void test_big_drop_below_low(void)
{
	struct guard_policy p = policy(NULL);
	struct guard_action a;
	struct guard_state st;

	guard_state__init(&st);
	CHECK_EQ(SERIES(&p, &st, &a, 6000, 5000, 2400), 2, "drop");
	CHECK_EQ(a.rule, GUARD_RULE_DROP, "reason");
	CHECK_EQ(a.pid, 200, "victim");
	CHECK_EQ(a.host_bytes, 9 * GIB, "victim bytes");
	CHECK_EQ(a.metric, 2400 * MIB, "metric");
	CHECK(!strcmp(a.text, "drop 2.5G in one sample, 2.3G left < low 2.9G"), "text",
	      "got '%s'", a.text);
	CHECK(!strcmp(guard_rule__name(a.rule), "drop"), "name", "got %s",
	      guard_rule__name(a.rule));
}

static void test_big_drop_above_low(void)
{
	struct guard_policy p = policy(NULL);
	struct guard_action a;
	struct guard_state st;

	guard_state__init(&st);
	CHECK_EQ(SERIES(&p, &st, &a, 8000, 5400, 3100, 3100), NO_STOP, "drop above low");
	/* Exactly DROP, leaving exactly LOW: still not below LOW. */
	guard_state__init(&st);
	CHECK_EQ(SERIES(&p, &st, &a, 5500, 3000), NO_STOP, "to low exactly");
	/* Exactly DROP, one byte under LOW. */
	guard_state__init(&st);
	CHECK_EQ(SERIES(&p, &st, &a, 5499, 2999), 1, "drop of exactly DROP");
}

static void test_slow_slide_two_samples(void)
{
	struct guard_policy p = policy(NULL);
	struct guard_action a;
	struct guard_state st;

	guard_state__init(&st);
	CHECK_EQ(SERIES(&p, &st, &a, 3200, 2900, 2700, 2550, 2450, 2600, 2450), NO_STOP,
		 "one sample under, back over, one under");
	CHECK_EQ(SERIES(&p, &st, &a, 2400), 0, "second consecutive sample under");
	CHECK_EQ(a.rule, GUARD_RULE_UNDER_FLOOR, "reason");
	CHECK_EQ(a.pid, 200, "victim");
	CHECK(!strcmp(a.text, "2.3G left < floor 2.4G for 2 samples"), "text", "got '%s'",
	      a.text);

	/* A fresh slide: stopped at its second sample under the floor, not its first. */
	guard_state__init(&st);
	CHECK_EQ(SERIES(&p, &st, &a, 2600, 2499, 2498), 2, "from the first sample");
	guard_state__init(&st);
	CHECK_EQ(SERIES(&p, &st, &a, 2499, 2498), 1, "from the very first sample");
}

static void test_after_stop_needs_further_fall(void)
{
	struct guard_policy p = policy(NULL);
	struct guard_state st;
	struct guard_action a;

	guard_state__init(&st);
	CHECK_EQ(SERIES(&p, &st, &a, 2450, 2400), 1, "first stop");
	jobs[1].already_stopped = true;
	/* The stop freed nothing: flat under the floor is no reason for another. */
	CHECK_EQ(SERIES(&p, &st, &a, 2400, 2400, 2390, 2300, 2200), NO_STOP, "flat");
	/* restop = floor / 8 = 312.5M under 2400M: 2087.5M. */
	CHECK_EQ(SERIES(&p, &st, &a, 2080, 2070), 1, "still falling");
	CHECK_EQ(a.pid, 100, "next victim");
	CHECK(strstr(a.text, "still falling since the last stop") != NULL, "text", "got '%s'",
	      a.text);
	/* Wandering either side of the floor is no further fall. */
	CHECK_EQ(SERIES(&p, &st, &a, 2090, 2510, 2490, 2480, 2470), NO_STOP, "wandering");
	/* Back over LOW re-arms the plain rule. */
	jobs[0].already_stopped = true;
	CHECK_EQ(SERIES(&p, &st, &a, 3100, 2450), NO_STOP, "re-armed, one sample");
	CHECK_EQ(SERIES(&p, &st, &a, 2450), NO_STOP, "nobody left to stop");
	CHECK_EQ(a.rule, GUARD_RULE_NO_VICTIM, "no victim");
	jobs[0].already_stopped = jobs[1].already_stopped = false;

	/* A drop rule stop is not held back by an earlier stop. */
	guard_state__init(&st);
	CHECK_EQ(SERIES(&p, &st, &a, 2450, 2400), 1, "floor stop");
	CHECK_EQ(SERIES(&p, &st, &a, 5000, 2200), 1, "drop stop right after");
	CHECK_EQ(a.rule, GUARD_RULE_DROP, "drop");
}

/*
 * The kernel side stopped the job that made the fall (it did before the
 * sample showed it): the drop rule does not take another job for it, and
 * the floor rule waits for a further fall, as after its own stops.
 */
static void test_kernel_stop_answers_the_fall(void)
{
	struct guard_policy p = policy(NULL);
	struct guard_state st;
	struct guard_action a;

	guard_state__init(&st);
	CHECK_EQ(SERIES(&p, &st, &a, 6000), NO_STOP, "start");
	jobs[1].already_stopped = true;
	CHECK_EQ(SERIES(&p, &st, &a, 2200), NO_STOP, "answered by the kernel's stop");
	CHECK_EQ(SERIES(&p, &st, &a, 2200, 2190), NO_STOP, "flat under the floor");
	CHECK_EQ(SERIES(&p, &st, &a, 1850, 1840), 1, "still falling");
	CHECK_EQ(a.pid, 100, "the other job");
	CHECK_EQ(a.rule, GUARD_RULE_UNDER_FLOOR, "floor");
	/* The policy's own stop is no answer to the next fall. */
	jobs[0].already_stopped = true;
	CHECK_EQ(SERIES(&p, &st, &a, 1840), NO_STOP, "its own stop shows");
	jobs[1].already_stopped = false;
	jobs[0].already_stopped = false;

	/*
	 * The kernel's stop record comes before the job shows stopped: the
	 * record alone answers the fall.
	 */
	guard_state__init(&st);
	CHECK_EQ(SERIES(&p, &st, &a, 6000), NO_STOP, "start");
	CHECK_EQ(first_stop_after_kernel(&p, &st, 2200, &a), NO_STOP, "answered by the record");
	CHECK_EQ(SERIES(&p, &st, &a, 2200, 2190), NO_STOP, "flat under the floor");

	/* Without a stop in between, the same fall takes the biggest job. */
	guard_state__init(&st);
	CHECK_EQ(SERIES(&p, &st, &a, 6000, 2200), 1, "drop");
	CHECK_EQ(a.pid, 200, "biggest");
	CHECK_EQ(a.rule, GUARD_RULE_DROP, "drop reason");
}

static void test_metric_free(void)
{
	struct guard_policy p = policy(NULL);
	struct guard_sample s1 = sample(0, 20000), s2 = sample(100, 20000);
	struct guard_state st;
	struct guard_action a;

	p.metric = GUARD_METRIC_FREE;
	s1.free = 6000 * MIB;
	s2.free = 2000 * MIB;
	guard_state__init(&st);
	a = guard_policy__decide(&p, &st, &s1, jobs, 2);
	CHECK_EQ(a.kind, GUARD_NONE, "first");
	a = guard_policy__decide(&p, &st, &s2, jobs, 2);
	CHECK_EQ(a.kind, GUARD_STOP, "MemFree fell");
	CHECK_EQ(a.metric, 2000 * MIB, "metric is MemFree");
	p.metric = GUARD_METRIC_AVAILABLE;
	guard_state__init(&st);
	guard_policy__decide(&p, &st, &s1, jobs, 2);
	a = guard_policy__decide(&p, &st, &s2, jobs, 2);
	CHECK_EQ(a.kind, GUARD_NONE, "MemAvailable did not");
}

static struct guard_action feed(const struct guard_policy *p, struct guard_state *st,
				uint64_t mib, const struct guard_candidate *c, size_t n)
{
	struct guard_sample s = sample(st->samples * 1000, mib);

	return guard_policy__decide(p, st, &s, c, n);
}

static void test_auto_resume_hysteresis(void)
{
	struct guard_policy p = policy("8G");
	struct guard_candidate c[] = {
		{ .pid = 100, .host_bytes = 4 * GIB, .in_scope = true, .already_stopped = true,
		  .guard_stopped = true },
		{ .pid = 200, .host_bytes = 9 * GIB, .in_scope = true, .already_stopped = true,
		  .guard_stopped = true },
		{ .pid = 300, .host_bytes = 1 * GIB, .in_scope = true, .already_stopped = true },
	};
	static const uint64_t series[] = { 9000, 9000, 7000, 9000, 9000 };
	struct guard_state st;
	struct guard_action a;
	size_t i;

	CHECK_EQ(p.auto_resume_above, 8 * GIB, "above");
	CHECK_EQ(p.resume_samples, 3, "samples");
	guard_state__init(&st);
	for (i = 0; i < sizeof(series) / sizeof(series[0]); i++) {
		a = feed(&p, &st, series[i], c, 3);
		CHECK(a.kind == GUARD_NONE, "not yet", "sample %zu: kind %d", i, a.kind);
	}
	a = feed(&p, &st, 9000, c, 3);
	CHECK_EQ(a.kind, GUARD_RESUME, "third in a row");
	CHECK_EQ(a.rule, GUARD_RULE_RECOVERED, "reason");
	CHECK_EQ(a.pid, 100, "smallest of those the guard stopped");
	CHECK(!strcmp(a.text, "8.8G left > auto-resume 8.0G for 3 samples"), "text", "got '%s'",
	      a.text);
	c[0].guard_stopped = c[0].already_stopped = false;
	/* The next one waits for three samples of its own. */
	CHECK_EQ(feed(&p, &st, 9000, c, 3).kind, GUARD_NONE, "one");
	CHECK_EQ(feed(&p, &st, 9000, c, 3).kind, GUARD_NONE, "two");
	a = feed(&p, &st, 9000, c, 3);
	CHECK_EQ(a.kind, GUARD_RESUME, "three");
	CHECK_EQ(a.pid, 200, "next");
	c[1].guard_stopped = false;
	/* 300 was stopped by someone else: never resumed by the guard. */
	for (i = 0; i < 6; i++)
		CHECK_EQ(feed(&p, &st, 9000, c, 3).kind, GUARD_NONE, "not ours");
	/* Exactly ABOVE is not above it. */
	c[1].guard_stopped = true;
	guard_state__init(&st);
	for (i = 0; i < 5; i++)
		CHECK_EQ(feed(&p, &st, 8192, c, 3).kind, GUARD_NONE, "at ABOVE");

	/* Without auto-resume, stopped jobs stay stopped. */
	p = policy(NULL);
	guard_state__init(&st);
	for (i = 0; i < 10; i++)
		CHECK_EQ(feed(&p, &st, 60000, c, 3).kind, GUARD_NONE, "off");
}

static void test_interval(void)
{
	struct guard_policy p = policy(NULL);
	struct guard_state st;
	struct guard_sample s;

	guard_state__init(&st);
	CHECK_EQ(guard_policy__next_interval_ms(&p, &st), 100, "before any sample");
	feed(&p, &st, 4500, NULL, 0);
	CHECK_EQ(guard_policy__next_interval_ms(&p, &st), 100, "1.5 LOW");
	feed(&p, &st, 6000, NULL, 0);
	CHECK_EQ(guard_policy__next_interval_ms(&p, &st), 100, "2 LOW");
	guard_state__init(&st);
	feed(&p, &st, 9000, NULL, 0);
	CHECK_EQ(guard_policy__next_interval_ms(&p, &st), 550, "3 LOW: halfway");
	feed(&p, &st, 9000, NULL, 0);
	CHECK_EQ(guard_policy__next_interval_ms(&p, &st), 550, "3 LOW, steady");
	feed(&p, &st, 30000, NULL, 0);
	CHECK_EQ(guard_policy__next_interval_ms(&p, &st), 1000, "10 LOW, rising");
	feed(&p, &st, 30000, NULL, 0);
	CHECK_EQ(guard_policy__next_interval_ms(&p, &st), 1000, "10 LOW, steady");

	/* Far, but 10G/s: LOW in 2.7 s, so a quarter of that. */
	guard_state__init(&st);
	s = sample(0, 40000);
	guard_policy__decide(&p, &st, &s, NULL, 0);
	s = sample(1000, 30000);
	guard_policy__decide(&p, &st, &s, NULL, 0);
	CHECK_EQ(guard_policy__next_interval_ms(&p, &st), 675, "fast fall");
	/* 8000M falling 4000M in 500 ms: LOW in 625 ms; distance alone says 400. */
	guard_state__init(&st);
	s = sample(0, 12000);
	guard_policy__decide(&p, &st, &s, NULL, 0);
	s = sample(500, 8000);
	guard_policy__decide(&p, &st, &s, NULL, 0);
	CHECK_EQ(guard_policy__next_interval_ms(&p, &st), 156, "falling near");
	/* Never under the minimum, however fast. */
	s = sample(510, 7000);
	guard_policy__decide(&p, &st, &s, NULL, 0);
	CHECK_EQ(guard_policy__next_interval_ms(&p, &st), 100, "clamped");
	/* A slow leak far away does not speed it up. */
	guard_state__init(&st);
	s = sample(0, 60000);
	guard_policy__decide(&p, &st, &s, NULL, 0);
	s = sample(1000, 59999);
	guard_policy__decide(&p, &st, &s, NULL, 0);
	CHECK_EQ(guard_policy__next_interval_ms(&p, &st), 1000, "slow leak");
}

static void test_victim_choice(void)
{
	struct guard_policy p = policy(NULL);
	struct guard_candidate c[] = {
		{ .pid = 10, .host_bytes = 5 * GIB, .in_scope = true },
		{ .pid = 11, .host_bytes = 8 * GIB, .in_scope = true, .protected = true },
		{ .pid = 12, .host_bytes = 9 * GIB },
		{ .pid = 13, .host_bytes = 7 * GIB, .in_scope = true, .already_stopped = true },
		{ .pid = 20, .host_bytes = 6 * GIB, .in_scope = true },
		{ .pid = 14, .host_bytes = 6 * GIB, .in_scope = true },
		{ .pid = 15, .in_scope = true },
	};
	struct guard_candidate none[] = {
		{ .pid = 11, .host_bytes = 8 * GIB, .in_scope = true, .protected = true },
		{ .pid = 12, .host_bytes = 9 * GIB },
		{ .pid = 13, .host_bytes = 7 * GIB, .in_scope = true, .already_stopped = true },
		{ .pid = 15, .in_scope = true },
	};
	struct guard_sample s1 = sample(0, 6000), s2 = sample(100, 2000);
	struct guard_state st;
	struct guard_action a;

	guard_state__init(&st);
	guard_policy__decide(&p, &st, &s1, c, 7);
	a = guard_policy__decide(&p, &st, &s2, c, 7);
	CHECK_EQ(a.kind, GUARD_STOP, "stop");
	CHECK_EQ(a.pid, 14, "most bytes among those allowed; the lower pid of a tie");
	CHECK_EQ(a.host_bytes, 6 * GIB, "bytes");

	guard_state__init(&st);
	guard_policy__decide(&p, &st, &s1, none, 4);
	a = guard_policy__decide(&p, &st, &s2, none, 4);
	CHECK_EQ(a.kind, GUARD_NONE, "nobody");
	CHECK_EQ(a.rule, GUARD_RULE_NO_VICTIM, "reason");
	CHECK_EQ(a.pid, 0, "pid");
	CHECK(!strcmp(a.text, "drop 3.9G in one sample, 2.0G left < low 2.9G; no victim among 4 processes (1 protected, 1 out of scope, 1 stopped, 1 without GPU memory)"),
	      "text", "got '%s'", a.text);
	CHECK(!strcmp(guard_rule__name(a.rule), "no_victim"), "name", "got %s",
	      guard_rule__name(a.rule));

	guard_state__init(&st);
	guard_policy__decide(&p, &st, &s1, NULL, 0);
	a = guard_policy__decide(&p, &st, &s2, NULL, 0);
	CHECK(strstr(a.text, "; no victim among 0 processes") != NULL, "empty", "got '%s'",
	      a.text);
}

static void parse_ok(const char *s, uint64_t total, uint64_t want)
{
	uint64_t v = 0;
	int err = parse_size_or_percent(s, total, &v);

	CHECK(!err && v == want, s, "err %d value %llu, expected %llu", err,
	      (unsigned long long)v, (unsigned long long)want);
}

static void parse_bad(const char *s, int want)
{
	uint64_t v = 0;
	int err = parse_size_or_percent(s, 100 * GIB, &v);

	CHECK(err == want, s, "err %d, expected %d", err, want);
}

static void test_parse_thresholds(void)
{
	char err[256];
	uint64_t v;

	parse_ok("2G", TOTAL, 2 * GIB);
	parse_ok("1536M", TOTAL, 1536 * MIB);
	parse_ok("4096", TOTAL, 4096);
	parse_ok("64K", TOTAL, 64 << 10);
	parse_ok("5%", 100 * GIB, 5 * GIB);
	parse_ok("2.5%", 100 * GIB, 5 * GIB / 2);
	parse_ok("0.5%", 100 * GIB, GIB / 2);
	parse_ok("99.9999%", 1000000, 999999);
	parse_ok("0.0001%", 1000000, 1);
	parse_ok("05%", 100, 5);
	parse_ok("50%", UINT64_MAX, UINT64_MAX / 2);
	parse_bad("", -EINVAL);
	parse_bad("%", -EINVAL);
	parse_bad("-5%", -EINVAL);
	parse_bad("-1", -EINVAL);
	parse_bad("1e9", -EINVAL);
	parse_bad("1e9%", -EINVAL);
	parse_bad("5 %", -EINVAL);
	parse_bad(" 5%", -EINVAL);
	parse_bad("5%%", -EINVAL);
	parse_bad("5%x", -EINVAL);
	parse_bad("2.%", -EINVAL);
	parse_bad(".5%", -EINVAL);
	parse_bad("2.55555%", -EINVAL);
	parse_bad("nan%", -EINVAL);
	parse_bad("0x10", -EINVAL);
	parse_bad("1.5G", -EINVAL);
	parse_bad("2X", -EINVAL);
	parse_bad("101%", -ERANGE);
	parse_bad("100%", -ERANGE);
	parse_bad("100.0001%", -ERANGE);
	parse_bad("0%", -ERANGE);
	parse_bad("0.0000%", -ERANGE);
	parse_bad("99999999999999999999%", -ERANGE);
	parse_bad("99999999999999999999", -ERANGE);
	parse_bad("17179869184G", -ERANGE);

	CHECK_EQ(guard_policy__parse_threshold("floor", "0", TOTAL, &v, err, sizeof(err)), -EINVAL,
		 "zero");
	CHECK(!strcmp(err, "invalid floor '0': must be above 0"), "zero msg", "got '%s'", err);
	CHECK_EQ(guard_policy__parse_threshold("--low", "101%", TOTAL, &v, err, sizeof(err)),
		 -EINVAL, "101%");
	CHECK(!strcmp(err, "invalid --low '101%': a percentage of MemTotal must be above 0 and below 100"),
	      "101% msg", "got '%s'", err);
	CHECK_EQ(guard_policy__parse_threshold("drop", "1e9", TOTAL, &v, err, sizeof(err)), -EINVAL,
		 "1e9");
	CHECK(!strcmp(err, "invalid drop '1e9': expected a size (2G, 1536M, 4096) or a percentage of MemTotal (5%, 2.5%)"),
	      "1e9 msg", "got '%s'", err);
	CHECK_EQ(guard_policy__parse_threshold("drop", "99999999999999999999", TOTAL, &v, err,
					       sizeof(err)), -EINVAL, "huge");
	CHECK(!strcmp(err, "invalid drop '99999999999999999999': too large"), "huge msg",
	      "got '%s'", err);
}

static void defaults_are(uint64_t total, uint64_t floor_mib, uint64_t low_mib, uint64_t drop_mib)
{
	struct guard_policy p;
	char err[256] = "", name[32];

	snprintf(name, sizeof(name), "%lluG host", (unsigned long long)(total / GIB));
	CHECK(!guard_policy__init(&p, total, NULL, NULL, NULL, NULL, err, sizeof(err)), name,
	      "defaults rejected: %s", err);
	CHECK(p.floor == floor_mib * MIB && p.low == low_mib * MIB && p.drop == drop_mib * MIB,
	      name, "floor %llu low %llu drop %llu MiB", (unsigned long long)(p.floor / MIB),
	      (unsigned long long)(p.low / MIB), (unsigned long long)(p.drop / MIB));
	CHECK(p.floor_default && p.low_default && p.drop_default && !p.auto_resume_above, name,
	      "flags");
	CHECK_EQ(p.metric, GUARD_METRIC_AVAILABLE, name);
}

static void test_default_scaling(void)
{
	defaults_are(4 * GIB, 312, 375, 312);
	defaults_are(24 * GIB, 1875, 2250, 1875);
	defaults_are(32 * GIB, 2500, 3000, 2500);
	defaults_are(128 * GIB, 2500, 3000, 2500);
	defaults_are(1 * GIB, 78, 96, 78);	/* LOW's minimum */
	defaults_are(256 * MIB, 64, 96, 64);	/* every minimum */
}

static void combo_bad(uint64_t total, const char *floor, const char *low, const char *drop,
		      const char *resume, const char *want)
{
	struct guard_policy p;
	char err[256] = "";
	int ret = guard_policy__init(&p, total, floor, low, drop, resume, err, sizeof(err));

	CHECK(ret == -EINVAL && !strcmp(err, want), want, "ret %d, got '%s'", ret, err);
	CHECK(!strchr(err, '\n'), want, "not one line");
}

static void test_bad_combinations(void)
{
	struct guard_policy p;
	char err[256] = "";

	combo_bad(TOTAL, "3G", "2G", NULL, NULL, "floor 3G must be below low 2G");
	combo_bad(TOTAL, "2G", "2G", NULL, NULL, "floor 2G must be below low 2G");
	combo_bad(TOTAL, NULL, "1G", NULL, NULL, "the default floor 2.4G must be below low 1G");
	combo_bad(TOTAL, "10%", "5%", NULL, NULL, "floor 10% (6.4G) must be below low 5% (3.2G)");
	combo_bad(TOTAL, NULL, "80G", NULL, NULL, "low 80G must be below MemTotal 64G");
	combo_bad(TOTAL, NULL, NULL, "64G", NULL, "drop 64G must be below MemTotal 64G");
	combo_bad(TOTAL, NULL, NULL, NULL, "2G", "auto-resume 2G must be above the default low 2.9G");
	combo_bad(TOTAL, NULL, NULL, NULL, "3000M",
		  "auto-resume 3000M must be above the default low 2.9G");
	combo_bad(TOTAL, NULL, NULL, NULL, "70G", "auto-resume 70G must be below MemTotal 64G");
	combo_bad(2 * GIB, "3G", "4G", NULL, NULL, "low 4G must be below MemTotal 2.0G");
	combo_bad(TOTAL, "0", NULL, NULL, NULL, "invalid floor '0': must be above 0");
	combo_bad(TOTAL, NULL, "0%", NULL, NULL,
		  "invalid low '0%': a percentage of MemTotal must be above 0 and below 100");
	combo_bad(TOTAL, NULL, NULL, "junk", NULL,
		  "invalid drop 'junk': expected a size (2G, 1536M, 4096) or a percentage of MemTotal (5%, 2.5%)");
	combo_bad(TOTAL, NULL, NULL, NULL, "%",
		  "invalid auto-resume '%': expected a size (2G, 1536M, 4096) or a percentage of MemTotal (5%, 2.5%)");

	CHECK(!guard_policy__init(&p, TOTAL, "5%", "10%", "2.5%", "20%", err, sizeof(err)),
	      "percentages", "%s", err);
	CHECK(p.floor == TOTAL / 20 && p.low == TOTAL / 10 && p.drop == TOTAL / 40 &&
	      p.auto_resume_above == TOTAL / 5 && !p.floor_default, "percentages", "wrong values");
	CHECK_EQ(p.restop, p.floor / 8, "restop");
}

int main(void)
{
	RUN_SUBTEST(test_spike_recovers);
	RUN_SUBTEST(test_big_drop_below_low);
	RUN_SUBTEST(test_big_drop_above_low);
	RUN_SUBTEST(test_kernel_stop_answers_the_fall);
	RUN_SUBTEST(test_slow_slide_two_samples);
	RUN_SUBTEST(test_after_stop_needs_further_fall);
	RUN_SUBTEST(test_metric_free);
	RUN_SUBTEST(test_auto_resume_hysteresis);
	RUN_SUBTEST(test_interval);
	RUN_SUBTEST(test_victim_choice);
	RUN_SUBTEST(test_parse_thresholds);
	RUN_SUBTEST(test_default_scaling);
	RUN_SUBTEST(test_bad_combinations);
	return CHECK_EXIT();
}
