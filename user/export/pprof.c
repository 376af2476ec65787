// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * pprof's profile.proto (github.com/google/pprof, proto/profile.proto),
 * gzip-compressed, encoded by hand: a handful of messages made of varints
 * and length-delimited fields do not need a protobuf library.
 *
 * A Profile is the top-level message, so it has no length prefix of its
 * own: each of its fields is encoded into a small buffer and streamed
 * through deflate at once, and a profile of a million stacks is never
 * held in memory whole.
 *
 * Each interned name of the stackset used as a frame becomes one Function
 * and one Location, both with id = name id + 1 (ids must not be 0).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "export/export.h"

/* Profile fields */
#define PROFILE_SAMPLE_TYPE	1
#define PROFILE_SAMPLE		2
#define PROFILE_LOCATION	4
#define PROFILE_FUNCTION	5
#define PROFILE_STRING_TABLE	6
#define PROFILE_COMMENT		13
#define PROFILE_DEFAULT_TYPE	14
/* ValueType */
#define VALUE_TYPE_TYPE		1
#define VALUE_TYPE_UNIT		2
/* Sample */
#define SAMPLE_LOCATION_ID	1
#define SAMPLE_VALUE		2
#define SAMPLE_LABEL		3
/* Label */
#define LABEL_KEY		1
#define LABEL_STR		2
#define LABEL_NUM		3
/* Location */
#define LOCATION_ID		1
#define LOCATION_LINE		4
/* Line */
#define LINE_FUNCTION_ID	1
/* Function */
#define FUNCTION_ID		1
#define FUNCTION_NAME		2
#define FUNCTION_SYSTEM_NAME	3

#define WIRE_VARINT	0
#define WIRE_LEN	2

/* The string table: these first, then every name of the stackset. */
enum {
	STR_EMPTY,		/* string_table[0] must be "" */
	STR_CALLS,
	STR_COUNT,
	STR_HOST_SPACE,
	STR_BYTES,
	STR_GPU_SPACE,
	STR_PID,
	STR_COMM,
	STR_COMMENT,
	STR__FIXED,
};

static const char *const fixed_strings[STR__FIXED] = {
	[STR_EMPTY] = "",
	[STR_CALLS] = "calls",
	[STR_COUNT] = "count",
	[STR_HOST_SPACE] = "host_space",
	[STR_BYTES] = "bytes",
	[STR_GPU_SPACE] = "gpu_space",
	[STR_PID] = "pid",
	[STR_COMM] = "comm",
	[STR_COMMENT] = "umtrace: host memory taken inside GPU allocation calls, by call stack",
};

/* sample_type, in the order of enum stack_metric (the order of values). */
static const int metric_type[STACK_VAL__COUNT][2] = {
	[STACK_VAL__CALLS] = { STR_CALLS, STR_COUNT },
	[STACK_VAL__HOST_BYTES] = { STR_HOST_SPACE, STR_BYTES },
	[STACK_VAL__GPU_BYTES] = { STR_GPU_SPACE, STR_BYTES },
};

struct pb {
	uint8_t *p;
	size_t len, cap;
	bool oom;
};

struct gz {
	z_stream z;
	FILE *out;
	int err;
	uint8_t buf[65536];
};

static void pb_put(struct pb *b, const void *data, size_t n)
{
	if (b->oom || !n)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		uint8_t *p;

		while (cap < b->len + n)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
}

