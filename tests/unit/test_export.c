// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The exporters, checked on small sets whose output is known exactly, and
 * a sample writer for the integration test:
 *
 *   test_export --write DIR
 *
 * writes sample.folded (host bytes), sample.calls.folded,
 * sample.gpu_bytes.folded, sample.svg, sample.pb.gz,
 * sample.speedscope.json and timeline.svg from fixed, realistic data, and
 * prints what they must add up to as one JSON object on stdout
 * (tests/integration/test_export.py reads each back on its own).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>
#include "check.h"
#include "export/export.h"
#include "export/timeline.h"
#include "lib/escape.h"
#include "stacks/stackset.h"

#define MIB (1ULL << 20)
#define GIB (1ULL << 30)
#define NS 1000000000ULL

struct fixture {
	uint32_t pid;
	const char *comm;
	const char *frames[10];		/* root first, NULL-terminated */
	uint64_t v[STACK_VAL__COUNT];	/* calls, host bytes, GPU bytes */
};

static size_t n_frames(const struct fixture *f)
{
	size_t n = 0;

	while (n < 10 && f->frames[n])
		n++;
	return n;
}

/* Each stack is added twice with half its values: the set must sum them. */
static struct stackset *build(const struct fixture *fx, size_t n)
{
	struct stackset *s = stackset__new(0);
	size_t i, k;

	if (!s)
		return NULL;
	for (i = 0; i < n; i++) {
		uint64_t half[STACK_VAL__COUNT], rest[STACK_VAL__COUNT];

		for (k = 0; k < STACK_VAL__COUNT; k++) {
			half[k] = fx[i].v[k] / 2;
			rest[k] = fx[i].v[k] - half[k];
		}
		if (stackset__add(s, fx[i].pid, fx[i].comm, fx[i].frames, n_frames(&fx[i]), half) ||
		    stackset__add(s, fx[i].pid, fx[i].comm, fx[i].frames, n_frames(&fx[i]), rest)) {
			stackset__free(s);
			return NULL;
		}
	}
	return s;
}

static const struct fixture small[] = {
	{ 10, "app", { "main", "alloc;weights", "cuMemAlloc_v2" }, { 2, 1 * MIB, 2 * MIB } },
	{ 10, "app", { "main", "line\nbreak", "cuMemHostAlloc" }, { 1, 4096, 4096 } },
	{ 11, "app", { "main", "cuMemAddressReserve" }, { 1, 0, 0 } },
};

#define N_SMALL (sizeof(small) / sizeof(small[0]))

/* Run an exporter into memory; the output is NUL-terminated, or NULL. */
static char *run_export(int (*fn)(const struct stackset *, enum stack_metric, FILE *),
			const struct stackset *s, enum stack_metric m, size_t *len, int *err)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	if (!f) {
		*err = -errno;
		return NULL;
	}
	*err = fn(s, m, f);
	fclose(f);
	if (len)
		*len = n;
	return buf;
}

static int svg_default(const struct stackset *s, enum stack_metric m, FILE *f)
{
	return export_svg(s, m, NULL, f);
}

/* Both escapers: bytes as ASCII for comms, UTF-8 kept for clean names. */
static void test_json_strings(void)
{
	static const char in[] = "a\"b\\c\t\x7f\xc3\xa9";
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	if (!CHECK(f, "memstream", "no memory"))
		return;
	json__string(f, in);
	fputc(' ', f);
	json__utf8_string(f, in);
	fclose(f);
	CHECK(buf && !strcmp(buf, "\"a\\\"b\\\\c\\u0009\\u007f\\u00c3\\u00a9\" "
			     "\"a\\\"b\\\\c\\u0009\\u007f\xc3\xa9\""),
	      "escaped", "got %s", buf);
	free(buf);
}

static void test_folded_exact(void)
{
	struct stackset *s = build(small, N_SMALL);
	char *out = NULL;
	int err = 0;

	if (!CHECK(s, "build", "errno %d", errno))
		return;
	out = run_export(export_folded, s, STACK_VAL__HOST_BYTES, NULL, &err);
	CHECK_EQ(err, 0, "host err");
	CHECK(out && !strcmp(out, "app (10);main;alloc:weights;cuMemAlloc_v2 1048576\n"
			     "app (10);main;line break;cuMemHostAlloc 4096\n"),
	      "host bytes", "got:\n%s", out);
	free(out);
	out = run_export(export_folded, s, STACK_VAL__CALLS, NULL, &err);
	CHECK_EQ(err, 0, "calls err");
	CHECK(out && !strcmp(out, "app (10);main;alloc:weights;cuMemAlloc_v2 2\n"
			     "app (10);main;line break;cuMemHostAlloc 1\n"
			     "app (11);main;cuMemAddressReserve 1\n"),
	      "calls", "got:\n%s", out);
	free(out);
	stackset__free(s);
}

