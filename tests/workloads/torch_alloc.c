// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * torch_alloc: a training job on PyTorch's CUDA caching allocator, in
 * miniature (caching_allocator.c), against the fake libcuda.so.1 and the
 * fake libc10.so. The allocator reports every block allocation and free to
 * libc10's profiler hook as PyTorch does; torch_alloc writes what it
 * reported as JSON: the ground truth for a tool that reads the allocator's
 * own totals.
 *
 * usage: torch_alloc [-m MODE] [-s STEPS] [-t TENSORS] [-b SIZE] [-p WEIGHTS]
 *                    [-g PCT] [-k KEEP] [-r SIZE] [-j STEPS] [-e] [-3 | -L]
 *                    [-C | -X] [-V] [-M SIZE] [-w MS] [-d MS] [-o FILE]
 *
 * The job: WEIGHTS (-p, default 2) tensors of 20 MiB, one segment each,
 * allocated first and kept; then STEPS (-s, default 20) steps, each
 * allocating TENSORS (-t, default 8) tensors and freeing them in reverse
 * order. Tensor i of a step has the shape (i % 8) from, in quarters of
 * SIZE (-b, default 1M), 12 3 1 20 6 2 48 80, times 1 + i / 8, less
 * 100 * (i % 8 + 1) bytes, so that with 1M: 3M 768K 256K 5M 1.5M 512K 12M
 * 20M (small, split large and exact large segments). -m MODE:
 *   steady    the shapes repeat: reserved flat after the first step
 *   fragment  every shape grows PCT % (-g, default 5) per step: the cached
 *             blocks stop fitting, reserved keeps growing, allocated at the
 *             end of each step does not
 *   leak      the first KEEP (-k, default 1) tensors of every step are
 *             never freed: allocated grows, and reserved with it
 *   cache     step 1 is a peak, every tensor 4 times its shape: reserved
 *             stays at the peak, a large cached share, flat after it
 *   empty     as steady, then empty_cache, then one more 20 MiB tensor so
 *             that the hook reports the new totals: reserved == allocated
 *   burst     steady for 20 steps, then fragment for 50 (the shapes grow
 *             PCT % a step), then the first shapes again: steps served
 *             from the cache the burst left, reserved flat, most of it
 *             unused (a fragmentation episode, then cache-held)
 * Two slides too slow for a window of seconds, for compressed horizons:
 *   creep     as steady, and at the end of every step one block of SIZE
 *             (-r, default 64K) kept: allocated's floor rises SIZE a step
 *             (a leak; reserved follows in 2 MiB segments)
 *   spread    as steady, and a ring of TA_RING tensors of 12 MiB allocated
 *             and freed with the step's own; every STEPS (-j, default 15)
 *             steps the next of them grows by 2 MiB, which no cached block
 *             fits: a new segment, the old one left idle. Reserved rises
 *             by about 12 MiB a jump and its unused part with it, the floor
 *             flat (fragmentation)
 * One for figures that no hook call tells:
 *   churn     as steady, and empty_cache after every step (its segments go
 *             back: no hook call, so the hook's reserved stays what the
 *             step's last block free said); in the middle step, before it,
 *             one tensor of 96 MiB allocated and freed (a segment of its
 *             own, made and given back at once: the job's peak reserved).
 *             Then 2 s idle, so that a live tool reads the last figures
 * Nothing is freed at exit, as in PyTorch.
 *
 * -M SIZE is the GPU's memory (default 4G): reserving more ends the run
 * (out of device memory, exit status 1), so that no setting takes more
 * than that of the host's. -e, or PYTORCH_CUDA_ALLOC_CONF=
 * expandable_segments:True: expandable segments, each pool reserving
 * 1.125 x that address space. -3 calls
 * the old 3-argument hook (no totals), -L the form with int64 totals.
 * -C adds CPU allocator calls to the same hook (c10::Device(kCPU), i.e.
 * {0, -1}; a 256 KiB buffer reported at the start of every step and freed
 * as the step's last hook call, with the CPU totals), which a tool must
 * not count; -X does the same on another backend's device, {XPU, 0}
 * (index 0, as CUDA's first device: only the type tells them apart). -V checks the allocator's invariants after every call (blocks
 * tile their segments, free neighbours coalesced, the free lists, pages
 * mapped under mapped blocks only, totals equal to the blocks): the
 * self-test of this double.
 *
 * -w MS sleeps after every step (a live tool can watch); -d MS prints the
 * pid on stderr and sleeps before cuInit (a tracer can attach). -o FILE
 * gets the JSON (written whole, then renamed), else stdout. Bad options:
 * the usage line, exit status 2. A failing fake-libcuda call: one line,
 * exit status 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "c10_fake.h"
#include "caching_allocator.h"
#include "cuda_fake.h"

#define TA_NSHAPES	8
#define TA_WEIGHT_SIZE	CA_LARGE_BUFFER	/* exactly one segment or page */
#define TA_PEAK_STEP	1
#define TA_PEAK_FACTOR	4
#define TA_CPU_SIZE	(256 * CA_KiB)
#define TA_MAX_TENSORS	1024
#define TA_BURST_FROM	20	/* burst: its first growing step */
#define TA_BURST_STEPS	50
#define TA_RING		8	/* spread: its growing tensors */
#define TA_RING_SIZE	(12 * CA_MiB)	/* over 10 MiB: each its own segment */
#define TA_RING_JUMP	(2 * CA_MiB)	/* a large segment's rounding */
#define TA_BLIP_SIZE	(96 * CA_MiB)	/* churn: over 10 MiB, its own segment */
#define TA_CHURN_IDLE_MS 2000

static const unsigned int ta_quarters[TA_NSHAPES] = {
	12, 3, 1, 20, 6, 2, 48, 80,
};

enum ta_mode {
	TA_STEADY, TA_FRAGMENT, TA_LEAK, TA_CACHE, TA_EMPTY, TA_BURST, TA_CREEP, TA_SPREAD,
	TA_CHURN, TA_NMODES
};

static const char *const ta_mode_names[TA_NMODES] = {
	"steady", "fragment", "leak", "cache", "empty", "burst", "creep", "spread", "churn",
};

static struct {
	enum ta_mode mode;
	unsigned long steps;
	unsigned int tensors;
	uint64_t base;
	unsigned int weights;
	unsigned int growth_pct;
	unsigned int keep;
	uint64_t creep;		/* -r: bytes kept a step */
	unsigned long jump;	/* -j: steps between the ring's jumps */
	bool cpu;
	bool other;		/* -X: the CPU buffer on {XPU, 0} */
	struct ca_config ca;
	unsigned long wait_ms;
	unsigned long delay_ms;
	const char *out;
} opt = {
	.mode = TA_STEADY,
	.steps = 20,
	.tensors = 8,
	.base = CA_MiB,
	.weights = 2,
	.growth_pct = 5,
	.keep = 1,
	.creep = 64 * CA_KiB,
	.jump = 15,
	.ca = { .hook = CA_HOOK_SIZE_T, .gpu_mem = 4ULL << 30 },
};

/* The state at the end of a step, as the hook last reported it. */
struct ta_step {
	uint64_t t_mono_ns;
	uint64_t allocated, reserved, peak_allocated, peak_reserved;
	unsigned long long allocs, frees;
};

static struct {
	struct ta_step *steps;
	struct ta_step after_empty;	/* right after empty_cache */
	uint64_t emptied;		/* reserved bytes it gave back */
} ta;

/* ---- the job ---- */

static uint64_t ta_shape(unsigned int i, double scale)
{
	uint64_t q = ta_quarters[i % TA_NSHAPES] * (1 + i / TA_NSHAPES);
	uint64_t size = opt.base / 4 * q - 100 * (i % TA_NSHAPES + 1);

	return (uint64_t)((double)size * scale);
}

static void ta_sleep_ms(unsigned long ms)
{
	struct timespec ts = {
		.tv_sec = ms / 1000,
		.tv_nsec = (long)(ms % 1000) * 1000000L,
	};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void ta_snapshot(struct ta_step *s)
{
	const struct ca_stats *st = ca_stats();
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	s->t_mono_ns = (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
	s->allocated = st->allocated;
	s->reserved = st->reserved;
	s->peak_allocated = st->peak_allocated;
	s->peak_reserved = st->peak_reserved;
	s->allocs = st->allocs;
	s->frees = st->frees;
}

/* spread: the ring's tensors for this step, allocated after the step's own. */
static void ta_ring(unsigned long step, struct ca_block **t)
{
	unsigned long jumps = step / opt.jump;
	unsigned int i;

	for (i = 0; i < TA_RING; i++)
		t[i] = ca_malloc(TA_RING_SIZE + TA_RING_JUMP * (jumps / TA_RING +
								(i < jumps % TA_RING)));
}

/* churn: a segment made and given back in the middle step, then empty_cache. */
static void ta_churn(unsigned long step)
{
	if (step == opt.steps / 2)
		ca_free(ca_malloc(TA_BLIP_SIZE));
	ca_empty_cache();
}

static void ta_run(void)
{
	struct ca_block *t[TA_MAX_TENSORS], *ring[TA_RING];
	double scale = 1.0;
	unsigned long step;
	unsigned int i;
	void *cpu = NULL;

	for (i = 0; i < opt.weights; i++)
		ca_malloc(TA_WEIGHT_SIZE);
	for (step = 0; step < opt.steps; step++) {
		double s = scale;

		if (opt.mode == TA_CACHE && step == TA_PEAK_STEP)
			s = TA_PEAK_FACTOR;
		if (opt.cpu) {
			cpu = malloc(TA_CPU_SIZE);
			if (!cpu)
				ca_die("out of memory");
			ca_report_cpu(cpu, (int64_t)TA_CPU_SIZE);
		}
		for (i = 0; i < opt.tensors; i++)
			t[i] = ca_malloc(ta_shape(i, s));
		if (opt.mode == TA_SPREAD)
			ta_ring(step, ring);
		for (i = TA_RING; opt.mode == TA_SPREAD && i-- > 0;)
			ca_free(ring[i]);
		for (i = opt.tensors; i-- > 0;)
			if (opt.mode != TA_LEAK || i >= opt.keep)
				ca_free(t[i]);
		if (opt.mode == TA_CREEP)
			ca_malloc(opt.creep);
		if (opt.mode == TA_CHURN)
			ta_churn(step);
		if (opt.cpu) {
			ca_report_cpu(cpu, -(int64_t)TA_CPU_SIZE);
			free(cpu);
		}
		ta_snapshot(&ta.steps[step]);
		if (opt.mode == TA_FRAGMENT || (opt.mode == TA_BURST && step >= TA_BURST_FROM &&
						 step < TA_BURST_FROM + TA_BURST_STEPS))
			scale *= 1.0 + opt.growth_pct / 100.0;
		if (opt.mode == TA_BURST && step + 1 == TA_BURST_FROM + TA_BURST_STEPS)
			scale = 1.0;	/* back to the first shapes, from cache */
		if (opt.wait_ms)
			ta_sleep_ms(opt.wait_ms);
	}
	if (opt.mode == TA_CHURN)
		ta_sleep_ms(TA_CHURN_IDLE_MS);
	if (opt.mode != TA_EMPTY)
		return;
	ta.emptied = ca_empty_cache();
	ta_snapshot(&ta.after_empty);
	/* the next batch: the hook now reports what empty_cache left */
	ca_malloc(TA_WEIGHT_SIZE);
	if (opt.wait_ms)
		ta_sleep_ms(opt.wait_ms);
}

/* ---- report ---- */

static const char *ta_bool(bool v)
{
	return v ? "true" : "false";
}

static void ta_json_state(FILE *f, const struct ta_step *s)
{
	fprintf(f, "\"t_mono_ns\": %llu, \"allocated\": %llu, \"reserved\": %llu, "
		"\"peak_allocated\": %llu, \"peak_reserved\": %llu, "
		"\"allocs\": %llu, \"frees\": %llu",
		(unsigned long long)s->t_mono_ns,
		(unsigned long long)s->allocated,
		(unsigned long long)s->reserved,
		(unsigned long long)s->peak_allocated,
		(unsigned long long)s->peak_reserved, s->allocs, s->frees);
}

static void ta_json_head(FILE *f, const struct fakecuda_stats *st)
{
	static const char *const syms[] = {
		[CA_HOOK_SIZE_T] = C10_REPORT_SYM,
		[CA_HOOK_INT64] = C10_REPORT_I64_SYM,
		[CA_HOOK_V1] = C10_REPORT_V1_SYM,
	};

	fprintf(f, "{\n  \"pid\": %d,\n  \"mode\": \"%s\",\n"
		"  \"expandable\": %s,\n",
		(int)getpid(), ta_mode_names[opt.mode],
		ta_bool(opt.ca.expandable));
	fprintf(f, "  \"hook\": {\"symbol\": \"%s\", \"args\": %d, "
		"\"totals\": %s},\n  \"device\": {\"type\": %d, \"index\": 0},\n",
		syms[opt.ca.hook], opt.ca.hook == CA_HOOK_V1 ? 3 : 5,
		ta_bool(opt.ca.hook != CA_HOOK_V1), C10_DEVICE_CUDA);
	fprintf(f, "  \"config\": {\"steps\": %lu, \"tensors\": %u, "
		"\"base\": %llu, \"weights\": %u, \"weight_bytes\": %llu, "
		"\"growth_pct\": %u, \"keep\": %u, \"creep\": %llu, \"jump\": %lu, "
		"\"peak_step\": %d, "
		"\"peak_factor\": %d, \"cpu\": %s, \"cpu_device_type\": %d, \"gpu_mem\": %llu, "
		"\"wait_ms\": %lu},\n",
		opt.steps, opt.tensors, (unsigned long long)opt.base,
		opt.weights, (unsigned long long)TA_WEIGHT_SIZE,
		opt.mode == TA_FRAGMENT || opt.mode == TA_BURST ? opt.growth_pct : 0,
		opt.mode == TA_LEAK ? opt.keep : 0,
		(unsigned long long)(opt.mode == TA_CREEP ? opt.creep : 0),
		opt.mode == TA_SPREAD ? opt.jump : 0,
		opt.mode == TA_CACHE ? TA_PEAK_STEP : -1,
		opt.mode == TA_CACHE ? TA_PEAK_FACTOR : 1, ta_bool(opt.cpu),
		opt.other ? C10_DEVICE_XPU : C10_DEVICE_CPU,
		(unsigned long long)opt.ca.gpu_mem, opt.wait_ms);
	fprintf(f, "  \"fake\": {\"mode\": \"%s\", \"pool\": %s, "
		"\"populated_bytes\": %llu, \"released_bytes\": %llu},\n",
		st->mode == FAKECUDA_MODE_DISCRETE ? "discrete" : "unified",
		ta_bool(st->pool_enabled), st->populated_total,
		st->released_total);
}

static void ta_json_calls(FILE *f, const struct ca_stats *ca)
{
	static const unsigned int apis[] = {
		FAKECUDA_API_cuMemAlloc_v2, FAKECUDA_API_cuMemFree_v2,
		FAKECUDA_API_cuMemAddressReserve, FAKECUDA_API_cuMemAddressFree,
		FAKECUDA_API_cuMemCreate, FAKECUDA_API_cuMemMap,
		FAKECUDA_API_cuMemSetAccess, FAKECUDA_API_cuMemUnmap,
		FAKECUDA_API_cuMemRelease,
	};
	size_t i;

	fprintf(f, "  \"segment_calls\": {");
	for (i = 0; i < sizeof(apis) / sizeof(apis[0]); i++)
		fprintf(f, "%s\n    \"%s\": {\"calls\": %llu, \"bytes\": %llu}",
			i ? "," : "", fakecuda_api_name(apis[i]),
			ca->calls[apis[i]], ca->bytes[apis[i]]);
	fprintf(f, "\n  },\n");
}

static void ta_json(FILE *f, const struct fakecuda_stats *st)
{
	const struct ca_stats *ca = ca_stats();
	unsigned long i;

	ta_json_head(f, st);
	ta_json_calls(f, ca);
	fprintf(f, "  \"per_step\": [");
	for (i = 0; i < opt.steps; i++) {
		fprintf(f, "%s\n    {\"step\": %lu, ", i ? "," : "", i);
		ta_json_state(f, &ta.steps[i]);
		fprintf(f, "}");
	}
	fprintf(f, "\n  ],\n  \"empty_cache\": ");
	if (opt.mode == TA_EMPTY) {
		fprintf(f, "{\"released_bytes\": %llu, ",
			(unsigned long long)ta.emptied);
		ta_json_state(f, &ta.after_empty);
		fprintf(f, "},\n");
	} else {
		fprintf(f, "null,\n");
	}
	fprintf(f, "  \"final\": {\"allocated\": %llu, \"reserved\": %llu, "
		"\"peak_allocated\": %llu, \"peak_reserved\": %llu, "
		"\"allocs\": %llu, \"frees\": %llu, \"alloc_bytes\": %llu, "
		"\"free_bytes\": %llu},\n",
		(unsigned long long)ca->allocated,
		(unsigned long long)ca->reserved,
		(unsigned long long)ca->peak_allocated,
		(unsigned long long)ca->peak_reserved, ca->allocs, ca->frees,
		ca->alloc_bytes, ca->free_bytes);
	if (ca->reported)
		fprintf(f, "  \"last_report\": {\"ptr\": %llu, \"size\": %lld, "
			"\"allocated\": %llu, \"reserved\": %llu},\n",
			(unsigned long long)ca->last_ptr,
			(long long)ca->last_size,
			(unsigned long long)ca->last_allocated,
			(unsigned long long)ca->last_reserved);
	else
		fprintf(f, "  \"last_report\": null,\n");
	fprintf(f, "  \"cpu\": {\"allocs\": %llu, \"frees\": %llu, "
		"\"bytes\": %llu}\n}\n",
		ca->cpu_allocs, ca->cpu_frees, ca->cpu_bytes);
}

/* Whole, then renamed; a device (-o /dev/null) is written in place. */
static int ta_write_report(const struct fakecuda_stats *st)
{
	char tmp[4096];
	struct stat sb;
	FILE *f;

	if (!opt.out) {
		ta_json(stdout, st);
		return fflush(stdout) ? -1 : 0;
	}
	if (!stat(opt.out, &sb) && !S_ISREG(sb.st_mode)) {
		f = fopen(opt.out, "w");
		if (!f)
			return -1;
		ta_json(f, st);
		return fclose(f) ? -1 : 0;
	}
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", opt.out) >= (int)sizeof(tmp))
		return -1;
	f = fopen(tmp, "w");
	if (!f)
		return -1;
	ta_json(f, st);
	if (fclose(f))
		return -1;
	return rename(tmp, opt.out);
}

/* ---- command line ---- */

static void __attribute__((noreturn)) ta_usage(void)
{
	fprintf(stderr, "usage: torch_alloc [-m steady|fragment|leak|cache|empty|burst|creep|spread|churn] [-s STEPS] [-t TENSORS] [-b SIZE] [-p WEIGHTS] [-g PCT] [-k KEEP] [-r SIZE] [-j STEPS] [-e] [-3 | -L] [-C | -X] [-V] [-M SIZE] [-w MS] [-d MS] [-o FILE]\n");
	exit(2);
}

static uint64_t ta_parse_size(const char *s, uint64_t min, uint64_t max)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		ta_usage();
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	}
	if (shift)
		end++;
	if (*end || v > (max >> shift) || (v << shift) < min)
		ta_usage();
	return v << shift;
}

static unsigned long ta_parse_ulong(const char *s, unsigned long min,
				    unsigned long max)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v < min || v > max)
		ta_usage();
	return v;
}

static enum ta_mode ta_parse_mode(const char *s)
{
	int m;

	for (m = 0; m < TA_NMODES; m++)
		if (!strcmp(s, ta_mode_names[m]))
			return m;
	ta_usage();
}

static void ta_parse(int argc, char **argv)
{
	const char *conf = getenv("PYTORCH_CUDA_ALLOC_CONF");
	bool v1 = false, i64 = false;
	int c;

	opt.ca.expandable = conf && strstr(conf, "expandable_segments:True");
	opterr = 0;	/* one line on bad input: the usage */
	while ((c = getopt(argc, argv, "m:s:t:b:p:g:k:r:j:e3LCXVM:w:d:o:")) != -1) {
		switch (c) {
		case 'm':
			opt.mode = ta_parse_mode(optarg);
			break;
		case 's':
			opt.steps = ta_parse_ulong(optarg, 1, 1000000);
			break;
		case 't':
			opt.tensors = ta_parse_ulong(optarg, 1, TA_MAX_TENSORS);
			break;
		case 'b':
			opt.base = ta_parse_size(optarg, 4 * CA_KiB, 1ULL << 30);
			break;
		case 'p':
			opt.weights = ta_parse_ulong(optarg, 0, 1024);
			break;
		case 'g':
			opt.growth_pct = ta_parse_ulong(optarg, 1, 100);
			break;
		case 'k':
			opt.keep = ta_parse_ulong(optarg, 1, TA_MAX_TENSORS);
			break;
		case 'r':
			opt.creep = ta_parse_size(optarg, 512, 1ULL << 30);
			break;
		case 'j':
			opt.jump = ta_parse_ulong(optarg, 1, 1000000);
			break;
		case 'e':
			opt.ca.expandable = true;
			break;
		case '3':
			v1 = true;
			break;
		case 'L':
			i64 = true;
			break;
		case 'C':
			opt.cpu = true;
			break;
		case 'X':
			opt.cpu = opt.other = true;
			ca_set_cpu_device(C10_DEVICE_XPU, 0);
			break;
		case 'V':
			opt.ca.verify = true;
			break;
		case 'M':
			opt.ca.gpu_mem = ta_parse_size(optarg, 64 * CA_MiB,
						       1ULL << 50);
			break;
		case 'w':
			opt.wait_ms = ta_parse_ulong(optarg, 0, 3600000);
			break;
		case 'd':
			opt.delay_ms = ta_parse_ulong(optarg, 0, 3600000);
			break;
		case 'o':
			opt.out = optarg;
			break;
		default:
			ta_usage();
		}
	}
	if (optind != argc || (v1 && i64) || opt.keep > opt.tensors)
		ta_usage();
	if (v1 || i64)
		opt.ca.hook = v1 ? CA_HOOK_V1 : CA_HOOK_INT64;
}

int main(int argc, char **argv)
{
	struct fakecuda_stats st;

	ta_parse(argc, argv);
	ca_init(&opt.ca);
	ta.steps = calloc(opt.steps, sizeof(*ta.steps));
	if (!ta.steps)
		ca_die("out of memory");
	if (opt.delay_ms) {
		fprintf(stderr, "torch_alloc: pid %d, starting in %lu ms\n",
			(int)getpid(), opt.delay_ms);
		ta_sleep_ms(opt.delay_ms);
	}
	CA_CU(cuInit, 0, (0));
	ta_run();
	fakecuda_stats(&st);
	if (ta_write_report(&st)) {
		fprintf(stderr, "torch_alloc: writing the report: %s\n",
			strerror(errno));
		return 1;
	}
	return 0;
}
