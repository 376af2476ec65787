// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "attach/session.h"
#include "export/torch_out.h"
#include "lib/escape.h"
#include "lib/units.h"
#include "model/cuda_api.h"

#define SITES_NAMED 3		/* call sites named in a leak's advice */
#define SITE_FRAMES 3		/* frames of each, past the entry point */

struct out {
	char *buf;
	size_t len, at;
};

static void put(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->at >= o->len)
		return;
	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->at, o->len - o->at, fmt, ap);
	va_end(ap);
	if (n > 0)
		o->at += (size_t)n < o->len - o->at ? (size_t)n : o->len - o->at - 1;
}

/*
 * "cuMemAlloc_v2 < f+0x1 (lib) < g+0x2 (lib)" for the call sites of the
 * process's segments, most bytes first (the model keeps them per process).
 */
static void name_sites(struct out *o, const struct torch_verdict *v,
		       const struct callsites *cs)
{
	const struct callsite *c;
	unsigned int i, named = 0;
	size_t j;

	for (i = 0; cs && i < v->n_sites && named < SITES_NAMED; i++) {
		c = callsites__get(cs, v->sites[i]);
		if (!c)
			continue;
		put(o, "%s %s", named++ ? ";" : "; the call sites whose allocations grow:",
		    cuda_api__name(c->api));
		for (j = 1; j < c->n_frames && j <= SITE_FRAMES; j++)
			put(o, " < %s", c->frames[j]);
	}
	if (!named)
		put(o, "; none of its GPU allocation calls was seen (run `umtrace report "
		    "-- COMMAND` from its start for the call sites of its segments)");
}

const char *torch_out__advice(const struct torch_verdict *v, const struct callsites *sites,
			      char *buf, size_t len)
{
	struct out o = { buf, len, 0 };
	unsigned int a = v->advice;
	char b[16];

	if (len)
		buf[0] = '\0';
	if (a & TORCH_ADV_EXPANDABLE)
		put(&o, "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True%s (segments then "
		    "grow and shrink by 2 MiB or 20 MiB pages, so freed space serves any shape)",
		    a & TORCH_ADV_NO_MAX_SPLIT ? ", without max_split_size_mb (the two together "
		    "let reserved grow without bound, pytorch#123548)" : "");
	else if (a & TORCH_ADV_NO_MAX_SPLIT)
		put(&o, "take max_split_size_mb out of PYTORCH_CUDA_ALLOC_CONF: with expandable "
		    "segments it lets reserved grow without bound (pytorch#123548)");
	if (a & TORCH_ADV_EMPTY_CACHE)
		put(&o, "%scall torch.cuda.empty_cache() after the peak or between phases: it "
		    "hands the %s no tensor used back to the driver", o.at ? "; " : "",
		    fmt_bytes(v->unused, b, sizeof(b)));
	if (a & TORCH_ADV_FRACTION)
		put(&o, "%sor cap the cache with torch.cuda.set_per_process_memory_fraction(F): "
		    "past F of the GPU the allocator frees its cache and retries", o.at ? "; " : "");
	if (a & TORCH_ADV_LEAK_SITES) {
		put(&o, "%sallocated's floor (its lowest between steps) grows: tensors outlive "
		    "their step (a loss kept with its graph, a list or cache of outputs)",
		    o.at ? "; " : "");
		name_sites(&o, v, sites);
	}
	return buf;
}

const char *torch_out__verdict(const struct torch_verdict *v)
{
	return v->warmup ? "warm-up" : torch_kind__name(v->kind);
}

/* A change within this is "flat": the model's least significant growth. */
#define FLAT (2ULL << 20)

static void put_change(struct out *o, const char *what, const uint64_t *x)
{
	char b[24];
	int64_t d = (int64_t)(x[1] - x[0]);

	if (d < (int64_t)FLAT && d > -(int64_t)FLAT)
		put(o, "%s flat", what);
	else
		put(o, "%s %s", what, fmt_bytes_signed(d, true, b, sizeof(b)));
}

static double rel_s(uint64_t ns, uint64_t t0_ns)
{
	return ns > t0_ns ? (ns - t0_ns) / 1e9 : 0.0;
}