static void test_write_errors(void)
{
	int (*const fns[])(const struct stackset *, enum stack_metric, FILE *) = {
		export_folded, svg_default, export_pprof, export_speedscope,
	};
	const char *const names[] = { "folded", "svg", "pprof", "speedscope" };
	struct stackset *s = build(small, N_SMALL);
	struct timeline t;
	unsigned int i;
	FILE *f;

	if (!CHECK(s, "build", "errno %d", errno))
		return;
	for (i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		int err;

		f = fopen("/dev/full", "w");
		if (!CHECK(f, "open /dev/full", "errno %d", errno))
			break;
		err = fns[i](s, STACK_VAL__HOST_BYTES, f);
		CHECK(err == -ENOSPC, names[i], "err %d, expected %d", err, -ENOSPC);
		fclose(f);
	}
	CHECK_EQ(export_folded(s, STACK_VAL__COUNT, stdout), -EINVAL, "bad metric");
	timeline__init(&t);
	timeline__add_sample(&t, 0, GIB, GIB / 2, GIB / 4);
	f = fopen("/dev/full", "w");
	if (CHECK(f, "open /dev/full", "errno %d", errno)) {
		CHECK_EQ(export_timeline(&t, f), -ENOSPC, "timeline");
		fclose(f);
	}
	timeline__free(&t);
	stackset__free(s);
}

/* A protobuf reader, enough to walk a profile.proto back. */
struct pbr {
	const uint8_t *p, *end;
	bool bad;
};

static uint64_t pbr_varint(struct pbr *r)
{
	uint64_t v = 0;
	unsigned int shift = 0;

	while (r->p < r->end && shift < 64) {
		uint8_t b = *r->p++;

		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
		shift += 7;
	}
	r->bad = true;
	return 0;
}

/* The next field: a varint in *v, a length-delimited one in *sub. */
static bool pbr_next(struct pbr *r, unsigned int *field, uint64_t *v, struct pbr *sub)
{
	uint64_t key, len;

	if (r->bad || r->p >= r->end)
		return false;
	key = pbr_varint(r);
	*field = (unsigned int)(key >> 3);
	memset(sub, 0, sizeof(*sub));
	switch (key & 7) {
	case 0:
		*v = pbr_varint(r);
		break;
	case 2:
		len = pbr_varint(r);
		if (len > (uint64_t)(r->end - r->p)) {
			r->bad = true;
			return false;
		}
		sub->p = r->p;
		sub->end = r->p + len;
		r->p += len;
		*v = len;
		break;
	default:
		r->bad = true;
		return false;
	}
	return !r->bad;
}

static uint8_t *gunzip(const char *in, size_t n, size_t *out_len)
{
	size_t cap = 1 << 16, len = 0;
	uint8_t *out = malloc(cap);
	z_stream z = { 0 };
	int ret;

	if (!out || inflateInit2(&z, 15 + 16) != Z_OK) {
		free(out);
		return NULL;
	}
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)n;
	do {
		if (len == cap) {
			uint8_t *p = realloc(out, cap *= 2);

			if (!p)
				break;
			out = p;
		}
		z.next_out = out + len;
		z.avail_out = (uInt)(cap - len);
		ret = inflate(&z, Z_NO_FLUSH);
		len = cap - z.avail_out;
	} while (ret == Z_OK);
	inflateEnd(&z);
	if (ret != Z_STREAM_END) {
		free(out);
		return NULL;
	}
	*out_len = len;
	return out;
}

#define MAXS 64

struct decoded {
	struct { const char *p; size_t n; } str[MAXS];
	size_t n_str;
	uint64_t types[3][2];
	size_t n_types;
	uint64_t default_type;
	uint64_t loc_fn[MAXS];		/* by location id */
	uint64_t fn_name[MAXS];		/* by function id */
	char line[8][256];		/* each sample: "root;...;leaf calls host gpu pid comm" */
	size_t n_samples;
};

static bool str_is(const struct decoded *d, uint64_t i, const char *s)
{
	return i < d->n_str && d->str[i].n == strlen(s) && !memcmp(d->str[i].p, s, d->str[i].n);
}