static void pb_varint(struct pb *b, uint64_t v)
{
	uint8_t tmp[10];
	size_t n = 0;

	while (v >= 0x80) {
		tmp[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	tmp[n++] = (uint8_t)v;
	pb_put(b, tmp, n);
}

static void pb_key(struct pb *b, unsigned int field, unsigned int wire)
{
	pb_varint(b, (uint64_t)field << 3 | wire);
}

/* Zero is every scalar's default in proto3: leaving it out reads the same. */
static void pb_uint(struct pb *b, unsigned int field, uint64_t v)
{
	if (!v)
		return;
	pb_key(b, field, WIRE_VARINT);
	pb_varint(b, v);
}

static void pb_bytes(struct pb *b, unsigned int field, const void *data, size_t n)
{
	pb_key(b, field, WIRE_LEN);
	pb_varint(b, n);
	pb_put(b, data, n);
}

/* A nested message: sub encoded, then emptied for reuse. */
static void pb_msg(struct pb *b, unsigned int field, struct pb *sub)
{
	b->oom |= sub->oom;
	pb_bytes(b, field, sub->p, sub->len);
	sub->len = 0;
}

static int64_t clamp64(uint64_t v)
{
	return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

static int gz_drain(struct gz *g, int flush)
{
	int ret;

	do {
		size_t n;

		g->z.next_out = g->buf;
		g->z.avail_out = sizeof(g->buf);
		ret = deflate(&g->z, flush);
		if (ret == Z_STREAM_ERROR)
			return -EIO;
		n = sizeof(g->buf) - g->z.avail_out;
		if (n && fwrite(g->buf, 1, n, g->out) != n)
			return -EIO;
	} while (g->z.avail_out == 0 || (flush == Z_FINISH && ret != Z_STREAM_END));
	return 0;
}

/* Deflate b's bytes into the output, and empty b. */
static int gz_write(struct gz *g, struct pb *b)
{
	if (g->err)
		return g->err;
	if (b->oom)
		return g->err = -ENOMEM;
	g->z.next_in = b->p;
	g->z.avail_in = (uInt)b->len;
	g->err = gz_drain(g, Z_NO_FLUSH);
	b->len = 0;
	return g->err;
}

static void put_sample(struct pb *msg, struct pb *sub, const struct stack *st)
{
	size_t i;

	/* pprof wants the leaf first: the reverse of the stackset's order. */
	for (i = st->n_frames; i-- > 0;)
		pb_varint(sub, (uint64_t)st->frame_ids[i] + 1);
	pb_msg(msg, SAMPLE_LOCATION_ID, sub);
	for (i = 0; i < STACK_VAL__COUNT; i++)
		pb_varint(sub, (uint64_t)clamp64(st->values[i]));
	pb_msg(msg, SAMPLE_VALUE, sub);

	pb_uint(sub, LABEL_KEY, STR_PID);
	pb_uint(sub, LABEL_NUM, st->pid);
	pb_msg(msg, SAMPLE_LABEL, sub);
	pb_uint(sub, LABEL_KEY, STR_COMM);
	pb_uint(sub, LABEL_STR, STR__FIXED + (uint64_t)st->comm_id);
	pb_msg(msg, SAMPLE_LABEL, sub);
}

struct pprof_ctx {
	struct gz *g;
	struct pb top, msg, sub;
	uint8_t *used;		/* by name id: a frame of some sample */
};

/* Hand what is encoded to deflate in pieces of some size, not per field. */
static int flush_top(struct pprof_ctx *c, bool force)
{
	if (!force && c->top.len < 32768 && !c->top.oom)
		return 0;
	return gz_write(c->g, &c->top);
}

static int sample_cb(const struct stack *st, void *arg)
{
	struct pprof_ctx *c = arg;
	size_t i;

	if (!st->values[STACK_VAL__CALLS] && !st->values[STACK_VAL__HOST_BYTES] &&
	    !st->values[STACK_VAL__GPU_BYTES])
		return 0;
	for (i = 0; i < st->n_frames; i++)
		c->used[st->frame_ids[i]] = 1;
	put_sample(&c->msg, &c->sub, st);
	pb_msg(&c->top, PROFILE_SAMPLE, &c->msg);
	return flush_top(c, false);
}

static int put_tables(struct pprof_ctx *c, const struct stackset *s)
{
	size_t n = stackset__n_names(s), i;
	const char *str;
	int err = 0;

	for (i = 0; i < n && !err; i++) {
		if (!c->used[i])
			continue;
		pb_uint(&c->msg, LOCATION_ID, i + 1);
		pb_uint(&c->sub, LINE_FUNCTION_ID, i + 1);
		pb_msg(&c->msg, LOCATION_LINE, &c->sub);
		pb_msg(&c->top, PROFILE_LOCATION, &c->msg);
		err = flush_top(c, false);
	}
	for (i = 0; i < n && !err; i++) {
		if (!c->used[i])
			continue;
		pb_uint(&c->msg, FUNCTION_ID, i + 1);
		pb_uint(&c->msg, FUNCTION_NAME, STR__FIXED + i);
		pb_uint(&c->msg, FUNCTION_SYSTEM_NAME, STR__FIXED + i);
		pb_msg(&c->top, PROFILE_FUNCTION, &c->msg);
		err = flush_top(c, false);
	}
	/* Every entry, "" first, even the empty one: the indices count. */
	for (i = 0; i < STR__FIXED; i++)
		pb_bytes(&c->top, PROFILE_STRING_TABLE, fixed_strings[i], strlen(fixed_strings[i]));
	for (i = 0; i < n && !err; i++) {
		str = stackset__name(s, (uint32_t)i);
		pb_bytes(&c->top, PROFILE_STRING_TABLE, str, strlen(str));
		err = flush_top(c, false);
	}
	return err;
}

int export_pprof(const struct stackset *s, enum stack_metric m, FILE *out)
{
	struct pprof_ctx c = { 0 };
	struct gz *g;
	unsigned int i;
	int err;

	if (!s || !out || (unsigned int)m >= STACK_VAL__COUNT)
		return -EINVAL;
	g = calloc(1, sizeof(*g));
	c.used = calloc(stackset__n_names(s) + 1, 1);
	if (!g || !c.used) {
		free(g);
		free(c.used);
		return -ENOMEM;
	}
	g->out = out;
	/* windowBits 15 + 16: a gzip header and trailer, as pprof expects. */
	if (deflateInit2(&g->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK) {
		free(g);
		free(c.used);
		return -ENOMEM;
	}
	c.g = g;

	for (i = 0; i < STACK_VAL__COUNT; i++) {
		pb_uint(&c.msg, VALUE_TYPE_TYPE, metric_type[i][0]);
		pb_uint(&c.msg, VALUE_TYPE_UNIT, metric_type[i][1]);
		pb_msg(&c.top, PROFILE_SAMPLE_TYPE, &c.msg);
	}
	err = stackset__for_each(s, sample_cb, &c);
	if (!err)
		err = put_tables(&c, s);
	if (!err) {
		pb_key(&c.top, PROFILE_COMMENT, WIRE_VARINT);
		pb_varint(&c.top, STR_COMMENT);
		pb_uint(&c.top, PROFILE_DEFAULT_TYPE, metric_type[m][0]);
		err = flush_top(&c, true);
	}
	if (!err)
		err = gz_drain(g, Z_FINISH);
	deflateEnd(&g->z);
	free(g);
	free(c.used);
	free(c.top.p);
	free(c.msg.p);
	free(c.sub.p);
	/* A failed write is reported by export__finish() with its errno. */
	if (err && !ferror(out))
		return err;
	return export__finish(out);
}