/* "reserved +4.3G, floor flat, unused 4.3G (97%)", the figures' story. */
static void episode_figures(struct out *o, const struct torch_episode *e)
{
	char b[2][24];
	bool reserved = e->reserved[0] || e->reserved[1];

	if (reserved) {
		put_change(o, "reserved", e->reserved);
		put(o, ", ");
	}
	put_change(o, "floor", e->floor);
	if (reserved)
		put(o, ", unused %s (%.0f%%)", fmt_bytes(e->unused[1], b[0], sizeof(b[0])),
		    e->reserved[1] ? 100.0 * e->unused[1] / e->reserved[1] : 0.0);
	if (e->horizon_s)
		put(o, "; over %s, %s %s/h", fmt_seconds(e->horizon_s, b[0], sizeof(b[0])),
		    e->kind == TORCH_LEAK ? "the floor" : "reserved",
		    fmt_bytes_signed((int64_t)e->per_hour, true, b[1], sizeof(b[1])));
}

const char *torch_out__episode(const struct torch_episode *e, uint64_t t0_ns, char *buf,
			       size_t len)
{
	struct out o = { buf, len, 0 };

	if (len)
		buf[0] = '\0';
	put(&o, "%s %.1fs-%.1fs: ", torch_kind__name(e->kind), rel_s(e->start_ns, t0_ns),
	    rel_s(e->end_ns, t0_ns));
	episode_figures(&o, e);
	return buf;
}

static const char *es_name(enum torch_es es)
{
	return es == TORCH_ES_ON ? "on" : es == TORCH_ES_OFF ? "off" : "unknown";
}

/*
 * The root cause when the window says otherwise now: "fragmentation from
 * 4.0s to 10.6s (reserved +4.3G, floor flat), then ", before the window's.
 */
static void cause_text(const struct torch_verdict *v, FILE *f)
{
	char buf[256];
	struct out o = { buf, sizeof(buf), 0 };

	if (!v->has_cause || v->cause.kind == v->kind)
		return;
	buf[0] = '\0';
	episode_figures(&o, &v->cause);
	fprintf(f, "%s from %.1fs to %.1fs (%s), then ", torch_kind__name(v->cause.kind),
		rel_s(v->cause.start_ns, v->first_ns), rel_s(v->cause.end_ns, v->first_ns), buf);
}

/* Its episodes, one a line, times from its first sample. */
static void episodes_text(const struct torch_dev *d, FILE *f)
{
	const struct torch_episode *e;
	size_t n = torch_dev__episodes(d, &e), i;
	char buf[256];

	if (!n)
		return;
	fprintf(f, "  episodes (seconds from its first sample):\n");
	for (i = 0; i < n; i++)
		fprintf(f, "    %s\n", torch_out__episode(&e[i], d->first_ns, buf, sizeof(buf)));
}

/* Why the verdict, in one line. */
static void explain(const struct torch_model *m, const struct torch_verdict *v, FILE *f)
{
	char r[24], fl[24], pk[24], u[16];

	if (v->warmup) {
		fprintf(f, "  verdict warm-up: judged from %.1f s after its first block, "
			"over windows of %.1f s\n", m->rules.warmup_ns / 1e9,
			m->rules.window_ns / 1e9);
		return;
	}
	fputs("  verdict ", f);
	cause_text(v, f);
	if (v->slide_horizon) {
		fprintf(f, "%s: over the last %s, %s rises %s/h, a slide too slow for "
			"a window of %.1f s\n", torch_kind__name(v->kind),
			fmt_seconds(v->slide_horizon, u, sizeof(u)),
			v->kind == TORCH_LEAK ? "allocated's floor" : "reserved (not the floor)",
			fmt_bytes((uint64_t)v->slide_per_hour, r, sizeof(r)), m->rules.window_ns / 1e9);
		return;
	}
	fmt_bytes_signed(v->reserved_growth, true, r, sizeof(r));
	fmt_bytes_signed(v->floor_growth, true, fl, sizeof(fl));
	fmt_bytes_signed(v->peak_growth, true, pk, sizeof(pk));
	fprintf(f, "%s: over the last %.1f s, allocated's floor %s and its peak %s",
		torch_kind__name(v->kind), v->span_ns / 1e9, fl, pk);
	if (v->reserved_known)
		fprintf(f, ", reserved %s; %s (%.0f%%) of reserved held no tensor (%.0f%% at "
			"the window's start)", r, fmt_bytes(v->unused, u, sizeof(u)),
			100 * v->unused_share, 100 * v->unused_share_early);
	fputc('\n', f);
}