static void decode_sample(struct decoded *d, struct pbr *m, char *line, size_t len)
{
	uint64_t locs[16], vals[3] = { 0 }, v, pid = 0, comm = 0;
	size_t n_locs = 0, n_vals = 0, o = 0;
	struct pbr sub, x;
	unsigned int f;

	while (pbr_next(m, &f, &v, &sub)) {
		if (f == 1)
			while (sub.p < sub.end && n_locs < 16)
				locs[n_locs++] = pbr_varint(&sub);
		if (f == 2)
			while (sub.p < sub.end && n_vals < 3)
				vals[n_vals++] = pbr_varint(&sub);
		if (f == 3) {
			uint64_t key = 0, str = 0, num = 0;
			unsigned int lf;

			while (pbr_next(&sub, &lf, &v, &x))
				*(lf == 1 ? &key : lf == 2 ? &str : &num) = v;
			if (str_is(d, key, "pid"))
				pid = num;
			if (str_is(d, key, "comm"))
				comm = str;
		}
	}
	line[0] = '\0';
	/* location_id is leaf first: print it backwards, root first. */
	while (n_locs-- > 0 && o < len) {
		uint64_t fn = locs[n_locs] < MAXS ? d->loc_fn[locs[n_locs]] : 0;
		uint64_t name = fn < MAXS ? d->fn_name[fn] : 0;

		o += (size_t)snprintf(line + o, len - o, "%s%.*s", o ? ";" : "",
				      name < d->n_str ? (int)d->str[name].n : 1,
				      name < d->n_str ? d->str[name].p : "?");
	}
	if (o < len)
		snprintf(line + o, len - o, " %llu %llu %llu %llu %.*s",
			 (unsigned long long)vals[0], (unsigned long long)vals[1],
			 (unsigned long long)vals[2], (unsigned long long)pid,
			 comm < d->n_str ? (int)d->str[comm].n : 1,
			 comm < d->n_str ? d->str[comm].p : "?");
}

/* Two passes: the tables first, as samples name them by index. */
static bool decode_profile(const uint8_t *p, size_t n, struct decoded *d)
{
	struct pbr r = { p, p + n, false }, sub, x;
	unsigned int f, g;
	uint64_t v;

	memset(d, 0, sizeof(*d));
	while (pbr_next(&r, &f, &v, &sub)) {
		uint64_t id = 0, a = 0, b = 0;

		if (f == 6 && d->n_str < MAXS) {
			d->str[d->n_str].p = (const char *)sub.p;
			d->str[d->n_str++].n = (size_t)v;
		} else if (f == 14) {
			d->default_type = v;
		} else if (f == 1 && d->n_types < 3) {
			while (pbr_next(&sub, &g, &v, &x))
				d->types[d->n_types][g == 1 ? 0 : 1] = v;
			d->n_types++;
		} else if (f == 4) {
			while (pbr_next(&sub, &g, &v, &x)) {
				struct pbr y;
				unsigned int h;

				if (g == 1)
					id = v;
				if (g == 4)
					while (pbr_next(&x, &h, &v, &y))
						if (h == 1)
							a = v;
			}
			if (id && id < MAXS && !d->loc_fn[id])
				d->loc_fn[id] = a;
			else
				return false;	/* ids must be unique and non-zero */
		} else if (f == 5) {
			while (pbr_next(&sub, &g, &v, &x)) {
				if (g == 1)
					id = v;
				if (g == 2)
					b = v;
			}
			if (id && id < MAXS && !d->fn_name[id])
				d->fn_name[id] = b;
			else
				return false;
		}
	}
	if (r.bad)
		return false;
	r.p = p;
	while (pbr_next(&r, &f, &v, &sub))
		if (f == 2 && d->n_samples < 8)
			decode_sample(d, &sub, d->line[d->n_samples++], sizeof(d->line[0]));
	return !r.bad;
}

static void test_pprof_decodes(void)
{
	static const char *const want[] = {
		"app (10);main;alloc;weights;cuMemAlloc_v2 2 1048576 2097152 10 app",
		"app (10);main;line break;cuMemHostAlloc 1 4096 4096 10 app",
		"app (11);main;cuMemAddressReserve 1 0 0 11 app",
	};
	struct stackset *s = build(small, N_SMALL);
	struct decoded *d = calloc(1, sizeof(*d));
	uint8_t *raw = NULL;
	size_t len = 0, raw_len = 0, i;
	char *out = NULL;
	int err = 0;

	if (!CHECK(s && d, "build", "errno %d", errno))
		goto out;
	out = run_export(export_pprof, s, STACK_VAL__HOST_BYTES, &len, &err);
	CHECK_EQ(err, 0, "export");
	if (!CHECK(out && len > 18 && (uint8_t)out[0] == 0x1f && (uint8_t)out[1] == 0x8b,
		   "gzip magic", "len %zu", len))
		goto out;
	raw = gunzip(out, len, &raw_len);
	if (!CHECK(raw, "gunzip", "failed"))
		goto out;
	if (!CHECK(decode_profile(raw, raw_len, d), "decode", "malformed profile"))
		goto out;
	CHECK(d->n_str > 0 && d->str[0].n == 0, "string_table[0]", "\"%.*s\"",
	      (int)d->str[0].n, d->str[0].p);
	CHECK_EQ(d->n_types, 3, "sample types");
	CHECK(str_is(d, d->types[0][0], "calls") && str_is(d, d->types[0][1], "count") &&
	      str_is(d, d->types[1][0], "host_space") && str_is(d, d->types[1][1], "bytes") &&
	      str_is(d, d->types[2][0], "gpu_space") && str_is(d, d->types[2][1], "bytes"),
	      "type names", "%llu", (unsigned long long)d->types[0][0]);
	CHECK(str_is(d, d->default_type, "host_space"), "default type", "%llu",
	      (unsigned long long)d->default_type);
	CHECK_EQ(d->n_samples, 3, "samples");
	for (i = 0; i < d->n_samples && i < 3; i++)
		CHECK(!strcmp(d->line[i], want[i]), "sample", "got \"%s\", want \"%s\"",
		      d->line[i], want[i]);
out:
	free(raw);
	free(out);
	free(d);
	stackset__free(s);
}

