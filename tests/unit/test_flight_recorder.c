// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The guard's flight recorder: bounded by time and bytes; dumps replay. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "check.h"
#include "model/cuda_api.h"
#include "rec/flight_recorder.h"

#define NS 1000000000ULL

static char dir[] = "/tmp/umt-flight-XXXXXX";

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
}

static struct umt_call_rec call_at(uint64_t ts, uint32_t pid, uint64_t handle)
{
	struct umt_call_rec r;

	memset(&r, 0, sizeof(r));
	r.type = UMT_REC_CALL;
	r.api = UMT_API_MEM_ALLOC_V2;
	r.ts_ns = ts;
	r.pid = r.tid = pid;
	r.size = 1 << 20;
	r.handle = handle;
	r.pages_taken = 256;
	strcpy(r.comm, "trainer");
	strcpy(r.pcomm, "python3");
	return r;
}

/* Frames whose strings live in buf: the recorder must copy them. */
static size_t frames_for(unsigned int site, struct sym_frame *f, char (*buf)[64])
{
	snprintf(buf[0], 64, "cuMemAlloc_v2");
	snprintf(buf[1], 64, "site_%u", site);
	snprintf(buf[2], 64, "libjob.so");
	f[0] = (struct sym_frame){ .func = buf[0], .module = "libcuda.so.1", .addr = 0x1000 };
	f[1] = (struct sym_frame){ .func = buf[1], .module = buf[2], .addr = 0x2000 + site,
				   .offset = site };
	f[2] = (struct sym_frame){ .module = buf[2], .addr = 0x3000 };
	return 3;
}

static void test_bounded_by_time(void)
{
	struct flight_recorder *fr = flight__new(2 * NS, 64 << 20);
	char buf[3][64];
	struct sym_frame f[3];
	struct flight_stats st;
	struct umt_call_rec r;
	uint64_t t0 = 1000 * NS;
	unsigned int i;

	if (!CHECK(fr, "new", "errno %d", errno))
		return;
	for (i = 0; i < 1000; i++) {	/* 10 s of calls, 10 ms apart */
		r = call_at(t0 + i * 10000000ULL, 7, i);
		flight__add_call(fr, &r, f, frames_for(i % 5, f, buf));
	}
	flight__stats(fr, &st);
	CHECK(st.newest_ns - st.oldest_ns <= 2 * NS, "window", "%llu ns held",
	      (unsigned long long)(st.newest_ns - st.oldest_ns));
	CHECK(st.calls >= 199 && st.calls <= 201, "calls held", "%llu",
	      (unsigned long long)st.calls);
	CHECK_EQ(st.evicted, 1000 - st.events, "evicted");
	CHECK_EQ(st.stacks, 5, "stacks shared");
	flight__expire(fr, t0 + 20 * NS);
	flight__stats(fr, &st);
	CHECK_EQ(st.events, 0, "all expired");
	CHECK_EQ(st.stacks, 0, "stacks freed with their last call");
	flight__free(fr);
}

static void test_bounded_by_bytes(void)
{
	size_t max = 256 << 10;
	struct flight_recorder *fr = flight__new(3600 * NS, max);
	char buf[3][64];
	struct sym_frame f[3];
	struct flight_stats st;
	struct umt_call_rec r;
	struct rec_stop stop;
	uint64_t t0 = 1000 * NS, peak = 0;
	unsigned int i;

	if (!CHECK(fr, "new", "errno %d", errno))
		return;
	memset(&stop, 0, sizeof(stop));
	for (i = 0; i < 50000; i++) {	/* a new stack every call */
		r = call_at(t0 + i * 1000ULL, 7, i);
		CHECK_EQ(flight__add_call(fr, &r, f, frames_for(i, f, buf)), 0, "add");
		if (i % 1000 == 0) {
			stop.ts_ns = r.ts_ns;
			flight__add_stop(fr, &stop);
		}
		flight__stats(fr, &st);
		if (st.bytes > peak)
			peak = st.bytes;
	}
	flight__stats(fr, &st);
	CHECK(peak <= max, "budget", "peak %llu > %zu", (unsigned long long)peak, max);
	CHECK(st.evicted > 40000 && st.calls > 500, "kept the newest", "evicted %llu held %llu",
	      (unsigned long long)st.evicted, (unsigned long long)st.calls);
	CHECK_EQ(st.stacks, st.calls, "a stack per call held");
	CHECK_EQ(st.newest_ns, t0 + 49999 * 1000ULL, "newest kept");
	flight__free(fr);
}

