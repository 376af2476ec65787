// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Replaying a recording: chunk by chunk from the recfile reader, each
 * record decoded and handed to the caller's callbacks. The file may be
 * anyone's: every count and id is checked, and a reader's tables are
 * bounded however the file is made.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/units.h"
#include "rec/recording_int.h"

/* A reader's bounds, far above any real recording: a hostile file stays small. */
#define MAX_STRINGS	(1u << 24)
#define MAX_STACKS	(1u << 24)
#define MAX_FRAMES	(1u << 24)	/* all stacks together */

struct rstack {
	struct sym_frame *frames;
	uint32_t n;
};

struct replay {
	const struct recording_ops *ops;
	void *ctx;
	struct replay_stats *st;
	char **strs;		/* strs[id - 1] */
	size_t n_strs, cap_strs;
	struct rstack *stacks;	/* stacks[id - 1] */
	size_t n_stacks, cap_stacks;
	size_t n_frames;
	uint64_t prev_ts, prev_pid, prev_handle;
	const char *bad;	/* the record that could not be decoded */
};

static int grow_array(void **v, size_t *cap, size_t n, size_t elem)
{
	size_t c = *cap ? *cap * 2 : 256;
	void *p;

	if (n < *cap)
		return 0;
	p = realloc(*v, c * elem);
	if (!p)
		return -ENOMEM;
	*v = p;
	*cap = c;
	return 0;
}

/* The string of id (NULL for 0), or bad when it is not defined yet. */
static const char *get_str(struct replay *rp, struct dec *d, uint64_t id)
{
	if (!id)
		return NULL;
	if (id > rp->n_strs) {
		d->bad = true;
		return NULL;
	}
	return rp->strs[id - 1];
}

static void copy_comm(char *dst, const char *s)
{
	memset(dst, 0, TASK_COMM_LEN);
	if (s)
		strncpy(dst, s, TASK_COMM_LEN - 1);
}

static void copy_text(char *dst, size_t len, const char *s)
{
	snprintf(dst, len, "%s", s ? s : "");
}

static int do_str(struct replay *rp, struct dec *d)
{
	size_t len = (size_t)(d->end - d->p);
	char *s;

	if (len >= REC_STR_MAX || rp->n_strs >= MAX_STRINGS) {
		d->bad = true;
		return 0;
	}
	if (grow_array((void **)&rp->strs, &rp->cap_strs, rp->n_strs, sizeof(*rp->strs)))
		return -ENOMEM;
	s = malloc(len + 1);
	if (!s)
		return -ENOMEM;
	memcpy(s, d->p, len);
	s[len] = '\0';
	rp->strs[rp->n_strs++] = s;
	rp->st->strings++;
	return 0;
}