static size_t count_of(const char *hay, const char *needle)
{
	size_t n = 0;

	for (; (hay = strstr(hay, needle)); hay++)
		n++;
	return n;
}

/* The numbers of a JSON array of integers after key, summed. */
static uint64_t sum_array(const char *json, const char *key, size_t *n)
{
	const char *p = strstr(json, key);
	uint64_t sum = 0;
	char *end;

	*n = 0;
	if (!p || !(p = strchr(p, '[')))
		return 0;
	for (p++; *p && *p != ']'; p = end) {
		while (*p == ',' || *p == '\n')
			p++;
		sum += strtoull(p, &end, 10);
		(*n)++;
		if (end == p)
			break;
	}
	return sum;
}

static void test_speedscope_structure(void)
{
	static const struct fixture fx[] = {
		{ 5, "q\"x", { "a\\b", "tab\there", "cuMemAlloc_v2" }, { 3, 3 * MIB, 3 * MIB } },
		{ 5, "q\"x", { "a\\b", "cuMemFree_v2" }, { 1, 0, 0 } },
		{ 6, "r", { "a\\b", "cuMemAlloc_v2" }, { 1, 5 * MIB, 4 * MIB } },
	};
	struct stackset *s = build(fx, 3);
	size_t n_weights = 0;
	char *out = NULL;
	int err = 0;

	if (!CHECK(s, "build", "errno %d", errno))
		return;
	out = run_export(export_speedscope, s, STACK_VAL__HOST_BYTES, NULL, &err);
	CHECK_EQ(err, 0, "export");
	if (!out)
		goto out;
	CHECK(strstr(out, "\"$schema\":\"https://www.speedscope.app/file-format-schema.json\""),
	      "schema", "%.80s", out);
	CHECK(strstr(out, "\"type\":\"sampled\"") && strstr(out, "\"unit\":\"bytes\""), "profile",
	      "%s", out);
	CHECK(strstr(out, "{\"name\":\"a\\\\b\"}") && strstr(out, "{\"name\":\"q\\\"x (5)\"}") &&
	      strstr(out, "{\"name\":\"tab here\"}"), "escaped", "%s", out);
	CHECK_EQ(sum_array(out, "\"weights\"", &n_weights), 8 * MIB, "weights");
	CHECK_EQ(n_weights, 2, "zero-valued stack left out");
	CHECK(strstr(out, "\"endValue\":8388608,"), "endValue", "%s", out);
	CHECK_EQ(count_of(out, "{\"name\":"), 5, "frames");	/* q"x (5), r (6), a\b, tab here, cuMemAlloc_v2 */
	free(out);
	out = run_export(export_speedscope, s, STACK_VAL__CALLS, NULL, &err);
	CHECK(!err && out && strstr(out, "\"unit\":\"none\"") && strstr(out, "\"endValue\":5,"),
	      "calls", "%s", out);
out:
	free(out);
	stackset__free(s);
}