static void dev_text(const struct torch_model *m, const struct torch_dev *d,
		     const struct callsites *sites, FILE *f)
{
	char b[6][16], advice[1024], text[ESC_TERM_LEN(sizeof(advice))];
	struct torch_verdict v;

	torch_model__judge(m, d, &v);
	fprintf(f, "pid %u (%s) cuda:%u%s: allocated %s", d->pid,
		esc__term(d->last.comm, text, sizeof(text)), d->device,
		d->exited ? " [exited]" : "", fmt_bytes(v.allocated, b[0], sizeof(b[0])));
	/* Moved since the hook's last sample by the driver calls of its segments. */
	if (v.reserved_known)
		fprintf(f, ", reserved %s%s, cached %s (%.0f%%)",
			fmt_bytes(v.reserved, b[1], sizeof(b[1])),
			v.reserved_from_calls ? " (from segment calls)" : "",
			fmt_bytes(v.cached, b[2], sizeof(b[2])), 100 * v.cached_share);
	fprintf(f, "; peak allocated %s", fmt_bytes(v.peak_allocated, b[3], sizeof(b[3])));
	if (v.reserved_known)
		fprintf(f, ", peak reserved %s", fmt_bytes(v.peak_reserved, b[4], sizeof(b[4])));
	fprintf(f, "; %llu blocks allocated, %llu freed%s; expandable segments %s\n",
		(unsigned long long)d->last.allocs, (unsigned long long)d->last.frees,
		d->last.flags & TORCH_S_WINDOWED ? " in the hook's windows" : "",
		es_name(v.expandable));
	if (!v.reserved_known)
		fprintf(f, "  reserved unknown: its libc10 has the old 3-argument hook (no "
			"totals); allocated counts the blocks since the probe went in\n");
	explain(m, &v, f);
	episodes_text(d, f);
	if (!v.advice)
		return;
	/* The advice names call sites' frames. */
	torch_out__advice(&v, sites, advice, sizeof(advice));
	fprintf(f, "  advice: %s\n", esc__term(advice, text, sizeof(text)));
}

void export_torch_text(const struct torch_model *m, const struct callsites *sites, FILE *f)
{
	size_t i;

	if (!m->n)
		return;
	fprintf(f, "\nPyTorch's caching allocator, per process and device "
		"(c10::reportMemoryUsageToProfiler):\n");
	if (m->rules.test_horizons)
		fprintf(f, "  horizons of %llu s, %llu s and %llu s, not 1 min, 15 min and 1 h: "
			"a test's (%s)\n", (unsigned long long)m->rules.horizon_s[0],
			(unsigned long long)m->rules.horizon_s[1],
			(unsigned long long)m->rules.horizon_s[2], TORCH_TEST_HORIZONS);
	for (i = 0; i < m->n; i++)
		dev_text(m, torch_model__dev(m, i), sites, f);
}

/* A file's name is short in practice; more than a few libc10 files are named "...". */
#define UNSEEN_FILES 4

void export_torch_unseen(const struct session *s, FILE *f)
{
	const char *files[UNSEEN_FILES];
	uint64_t calls;
	size_t n = session__torch_unseen(s, files, UNSEEN_FILES, &calls), i;

	if (!n)
		return;
	/* The names are the terminal-escaped ones the libraries were found by. */
	fputs("\nPyTorch's allocator hook probed in ", f);
	for (i = 0; i < n; i++)
		fprintf(f, "%s%s", i ? ", " : "", files[i]);
	fprintf(f, ": %llu calls, none for a CUDA device (CPU tensors under the memory "
		"profiler, or another backend): no allocator figures\n",
		(unsigned long long)calls);
}

static void json_pair(FILE *f, const char *key, const uint64_t *x)
{
	fprintf(f, ",\"%s\":[%llu,%llu]", key, (unsigned long long)x[0],
		(unsigned long long)x[1]);
}