static int do_stack(struct replay *rp, struct dec *d)
{
	uint64_t n = dec_u(d), i;
	struct sym_frame *f;

	if (d->bad || n > REC_FRAMES_MAX || n > (uint64_t)(d->end - d->p) / 4 ||
	    rp->n_stacks >= MAX_STACKS || rp->n_frames + n > MAX_FRAMES) {
		d->bad = true;
		return 0;
	}
	if (grow_array((void **)&rp->stacks, &rp->cap_stacks, rp->n_stacks, sizeof(*rp->stacks)))
		return -ENOMEM;
	f = calloc(n ? n : 1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	for (i = 0; i < n && !d->bad; i++) {
		f[i].func = get_str(rp, d, dec_u(d));
		f[i].module = get_str(rp, d, dec_u(d));
		f[i].addr = dec_u(d);
		f[i].offset = dec_u(d);
	}
	if (d->bad) {
		free(f);
		return 0;
	}
	rp->stacks[rp->n_stacks++] = (struct rstack){ .frames = f, .n = (uint32_t)n };
	rp->n_frames += n;
	rp->st->stacks++;
	return 0;
}

static void do_call(struct replay *rp, struct dec *d)
{
	static const struct rstack none;
	const struct rstack *stk = &none;
	struct umt_call_rec r;
	uint64_t bits, stack;

	memset(&r, 0, sizeof(r));
	r.type = UMT_REC_CALL;
	bits = dec_u(d);
	r.ts_ns = rp->prev_ts + (uint64_t)dec_s(d);
	r.duration_ns = dec_u(d);
	r.pid = (uint32_t)(rp->prev_pid + (uint64_t)dec_s(d));
	r.tid = (uint32_t)(r.pid + (uint64_t)dec_s(d));
	r.api = dec_u32(d);
	r.size = dec_u(d);
	r.handle = rp->prev_handle + (uint64_t)dec_s(d);
	r.pages_taken = dec_u(d);
	copy_comm(r.comm, get_str(rp, d, dec_u(d)));
	if (bits & CALL_PCOMM)
		copy_comm(r.pcomm, get_str(rp, d, dec_u(d)));
	else
		memcpy(r.pcomm, r.comm, sizeof(r.pcomm));
	stack = dec_u(d);
	if (stack > rp->n_stacks)
		d->bad = true;
	else if (stack)
		stk = &rp->stacks[stack - 1];
	r.is_free = bits & CALL_IS_FREE ? 1 : 0;
	r.flags = bits & CALL_FLAGS ? dec_u(d) : 0;
	r.aux = bits & CALL_AUX ? dec_u(d) : 0;
	r.ret = bits & CALL_RET ? (int32_t)dec_s(d) : 0;
	r.end = bits & CALL_END ? dec_u32(d) : 0;
	r.pages_freed = bits & CALL_FREED ? dec_u(d) : 0;
	r.faulted_pages = bits & CALL_FAULTED ? dec_u(d) : 0;
	r.device_pages = bits & CALL_DEVICE ? dec_u(d) : 0;
	if (d->bad)
		return;
	rp->prev_ts = r.ts_ns;
	rp->prev_pid = r.pid;
	rp->prev_handle = r.handle;
	rp->st->calls++;
	if (rp->ops->on_call)
		rp->ops->on_call(rp->ctx, &r, stk->frames, stk->n);
}

static void do_exit(struct replay *rp, struct dec *d)
{
	struct umt_proc_exit_rec r;

	memset(&r, 0, sizeof(r));
	r.type = UMT_REC_PROC_EXIT;
	r.ts_ns = dec_u(d);
	r.pid = dec_u32(d);
	copy_comm(r.comm, get_str(rp, d, dec_u(d)));
	if (d->bad)
		return;
	rp->st->exits++;
	if (rp->ops->on_exit)
		rp->ops->on_exit(rp->ctx, &r);
}

static void do_sample(struct replay *rp, struct dec *d)
{
	struct rec_sample s;
	uint64_t bits = dec_u(d);

	memset(&s, 0, sizeof(s));
	s.ts_ns = dec_u(d);
	s.mem_total = dec_u(d);
	s.mem_available = dec_u(d);
	s.mem_free = dec_u(d);
	if (bits & SAMPLE_PSI) {
		s.has_psi = true;
		s.psi_some_avg10 = dec_u32(d);
		s.psi_full_avg10 = dec_u32(d);
		s.psi_some_total_us = dec_u(d);
		s.psi_full_total_us = dec_u(d);
	}
	s.allocstall = dec_u(d);
	s.pgscan_direct = dec_u(d);
	s.pgsteal_direct = dec_u(d);
	if (bits & SAMPLE_SHRUNK) {
		s.has_shrunk = true;
		s.driver_shrunk = dec_u(d);
	}
	if (d->bad)
		return;
	rp->st->samples++;
	if (rp->ops->on_sample)
		rp->ops->on_sample(rp->ctx, &s);
}

static void do_stop(struct replay *rp, struct dec *d)
{
	struct rec_stop *s = calloc(1, sizeof(*s));

	if (!s) {
		d->bad = true;
		return;
	}
	s->ts_ns = dec_u(d);
	s->pid = dec_u32(d);
	copy_comm(s->comm, get_str(rp, d, dec_u(d)));
	s->reason = dec_u32(d);
	copy_text(s->reason_text, sizeof(s->reason_text), get_str(rp, d, dec_u(d)));
	s->mem_available = dec_u(d);
	s->gpu_host_bytes = dec_u(d);
	copy_text(s->site, sizeof(s->site), get_str(rp, d, dec_u(d)));
	if (!d->bad) {
		rp->st->stops++;
		if (rp->ops->on_stop)
			rp->ops->on_stop(rp->ctx, s);
	}
	free(s);
}

static void do_torch(struct replay *rp, struct dec *d)
{
	struct torch_sample s;

	memset(&s, 0, sizeof(s));
	s.ts_ns = dec_u(d);
	s.pid = dec_u32(d);
	s.device = dec_u32(d);
	s.flags = dec_u32(d);
	s.allocated = dec_u(d);
	s.reserved = dec_u(d);
	s.peak_allocated = dec_u(d);
	s.peak_reserved = dec_u(d);
	s.alloc_low = dec_u(d);
	s.alloc_high = dec_u(d);
	s.allocs = dec_u(d);
	s.frees = dec_u(d);
	copy_comm(s.comm, get_str(rp, d, dec_u(d)));
	if (d->bad)
		return;
	rp->st->torch++;
	if (rp->ops->on_torch)
		rp->ops->on_torch(rp->ctx, &s);
}

static void do_info(struct replay *rp, struct dec *d)
{
	struct rec_info i;

	memset(&i, 0, sizeof(i));
	i.platform_forced = dec_u32(d);
	i.platform_driver = dec_u32(d);
	i.dropped = dec_u(d);
	i.sample_interval_ms = dec_u32(d);
	if (d->p < d->end)
		i.pages_unseen = dec_u32(d);
	if (d->bad)
		return;
	rp->st->infos++;
	if (rp->ops->on_info)
		rp->ops->on_info(rp->ctx, &i);
}

static const char *const type_names[] = {
	[REC_STR] = "string", [REC_STACK] = "stack", [REC_CALL] = "call",
	[REC_EXIT] = "exit", [REC_SAMPLE] = "sample", [REC_STOP] = "stop",
	[REC_INFO] = "info", [REC_TORCH] = "torch",
};

/* One chunk's records. 0, -EBADMSG (rp->bad says which), or -ENOMEM. */
static int replay_chunk(struct replay *rp, const uint8_t *p, size_t len)
{
	struct dec chunk = { .p = p, .end = p + len }, d;
	uint64_t blen;
	uint8_t type;
	int err = 0;

	rp->prev_ts = rp->prev_pid = rp->prev_handle = 0;
	while (chunk.p < chunk.end) {
		type = *chunk.p++;
		blen = dec_u(&chunk);
		if (chunk.bad || blen > (uint64_t)(chunk.end - chunk.p)) {
			rp->bad = "record";
			return -EBADMSG;
		}
		d = (struct dec){ .p = chunk.p, .end = chunk.p + blen };
		chunk.p += blen;
		switch (type) {
		case REC_STR:
			err = do_str(rp, &d);
			break;
		case REC_STACK:
			err = do_stack(rp, &d);
			break;
		case REC_CALL:
			do_call(rp, &d);
			break;
		case REC_EXIT:
			do_exit(rp, &d);
			break;
		case REC_SAMPLE:
			do_sample(rp, &d);
			break;
		case REC_STOP:
			do_stop(rp, &d);
			break;
		case REC_INFO:
			do_info(rp, &d);
			break;
		case REC_TORCH:
			do_torch(rp, &d);
			break;
		default:
			/* A later writer's record: its length lets it be skipped. */
			rp->st->skipped++;
			continue;
		}
		if (err)
			return err;
		if (d.bad) {
			rp->bad = type_names[type];
			return -EBADMSG;
		}
	}
	return 0;
}

static void replay_free(struct replay *rp)
{
	size_t i;

	for (i = 0; i < rp->n_strs; i++)
		free(rp->strs[i]);
	for (i = 0; i < rp->n_stacks; i++)
		free(rp->stacks[i].frames);
	free(rp->strs);
	free(rp->stacks);
}

/*
 * A chunk that passed its checksum but does not decode: reading stops
 * there too, and the chunks after it count as lost with it.
 */
static void stop_at_bad_chunk(struct replay *rp, struct recfile_reader *f, uint64_t chunk_start)
{
	struct replay_stats *st = rp->st;
	uint64_t n = 0, good;
	const void *data;
	size_t len;

	recfile_reader__stats(f, &st->file);
	good = st->file.chunks - 1;
	while (recfile_reader__next(f, &data, &len) > 0)
		n++;
	recfile_reader__stats(f, &st->file);
	st->file.lost_chunks += 1 + n;
	st->file.lost_bytes = st->file.file_bytes - chunk_start;
	st->file.good_bytes = chunk_start;
	st->file.chunks = good;
	st->file.complete = false;
	st->file.damaged = true;
	snprintf(st->file.why, sizeof(st->file.why), "chunk %llu at byte %llu: malformed %s record",
		 (unsigned long long)good, (unsigned long long)chunk_start, rp->bad);
}

static int replay(struct recfile_reader *f, const struct recording_ops *ops, void *ctx,
		  struct replay_stats *st)
{
	struct replay rp = { .ops = ops, .ctx = ctx, .st = st };
	struct recording_header h;
	struct recfile_rstats fs;
	const void *data;
	size_t len;
	int err;

	h.file = *recfile_reader__info(f);
	if (ops->on_header)
		ops->on_header(ctx, &h);
	for (;;) {
		recfile_reader__stats(f, &fs);
		err = recfile_reader__next(f, &data, &len);
		if (err <= 0)
			break;
		err = replay_chunk(&rp, data, len);
		if (err == -EBADMSG) {
			stop_at_bad_chunk(&rp, f, fs.good_bytes);
			err = 0;
			goto out;
		}
		if (err)
			break;
	}
	recfile_reader__stats(f, &st->file);
	if (err)
		snprintf(st->why, sizeof(st->why), "%s", strerror(-err));
out:
	st->damaged = st->file.damaged;
	replay_free(&rp);
	return err;
}

static int replay_reader(struct recfile_reader *f, const struct recording_ops *ops, void *ctx,
			 struct replay_stats *st)
{
	int err;

	if (!f)
		return -errno;
	err = replay(f, ops, ctx, st);
	recfile_reader__close(f);
	return err;
}

int recording__replay(const char *path, const struct recording_ops *ops, void *ctx,
		      struct replay_stats *st)
{
	memset(st, 0, sizeof(*st));
	return replay_reader(recfile_reader__open(path, st->why, sizeof(st->why)), ops, ctx, st);
}

int recording__replay_mem(const void *buf, size_t len, const struct recording_ops *ops,
			  void *ctx, struct replay_stats *st)
{
	memset(st, 0, sizeof(*st));
	return replay_reader(recfile_reader__open_mem(buf, len, st->why, sizeof(st->why)),
			     ops, ctx, st);
}

const char *replay_stats__warning(const struct replay_stats *st, char *buf, size_t len)
{
	const struct recfile_rstats *f = &st->file;
	char b[16];

	if (f->complete)
		return NULL;
	if (!f->damaged) {
		snprintf(buf, len, "recording has no end mark (the recorder was killed, or the "
			 "file was cut between chunks): read %llu chunks (%s), lost 0 bytes "
			 "(0 chunks) after them", (unsigned long long)f->chunks,
			 fmt_bytes(f->good_bytes, b, sizeof(b)));
		return buf;
	}
	snprintf(buf, len, "recording damaged: %s; read %llu chunks (%s), lost %llu bytes "
		 "(%llu chunks)", f->why, (unsigned long long)f->chunks,
		 fmt_bytes(f->good_bytes, b, sizeof(b)), (unsigned long long)f->lost_bytes,
		 (unsigned long long)f->lost_chunks);
	return buf;
}