static void test_svg_structure(void)
{
	static const struct fixture fx[] = {
		{ 1, "app", { "main", "Buffer<T>::grow() [T = \"w\" & 'b']", "cuMemAlloc_v2" },
		  { 1, 3 * GIB / 2, GIB } },
		{ 1, "app", { "main", "cuMemHostAlloc" }, { 1, GIB / 2, GIB / 2 } },
		{ 2, "job", { "libcuda.so.1+0x1234", "cuMemCreate" }, { 1, 2 * GIB, 2 * GIB } },
	};
	struct stackset *s = build(fx, 3);
	char *out = NULL;
	int err = 0;

	if (!CHECK(s, "build", "errno %d", errno))
		return;
	out = run_export(svg_default, s, STACK_VAL__HOST_BYTES, NULL, &err);
	CHECK_EQ(err, 0, "export");
	if (!out)
		goto out;
	CHECK(!strncmp(out, "<?xml", 5) && strstr(out, "</svg>\n"), "document", "%.60s", out);
	/* all, 2 processes, main, Buffer, 3 API frames, libcuda */
	CHECK_EQ(count_of(out, "<g class=\"f "), 9, "frames");
	CHECK(strstr(out, "Buffer&lt;T&gt;::grow() [T = &quot;w&quot; &amp; &apos;b&apos;]"),
	      "escaped", "no escaped name");
	CHECK(!strstr(out, "Buffer<T>"), "raw name", "unescaped name present");
	CHECK(strstr(out, "Total 4.0 GiB of host bytes in 3 calls"), "title", "no totals line");
	CHECK(strstr(out, "1.5 GiB, 37.50% of all"), "tooltip", "no 1.5 GiB tooltip");
	CHECK_EQ(count_of(out, "class=\"f api\""), 3, "api kind");
	CHECK_EQ(count_of(out, "class=\"f drv\""), 1, "driver kind");
	CHECK_EQ(count_of(out, "class=\"f proc\""), 2, "process kind");
	CHECK(strstr(out, "<![CDATA[") && strstr(out, "function zoom("), "script", "no script");
	CHECK(!strstr(out, "http://") || count_of(out, "http://") == 1, "no fetches",
	      "only the xmlns may name a URL");
	free(out);

	/* Nothing to draw is still a valid file that says so. */
	out = run_export(svg_default, s, STACK_VAL__COUNT, NULL, &err);
	CHECK_EQ(err, -EINVAL, "bad metric");
	free(out);
	stackset__free(s);
	s = stackset__new(0);
	out = s ? run_export(svg_default, s, STACK_VAL__GPU_BYTES, NULL, &err) : NULL;
	CHECK(!err && out && strstr(out, "No stack has any GPU bytes") && strstr(out, "</svg>"),
	      "empty", "%s", out);
out:
	free(out);
	stackset__free(s);
}

static char *run_timeline(const struct timeline *t, size_t *len, int *err)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	if (!f) {
		*err = -errno;
		return NULL;
	}
	*err = export_timeline(t, f);
	fclose(f);
	*len = n;
	return buf;
}

static void test_timeline_empty_and_one(void)
{
	struct timeline t;
	size_t len = 0;
	char *out;
	int err;

	timeline__init(&t);
	CHECK_EQ(timeline__set_proc_value(&t, 1, "x", 1), -EINVAL, "value before a sample");
	out = run_timeline(&t, &len, &err);
	CHECK_EQ(err, -EINVAL, "no samples");
	free(out);

	CHECK_EQ(timeline__add_sample(&t, 5 * NS, 16 * GIB, 10 * GIB, 8 * GIB), 0, "sample");
	CHECK_EQ(timeline__add_sample(&t, 4 * NS, 16 * GIB, 10 * GIB, 8 * GIB), -EINVAL,
		 "time going back");
	CHECK_EQ(timeline__set_proc_value(&t, 7, "demo", 2 * GIB), 0, "value");
	out = run_timeline(&t, &len, &err);
	CHECK_EQ(err, 0, "one sample");
	CHECK(out && strstr(out, "</svg>") && strstr(out, "time (s)") &&
	      strstr(out, "host memory (GiB)") && strstr(out, "demo (7), peak 2.0 GiB") &&
	      strstr(out, "<circle class=\"avail\""), "drawn", "%s", out ? out : "");
	free(out);
	timeline__free(&t);
}

/* The driver's page pool: a line and a legend entry once it held anything. */
static void test_timeline_pool(void)
{
	struct timeline t;
	size_t len = 0;
	char *out;
	int err;

	timeline__init(&t);
	CHECK_EQ(timeline__set_pool(&t, GIB), -EINVAL, "pool before a sample");
	timeline__add_sample(&t, 1 * NS, 16 * GIB, 10 * GIB, 8 * GIB);
	timeline__add_sample(&t, 2 * NS, 16 * GIB, 9 * GIB, 7 * GIB);
	out = run_timeline(&t, &len, &err);
	CHECK(!err && out && !strstr(out, "driver page pool") && !strstr(out, "class=\"pool\""),
	      "no pool, no line", "%s", out ? out : "");
	free(out);
	CHECK_EQ(timeline__set_pool(&t, 3 * GIB), 0, "pool");
	out = run_timeline(&t, &len, &err);
	CHECK(!err && out && strstr(out, ">driver page pool<") &&
	      strstr(out, "<polyline class=\"pool\""), "pool drawn", "%s", out ? out : "");
	free(out);
	timeline__free(&t);
}