/* One episode as an object; times in s from its first sample, and as taken. */
static void json_episode(FILE *f, const struct torch_episode *e, uint64_t t0_ns)
{
	fprintf(f, "{\"kind\":\"%s\",\"horizon_s\":%llu,\"start_s\":%.3f,\"end_s\":%.3f,"
		"\"start_ns\":%llu,\"end_ns\":%llu", torch_kind__name(e->kind),
		(unsigned long long)e->horizon_s, rel_s(e->start_ns, t0_ns),
		rel_s(e->end_ns, t0_ns), (unsigned long long)e->start_ns,
		(unsigned long long)e->end_ns);
	json_pair(f, "reserved", e->reserved);
	json_pair(f, "floor", e->floor);
	json_pair(f, "peak", e->peak);
	json_pair(f, "unused", e->unused);
	fprintf(f, ",\"per_hour\":%.0f}", e->per_hour);
}

static void json_episodes(FILE *f, const struct torch_dev *d, const struct torch_verdict *v)
{
	const struct torch_episode *e;
	size_t n = torch_dev__episodes(d, &e), i;

	fputs(",\"cause\":", f);
	if (v->has_cause)
		json_episode(f, &v->cause, d->first_ns);
	else
		fputs("null", f);
	fputs(",\"episodes\":[", f);
	for (i = 0; i < n; i++) {
		fputs(i ? "," : "", f);
		json_episode(f, &e[i], d->first_ns);
	}
	fputc(']', f);
}

void export_torch_json(const struct torch_model *m, const struct callsites *sites, FILE *f)
{
	char advice[1024];
	struct torch_verdict v;
	const struct torch_dev *d;
	size_t i;

	for (i = 0; i < m->n; i++) {
		d = torch_model__dev(m, i);
		torch_model__judge(m, d, &v);
		fprintf(f, "{\"event\":\"torch_allocator\",\"pid\":%u,\"comm\":", d->pid);
		json__string(f, d->last.comm);
		fprintf(f, ",\"device\":%u,\"allocated\":%llu,\"reserved\":%llu,\"cached\":%llu,"
			"\"cached_share\":%.4f,\"peak_allocated\":%llu,\"peak_reserved\":%llu,"
			"\"allocs\":%llu,\"frees\":%llu,\"counts_windowed\":%s,\"reserved_known\":%s,"
			"\"reserved_from_calls\":%s,"
			"\"expandable_segments\":%s,\"expandable_known\":%s,\"max_split_size\":%s,"
			"\"phase\":\"%s\",\"verdict\":\"%s\",\"window_s\":%.2f,"
			"\"reserved_growth\":%lld,\"floor_growth\":%lld,\"peak_growth\":%lld,"
			"\"unused\":%llu,\"unused_share\":%.4f,\"slide_horizon_s\":%llu,"
			"\"slide_per_hour\":%.0f,\"exited\":%s,\"advice\":",
			d->device, (unsigned long long)v.allocated, (unsigned long long)v.reserved,
			(unsigned long long)v.cached, v.cached_share,
			(unsigned long long)v.peak_allocated, (unsigned long long)v.peak_reserved,
			(unsigned long long)d->last.allocs, (unsigned long long)d->last.frees,
			d->last.flags & TORCH_S_WINDOWED ? "true" : "false",
			v.reserved_known ? "true" : "false",
			v.reserved_from_calls ? "true" : "false",
			v.expandable == TORCH_ES_ON ? "true" : "false",
			v.expandable == TORCH_ES_UNKNOWN ? "false" : "true",
			v.max_split ? "true" : "false", v.warmup ? "warm-up" : "steady",
			torch_kind__name(v.kind), v.span_ns / 1e9,
			(long long)v.reserved_growth, (long long)v.floor_growth,
			(long long)v.peak_growth, (unsigned long long)v.unused, v.unused_share,
			(unsigned long long)v.slide_horizon, v.slide_per_hour,
			d->exited ? "true" : "false");
		json__string(f, torch_out__advice(&v, sites, advice, sizeof(advice)));
		json_episodes(f, d, &v);
		fputs("}\n", f);
	}
}