struct seen {
	unsigned int calls, exits, samples, stops, infos, bad;
	uint64_t last_handle;
};

static void on_call(void *ctx, const struct umt_call_rec *r, const struct sym_frame *f, size_t n)
{
	struct seen *s = ctx;
	char want[32];

	snprintf(want, sizeof(want), "site_%llu", (unsigned long long)(r->handle % 5));
	if (n != 3 || strcmp(f[1].func, want) || strcmp(f[1].module, "libjob.so") ||
	    f[2].func || f[1].offset != r->handle % 5 || strcmp(r->pcomm, "python3") ||
	    r->pages_taken != 256 || (s->calls && r->handle != s->last_handle + 1))
		s->bad++;
	s->last_handle = r->handle;
	s->calls++;
}

static void on_exit_rec(void *ctx, const struct umt_proc_exit_rec *r)
{
	((struct seen *)ctx)->exits += r->pid == 7;
}

static void on_sample(void *ctx, const struct rec_sample *r)
{
	((struct seen *)ctx)->samples += r->mem_available == 12345;
}

static void on_stop(void *ctx, const struct rec_stop *r)
{
	((struct seen *)ctx)->stops += !strcmp(r->site, "site_1;main");
}

static void on_info(void *ctx, const struct rec_info *i)
{
	((struct seen *)ctx)->infos += i->dropped == 5;
}

static const struct recording_ops ops = {
	.on_info = on_info,
	.on_call = on_call,
	.on_exit = on_exit_rec,
	.on_sample = on_sample,
	.on_stop = on_stop,
};

static void test_dump_replays(void)
{
	struct flight_recorder *fr = flight__new(5 * NS, 64 << 20);
	struct umt_proc_exit_rec x = { UMT_REC_PROC_EXIT, 7, 0, "trainer" };
	struct rec_info info = { .dropped = 5 };
	char path[256], buf[3][64];
	struct replay_stats st;
	struct sym_frame f[3];
	struct rec_sample smp;
	struct rec_stop stop;
	struct seen s = { 0 };
	struct umt_call_rec r;
	uint64_t t0 = now_ns() - 8 * NS;
	unsigned int i;

	if (!CHECK(fr, "new", "errno %d", errno))
		return;
	snprintf(path, sizeof(path), "%s/dump.umt", dir);
	flight__set_info(fr, &info);
	for (i = 0; i < 8000; i++) {	/* 8 s up to now: the last 5 s are kept */
		r = call_at(t0 + i * 1000000ULL, 7, i);
		flight__add_call(fr, &r, f, frames_for(i % 5, f, buf));
	}
	memset(&smp, 0, sizeof(smp));
	smp.ts_ns = now_ns();
	smp.mem_available = 12345;
	flight__add_sample(fr, &smp);
	memset(&stop, 0, sizeof(stop));
	stop.ts_ns = now_ns();
	strcpy(stop.site, "site_1;main");
	flight__add_stop(fr, &stop);
	x.ts_ns = now_ns();
	flight__add_exit(fr, &x);
	CHECK_EQ(flight__dump(fr, path), 0, "dump");
	CHECK_EQ(flight__dump(fr, path), -EEXIST, "never overwritten");
	CHECK_EQ(recording__replay(path, &ops, &s, &st), 0, "replay");
	CHECK(s.calls >= 4900 && s.calls <= 5001, "the last 5 s of calls", "%u", s.calls);
	CHECK_EQ(s.bad, 0, "calls that differ");
	CHECK(s.exits == 1 && s.samples == 1 && s.stops == 1 && s.infos == 1, "the rest",
	      "exits %u samples %u stops %u infos %u", s.exits, s.samples, s.stops, s.infos);
	CHECK(st.file.complete, "complete", "%s", st.file.why);
	CHECK_EQ(st.stacks, 5, "stacks interned again");
	unlink(path);
	/* A dump after everything aged out is an empty recording, still valid. */
	flight__expire(fr, now_ns() + 60 * NS);
	memset(&s, 0, sizeof(s));
	CHECK_EQ(flight__dump(fr, path), 0, "empty dump");
	CHECK_EQ(recording__replay(path, &ops, &s, &st), 0, "empty replay");
	CHECK(!s.calls && s.infos == 1 && st.file.complete, "empty", "calls %u", s.calls);
	unlink(path);
	flight__free(fr);
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	RUN_SUBTEST(test_bounded_by_time);
	RUN_SUBTEST(test_bounded_by_bytes);
	RUN_SUBTEST(test_dump_replays);
	rmdir(dir);
	return CHECK_EXIT();
}