static void test_timeline_many(void)
{
	struct timeline t;
	size_t len = 0, i;
	double t0, dt;
	char *out;
	int err;

	timeline__init(&t);
	for (i = 0; i < 100000; i++) {
		uint64_t held = (i % 1000) * MIB + (i > 50000 ? 4 * GIB : 0);

		if (timeline__add_sample(&t, i * 1000000ULL, 64 * GIB, 60 * GIB - held,
					 50 * GIB - held) ||
		    timeline__set_proc_value(&t, 100 + (uint32_t)(i % 3), "w", held / 3))
			break;
		/* One deep dip, one sample wide: downsampling must keep it. */
		if (i == 77777)
			t.samples[i].mem_available = 1 * GIB;
	}
	for (i = 0; i < 20; i++)
		timeline__add_burst(&t, i * 5 * NS, 100, (i + 1) * 100 * MIB);
	timeline__add_reclaim(&t, 51 * NS, 300);
	timeline__add_stop(&t, 90 * NS, 101, "w", "available < 2 GiB", GIB);
	t0 = (double)clock() / CLOCKS_PER_SEC;
	out = run_timeline(&t, &len, &err);
	dt = (double)clock() / CLOCKS_PER_SEC - t0;
	CHECK_EQ(err, 0, "export");
	CHECK(len < 400000, "downsampled", "%zu bytes", len);
	CHECK(dt < 2, "fast", "%.2f s", dt);
	/* y of 1 GiB on a 0..70 GiB axis: the dip is drawn. */
	CHECK(out && strstr(out, "stop w (101): available &lt; 2 GiB"), "stop label", "missing");
	if (out) {
		const char *p = strstr(out, "<polyline class=\"avail\" points=\"");
		size_t pts = 0;
		double lowest = 0;

		for (p = p ? p + 33 : NULL; p && *p != '"';) {
			char *end;
			double y;

			strtod(p, &end);
			y = strtod(end + 1, &end);
			lowest = y > lowest ? y : lowest;
			pts++;
			p = end;
			while (*p == ' ')
				p++;
		}
		CHECK(pts > 1000 && pts <= 3 * 1108, "points", "%zu", pts);
		CHECK(lowest > 430, "dip kept", "lowest point at y %.1f", lowest);
	}
	free(out);
	timeline__free(&t);
}

/* Sample data for the integration test. */

static const struct fixture sample_stacks[] = {
	{ 4242, "python3", { "_start (python3.11)", "__libc_start_main (libc.so.6)",
			     "_PyEval_EvalFrameDefault (libpython3.11.so.1.0)",
			     "at::native::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>) (libtorch_cuda.so)",
			     "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*) (libc10_cuda.so)",
			     "cudaMalloc (libcudart.so.12)", "libcuda.so.1+0x2f1a0", "cuMemAlloc_v2" },
	  { 12, 13 * GIB, 13 * GIB } },
	{ 4242, "python3", { "_start (python3.11)", "__libc_start_main (libc.so.6)",
			     "_PyEval_EvalFrameDefault (libpython3.11.so.1.0)",
			     "at::native::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>) (libtorch_cuda.so)",
			     "c10::cuda::CUDACachingAllocator::Native::ExpandableSegment::map(c10::SegmentRange) (libc10_cuda.so)",
			     "cuMemCreate" },
	  { 96, 3 * GIB, 3 * GIB } },
	{ 4242, "python3", { "_start (python3.11)", "__libc_start_main (libc.so.6)",
			     "_PyEval_EvalFrameDefault (libpython3.11.so.1.0)",
			     "at::native::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>) (libtorch_cuda.so)",
			     "c10::cuda::CUDACachingAllocator::Native::ExpandableSegment::map(c10::SegmentRange) (libc10_cuda.so)",
			     "cuMemMap" },
	  { 96, 0, 3 * GIB } },
	{ 4242, "python3", { "_start (python3.11)", "__libc_start_main (libc.so.6)",
			     "_PyEval_EvalFrameDefault (libpython3.11.so.1.0)",
			     "at::native::_pin_memory(at::Tensor const&, std::optional<c10::Device>) (libtorch_cuda.so)",
			     "cudaHostAlloc (libcudart.so.12)", "libcuda.so.1+0x3a2c0", "cuMemHostAlloc" },
	  { 40, 5 * GIB / 2, 5 * GIB / 2 } },
	{ 4243, "python3", { "_start (python3.11)", "__libc_start_main (libc.so.6)",
			     "_PyEval_EvalFrameDefault (libpython3.11.so.1.0)",
			     "Buffer<T>::grow() [with T = \"weights\" & 'bias'] (libapp.so)",
			     "std::vector<float, std::allocator<float> >::_M_realloc_insert (libapp.so)",
			     "cudaMallocAsync (libcudart.so.12)", "libcuda.so.1+0x41c00", "cuMemAllocAsync" },
	  { 2000, 5 * GIB / 4, 3 * GIB / 2 } },
	{ 4243, "python3", { "_start (python3.11)", "__libc_start_main (libc.so.6)",
			     "_PyEval_EvalFrameDefault (libpython3.11.so.1.0)",
			     "at::native::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>) (libtorch_cuda.so)",
			     "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*) (libc10_cuda.so)",
			     "cudaMalloc (libcudart.so.12)", "libcuda.so.1+0x2f1a0", "cuMemAlloc_v2" },
	  { 10, 6 * GIB, 6 * GIB } },
	{ 777, "demo", { "_start (demo)", "main (demo)", "run_step (demo)", "cuMemAllocManaged" },
	  { 3, 384 * MIB, GIB } },
	{ 777, "demo", { "_start (demo)", "main (demo)", "reserve_va (demo)", "cuMemAddressReserve" },
	  { 1, 0, 0 } },
};

#define N_SAMPLE_STACKS (sizeof(sample_stacks) / sizeof(sample_stacks[0]))

/*
 * Two minutes of a training job: rank 0 (4242) pins 2.5 GiB at 5 s and at
 * step 7 (35 s) takes 13 GiB that never come back; rank 1 (4243) starts at
 * 20 s and leaks 1 GiB a second from 40 s until the guard stops it when
 * available memory falls under 32 GiB; a demo holds 384 MiB for a minute.
 */
static int sample_timeline(struct timeline *t)
{
	const uint64_t total = 128 * GIB, base = 20 * GIB;
	size_t i;
	int err = 0;

	timeline__init(t);
	for (i = 0; i <= 240 && !err; i++) {
		uint64_t now = i * NS / 2, r0 = 0, r1 = 0, demo = 0, avail;
		double s = (double)i / 2;

		if (s >= 5)
			r0 = 5 * GIB / 2;
		if (s >= 35)
			r0 += 13 * GIB + (uint64_t)(s - 35) * 10 * MIB;
		if (s >= 20 && s < 95.5)
			r1 = 6 * GIB + (s >= 40 ? (uint64_t)((s - 40) * 2) * GIB / 2 : 0);
		if (s >= 2 && s < 62)
			demo = 384 * MIB;
		avail = total - base - r0 - r1 - demo;
		err = timeline__add_sample(t, now, total, avail, avail - 6 * GIB);
		if (!err && r0)
			err = timeline__set_proc_value(t, 4242, "python3", r0);
		if (!err && r1)
			err = timeline__set_proc_value(t, 4243, "python3", r1);
		if (!err && demo)
			err = timeline__set_proc_value(t, 777, "demo", demo);
	}
	if (!err)
		err = timeline__add_burst(t, 2 * NS, 777, 384 * MIB);
	if (!err)
		err = timeline__add_burst(t, 5 * NS, 4242, 5 * GIB / 2);
	if (!err)
		err = timeline__add_burst(t, 20 * NS, 4243, 6 * GIB);
	if (!err)
		err = timeline__add_burst(t, 35 * NS, 4242, 13 * GIB);
	for (i = 0; i < 20 && !err; i++)
		err = timeline__add_reclaim(t, 35 * NS + i * NS / 4, 100 + 20 * i);
	for (i = 0; i < 10 && !err; i++)
		err = timeline__add_reclaim(t, 90 * NS + i * NS / 2, 800);
	if (!err)
		err = timeline__add_stop(t, 95 * NS + NS / 2, 4243, "python3",
					 "available 31.5 GiB < 32 GiB (--min-available)",
					 63 * GIB / 2);
	return err;
}

static int write_file(const char *dir, const char *name, const struct stackset *s,
		      enum stack_metric m,
		      int (*fn)(const struct stackset *, enum stack_metric, FILE *))
{
	char path[4096];
	FILE *f;
	int err;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f)
		return -errno;
	err = fn(s, m, f);
	if (fclose(f) && !err)
		err = -errno;
	if (err)
		fprintf(stderr, "test_export: %s: %s\n", path, strerror(-err));
	return err;
}

static int write_samples(const char *dir)
{
	static const char *const metric_files[STACK_VAL__COUNT] = {
		"sample.calls.folded", "sample.host_bytes.folded", "sample.gpu_bytes.folded",
	};
	struct stackset *s = build(sample_stacks, N_SAMPLE_STACKS);
	const struct stack **v = NULL;
	struct timeline t;
	char path[4096];
	size_t i, nz[STACK_VAL__COUNT] = { 0 }, depth = 0;
	unsigned int m;
	int err;
	FILE *f;

	if (!s)
		return -ENOMEM;
	err = write_file(dir, "sample.folded", s, STACK_VAL__HOST_BYTES, export_folded);
	for (m = 0; m < STACK_VAL__COUNT && !err; m++)
		err = write_file(dir, metric_files[m], s, m, export_folded);
	if (!err)
		err = write_file(dir, "sample.svg", s, STACK_VAL__HOST_BYTES, svg_default);
	if (!err)
		err = write_file(dir, "sample.pb.gz", s, STACK_VAL__HOST_BYTES, export_pprof);
	if (!err)
		err = write_file(dir, "sample.speedscope.json", s, STACK_VAL__HOST_BYTES,
				 export_speedscope);
	if (!err)
		err = sample_timeline(&t);
	if (!err) {
		snprintf(path, sizeof(path), "%s/timeline.svg", dir);
		f = fopen(path, "w");
		err = f ? export_timeline(&t, f) : -errno;
		if (f && fclose(f) && !err)
			err = -errno;
		timeline__free(&t);
	}
	v = err ? NULL : stackset__sorted(s);
	if (!err && !v)
		err = -ENOMEM;
	if (err)
		goto out;
	for (i = 0; v[i]; i++) {
		for (m = 0; m < STACK_VAL__COUNT; m++)
			nz[m] += !!v[i]->values[m];
		depth = v[i]->n_frames > depth ? v[i]->n_frames : depth;
	}
	printf("{\"totals\":{\"calls\":%llu,\"host_bytes\":%llu,\"gpu_bytes\":%llu},\n",
	       (unsigned long long)stackset__total(s, STACK_VAL__CALLS),
	       (unsigned long long)stackset__total(s, STACK_VAL__HOST_BYTES),
	       (unsigned long long)stackset__total(s, STACK_VAL__GPU_BYTES));
	printf("\"stacks\":{\"calls\":%zu,\"host_bytes\":%zu,\"gpu_bytes\":%zu},\n",
	       nz[STACK_VAL__CALLS], nz[STACK_VAL__HOST_BYTES], nz[STACK_VAL__GPU_BYTES]);
	printf("\"max_depth\":%zu,\n", depth);
	printf("\"processes\":[\"python3 (4242)\",\"python3 (4243)\",\"demo (777)\"],\n");
	printf("\"special_frame\":\"Buffer<T>::grow() [with T = \\\"weights\\\" & 'bias'] (libapp.so)\",\n");
	printf("\"leaf_apis\":[\"cuMemAlloc_v2\",\"cuMemCreate\",\"cuMemMap\",\"cuMemHostAlloc\","
	       "\"cuMemAllocAsync\",\"cuMemAllocManaged\",\"cuMemAddressReserve\"],\n");
	printf("\"files\":{\"folded\":\"sample.folded\",\"folded_by_metric\":{\"calls\":\"%s\","
	       "\"host_bytes\":\"%s\",\"gpu_bytes\":\"%s\"},\"svg\":\"sample.svg\","
	       "\"pprof\":\"sample.pb.gz\",\"speedscope\":\"sample.speedscope.json\","
	       "\"timeline\":\"timeline.svg\"},\n", metric_files[0], metric_files[1],
	       metric_files[2]);
	printf("\"timeline\":{\"samples\":241,\"bursts\":4,\"stops\":1,"
	       "\"processes\":[\"python3 (4242)\",\"python3 (4243)\",\"demo (777)\"],"
	       "\"axis_labels\":[\"time (s)\",\"host memory (GiB)\"],\"burst_label\":\"13.0 GiB\","
	       "\"stop_label\":\"stop python3 (4243)\"}}\n");
out:
	free(v);
	stackset__free(s);
	return err;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--write"))
		return write_samples(argv[2]) ? 1 : 0;
	if (argc != 1) {
		fprintf(stderr, "usage: %s [--write DIR]\n", argv[0]);
		return 2;
	}
	RUN_SUBTEST(test_json_strings);
	RUN_SUBTEST(test_folded_exact);
	RUN_SUBTEST(test_write_errors);
	RUN_SUBTEST(test_pprof_decodes);
	RUN_SUBTEST(test_speedscope_structure);
	RUN_SUBTEST(test_svg_structure);
	RUN_SUBTEST(test_timeline_empty_and_one);
	RUN_SUBTEST(test_timeline_many);
	RUN_SUBTEST(test_timeline_pool);
	return CHECK_EXIT();
}
