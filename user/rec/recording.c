// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "lib/meminfo.h"
#include "rec/recording.h"
#include "lib/units.h"

enum rec_type {
	REC_STR = 1,
	REC_STACK = 2,
	REC_CALL = 3,
	REC_EXIT = 4,
	REC_SAMPLE = 5,
	REC_STOP = 6,
	REC_INFO = 7,
};

/* CALL's present bits: fields that are mostly 0 are left out when they are. */
#define CALL_IS_FREE	(1u << 0)
#define CALL_PCOMM	(1u << 1)	/* pcomm differs from comm: its id follows */
#define CALL_FLAGS	(1u << 2)
#define CALL_AUX	(1u << 3)
#define CALL_RET	(1u << 4)
#define CALL_END	(1u << 5)
#define CALL_FREED	(1u << 6)
#define CALL_FAULTED	(1u << 7)
#define CALL_DEVICE	(1u << 8)

#define SAMPLE_PSI	(1u << 0)

/* Room before a record's body for its type and length. */
#define HDR_ROOM	16
#define SCRATCH_BYTES	(HDR_ROOM + REC_STR_MAX + REC_FRAMES_MAX * 4 * 10 + 64)
/* A reader's bounds, far above any real recording: a hostile file stays small. */
#define MAX_STRINGS	(1u << 24)
#define MAX_STACKS	(1u << 24)
#define MAX_FRAMES	(1u << 24)	/* all stacks together */

/* ---- varints ---- */

static size_t put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

static uint64_t zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t unzigzag(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

struct enc {
	uint8_t *p;
	size_t len;
};

static void enc_u(struct enc *e, uint64_t v)
{
	e->len += put_varint(e->p + e->len, v);
}

static void enc_s(struct enc *e, int64_t v)
{
	enc_u(e, zigzag(v));
}

struct dec {
	const uint8_t *p, *end;
	bool bad;
};

static uint64_t dec_u(struct dec *d)
{
	uint64_t v = 0;
	unsigned int shift = 0;
	uint8_t b;

	do {
		if (d->p == d->end || shift > 63) {
			d->bad = true;
			return 0;
		}
		b = *d->p++;
		v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	return v;
}

static int64_t dec_s(struct dec *d)
{
	return unzigzag(dec_u(d));
}

static uint32_t dec_u32(struct dec *d)
{
	uint64_t v = dec_u(d);

	if (v > UINT32_MAX)
		d->bad = true;
	return (uint32_t)v;
}

/* ---- interning: bytes to ids 1, 2, ... ---- */

struct intern_ent {
	uint64_t hash;
	uint8_t *key;		/* NULL: empty slot */
	uint32_t len;
	uint32_t id;
};

struct intern {
	struct intern_ent *slots;
	size_t cap;		/* a power of two */
	size_t n;
};

static uint64_t hash_bytes(const void *key, size_t len)
{
	const uint8_t *b = key;
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ len, v;

	while (len >= 8) {
		memcpy(&v, b, 8);
		h = (h ^ v) * 0xff51afd7ed558ccdULL;
		h ^= h >> 32;
		b += 8;
		len -= 8;
	}
	v = 0;
	memcpy(&v, b, len);
	h = (h ^ v) * 0xc4ceb9fe1a85ec53ULL;
	return h ^ (h >> 29);
}

static int intern_grow(struct intern *t)
{
	size_t cap = t->cap ? t->cap * 2 : 256, i, j;
	struct intern_ent *s = calloc(cap, sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (i = 0; i < t->cap; i++) {
		if (!t->slots[i].key)
			continue;
		for (j = t->slots[i].hash & (cap - 1); s[j].key; j = (j + 1) & (cap - 1))
			;
		s[j] = t->slots[i];
	}
	free(t->slots);
	t->slots = s;
	t->cap = cap;
	return 0;
}

/* The id of key, *fresh when it was just given one. 0 or -ENOMEM. */
static int intern_get(struct intern *t, const void *key, size_t len, uint32_t *id, bool *fresh)
{
	uint64_t h = hash_bytes(key, len);
	struct intern_ent *e;
	size_t i;

	if ((t->n + 1) * 10 > t->cap * 7 && intern_grow(t))
		return -ENOMEM;
	for (i = h & (t->cap - 1); t->slots[i].key; i = (i + 1) & (t->cap - 1)) {
		e = &t->slots[i];
		if (e->hash == h && e->len == len && !memcmp(e->key, key, len)) {
			*id = e->id;
			*fresh = false;
			return 0;
		}
	}
	e = &t->slots[i];
	e->key = malloc(len ? len : 1);
	if (!e->key)
		return -ENOMEM;
	memcpy(e->key, key, len);
	e->hash = h;
	e->len = (uint32_t)len;
	e->id = (uint32_t)++t->n;
	*id = e->id;
	*fresh = true;
	return 0;
}

static void intern_free(struct intern *t)
{
	size_t i;

	for (i = 0; i < t->cap; i++)
		free(t->slots[i].key);
	free(t->slots);
	memset(t, 0, sizeof(*t));
}

/* ---- writer ---- */

struct recording_writer {
	struct recfile_writer *f;
	struct intern strs, stacks;
	uint8_t *scratch;	/* a record: HDR_ROOM, then its body */
	uint64_t *stack_key;	/* REC_FRAMES_MAX * 4 */
	/* CALL deltas, against the previous CALL of the chunk delta_chunk */
	uint64_t delta_chunk;
	uint64_t prev_ts, prev_pid, prev_handle;
	struct rec_info info;
	bool info_written;
	struct recording_wstats st;
};

struct recording_writer *recording_writer__open(const char *path, unsigned int flags)
{
	struct recording_writer *w = calloc(1, sizeof(*w));
	int err;

	if (!w)
		return NULL;
	w->scratch = malloc(SCRATCH_BYTES);
	w->stack_key = malloc(REC_FRAMES_MAX * 4 * sizeof(*w->stack_key));
	if (!w->scratch || !w->stack_key) {
		err = ENOMEM;
		goto err_free;
	}
	w->f = recfile_writer__open(path, flags);
	if (!w->f) {
		err = errno;
		goto err_free;
	}
	return w;
err_free:
	free(w->stack_key);
	free(w->scratch);
	free(w);
	errno = err;
	return NULL;
}

static struct enc body(struct recording_writer *w)
{
	return (struct enc){ .p = w->scratch + HDR_ROOM };
}

/* Append the record whose body e holds, type and length before it. */
static int emit(struct recording_writer *w, uint8_t type, const struct enc *e)
{
	uint8_t hdr[HDR_ROOM];
	size_t n = 0;

	hdr[n++] = type;
	n += put_varint(hdr + n, e->len);
	memcpy(e->p - n, hdr, n);
	return recfile_writer__append(w->f, e->p - n, n + e->len);
}

static int str_id(struct recording_writer *w, const char *s, size_t max, uint32_t *id)
{
	struct enc e = body(w);
	size_t len;
	bool fresh;
	int err;

	*id = 0;
	if (!s)
		return 0;
	len = strnlen(s, max < REC_STR_MAX - 1 ? max : REC_STR_MAX - 1);
	err = intern_get(&w->strs, s, len, id, &fresh);
	if (err || !fresh)
		return err;
	memcpy(e.p, s, len);
	e.len = len;
	w->st.strings++;
	return emit(w, REC_STR, &e);
}

static int stack_id(struct recording_writer *w, const struct sym_frame *frames, size_t n,
		    uint32_t *id)
{
	uint64_t *k = w->stack_key;
	uint32_t fid, mid;
	struct enc e;
	bool fresh;
	size_t i;
	int err;

	*id = 0;
	if (n > REC_FRAMES_MAX)
		n = REC_FRAMES_MAX;
	if (!n)
		return 0;
	for (i = 0; i < n; i++) {
		if ((err = str_id(w, frames[i].func, REC_STR_MAX, &fid)) ||
		    (err = str_id(w, frames[i].module, REC_STR_MAX, &mid)))
			return err;
		k[i * 4] = fid;
		k[i * 4 + 1] = mid;
		k[i * 4 + 2] = frames[i].addr;
		k[i * 4 + 3] = frames[i].offset;
	}
	err = intern_get(&w->stacks, k, n * 4 * sizeof(*k), id, &fresh);
	if (err || !fresh)
		return err;
	e = body(w);
	enc_u(&e, n);
	for (i = 0; i < n * 4; i++)
		enc_u(&e, k[i]);
	w->st.stacks++;
	return emit(w, REC_STACK, &e);
}

/* Deltas start again with each chunk, so that a chunk decodes on its own. */
static void delta_sync(struct recording_writer *w)
{
	struct recfile_wstats fs;

	recfile_writer__stats(w->f, &fs);
	if (fs.chunks == w->delta_chunk)
		return;
	w->delta_chunk = fs.chunks;
	w->prev_ts = w->prev_pid = w->prev_handle = 0;
}

int recording_writer__add_call(struct recording_writer *w, const struct umt_call_rec *r,
			       const struct sym_frame *frames, size_t n)
{
	uint32_t comm, pcomm, stack, bits = 0;
	struct enc e;
	int err;

	if ((err = recfile_writer__error(w->f)))
		return err;
	if ((err = str_id(w, r->comm, sizeof(r->comm), &comm)) ||
	    (err = str_id(w, r->pcomm, sizeof(r->pcomm), &pcomm)) ||
	    (err = stack_id(w, frames, n, &stack)))
		return err;
	delta_sync(w);
	bits |= r->is_free ? CALL_IS_FREE : 0;
	bits |= pcomm != comm ? CALL_PCOMM : 0;
	bits |= r->flags ? CALL_FLAGS : 0;
	bits |= r->aux ? CALL_AUX : 0;
	bits |= r->ret ? CALL_RET : 0;
	bits |= r->end ? CALL_END : 0;
	bits |= r->pages_freed ? CALL_FREED : 0;
	bits |= r->faulted_pages ? CALL_FAULTED : 0;
	bits |= r->device_pages ? CALL_DEVICE : 0;
	e = body(w);
	enc_u(&e, bits);
	enc_s(&e, (int64_t)(r->ts_ns - w->prev_ts));
	enc_u(&e, r->duration_ns);
	enc_s(&e, (int64_t)r->pid - (int64_t)w->prev_pid);
	enc_s(&e, (int64_t)r->tid - (int64_t)r->pid);
	enc_u(&e, r->api);
	enc_u(&e, r->size);
	enc_s(&e, (int64_t)(r->handle - w->prev_handle));
	enc_u(&e, r->pages_taken);
	enc_u(&e, comm);
	if (bits & CALL_PCOMM)
		enc_u(&e, pcomm);
	enc_u(&e, stack);
	if (bits & CALL_FLAGS)
		enc_u(&e, r->flags);
	if (bits & CALL_AUX)
		enc_u(&e, r->aux);
	if (bits & CALL_RET)
		enc_s(&e, r->ret);
	if (bits & CALL_END)
		enc_u(&e, r->end);
	if (bits & CALL_FREED)
		enc_u(&e, r->pages_freed);
	if (bits & CALL_FAULTED)
		enc_u(&e, r->faulted_pages);
	if (bits & CALL_DEVICE)
		enc_u(&e, r->device_pages);
	w->prev_ts = r->ts_ns;
	w->prev_pid = r->pid;
	w->prev_handle = r->handle;
	w->st.calls++;
	return emit(w, REC_CALL, &e);
}

int recording_writer__add_exit(struct recording_writer *w, const struct umt_proc_exit_rec *r)
{
	struct enc e;
	uint32_t comm;
	int err;

	if ((err = recfile_writer__error(w->f)) ||
	    (err = str_id(w, r->comm, sizeof(r->comm), &comm)))
		return err;
	e = body(w);
	enc_u(&e, r->ts_ns);
	enc_u(&e, r->pid);
	enc_u(&e, comm);
	w->st.exits++;
	return emit(w, REC_EXIT, &e);
}

int recording_writer__add_sample(struct recording_writer *w, const struct rec_sample *s)
{
	struct enc e;
	int err;

	if ((err = recfile_writer__error(w->f)))
		return err;
	e = body(w);
	enc_u(&e, s->has_psi ? SAMPLE_PSI : 0);
	enc_u(&e, s->ts_ns);
	enc_u(&e, s->mem_total);
	enc_u(&e, s->mem_available);
	enc_u(&e, s->mem_free);
	if (s->has_psi) {
		enc_u(&e, s->psi_some_avg10);
		enc_u(&e, s->psi_full_avg10);
		enc_u(&e, s->psi_some_total_us);
		enc_u(&e, s->psi_full_total_us);
	}
	enc_u(&e, s->allocstall);
	enc_u(&e, s->pgscan_direct);
	enc_u(&e, s->pgsteal_direct);
	w->st.samples++;
	return emit(w, REC_SAMPLE, &e);
}

int recording_writer__add_stop(struct recording_writer *w, const struct rec_stop *s)
{
	uint32_t comm, text, site;
	struct enc e;
	int err;

	if ((err = recfile_writer__error(w->f)) ||
	    (err = str_id(w, s->comm, sizeof(s->comm), &comm)) ||
	    (err = str_id(w, s->reason_text, sizeof(s->reason_text), &text)) ||
	    (err = str_id(w, s->site, sizeof(s->site), &site)))
		return err;
	e = body(w);
	enc_u(&e, s->ts_ns);
	enc_u(&e, s->pid);
	enc_u(&e, comm);
	enc_u(&e, s->reason);
	enc_u(&e, text);
	enc_u(&e, s->mem_available);
	enc_u(&e, s->gpu_host_bytes);
	enc_u(&e, site);
	w->st.stops++;
	return emit(w, REC_STOP, &e);
}

int recording_writer__set_info(struct recording_writer *w, const struct rec_info *i)
{
	struct enc e;
	int err;

	if ((err = recfile_writer__error(w->f)))
		return err;
	if (w->info_written && !memcmp(&w->info, i, sizeof(*i)))
		return 0;
	w->info = *i;
	w->info_written = true;
	e = body(w);
	enc_u(&e, i->platform_forced);
	enc_u(&e, i->platform_driver);
	enc_u(&e, i->dropped);
	enc_u(&e, i->sample_interval_ms);
	return emit(w, REC_INFO, &e);
}

int recording_writer__tick(struct recording_writer *w)
{
	return recfile_writer__tick(w->f);
}

int recording_writer__flush(struct recording_writer *w)
{
	return recfile_writer__flush(w->f);
}

void recording_writer__stats(const struct recording_writer *w, struct recording_wstats *st)
{
	struct recfile_wstats fs;

	*st = w->st;
	recfile_writer__stats(w->f, &fs);
	st->chunks = fs.chunks;
	st->file_bytes = fs.file_bytes;
	st->raw_bytes = fs.raw_bytes;
}

int recording_writer__commit(struct recording_writer *w)
{
	return recfile_writer__commit(w->f);
}

static void writer_free(struct recording_writer *w)
{
	intern_free(&w->strs);
	intern_free(&w->stacks);
	free(w->stack_key);
	free(w->scratch);
	free(w);
}

void recording_writer__discard(struct recording_writer *w)
{
	if (!w)
		return;
	recfile_writer__discard(w->f);
	writer_free(w);
}

int recording_writer__close(struct recording_writer *w)
{
	int err;

	if (!w)
		return 0;
	err = recfile_writer__close(w->f);
	writer_free(w);
	return err;
}

/* ---- replay ---- */

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

static void do_info(struct replay *rp, struct dec *d)
{
	struct rec_info i;

	memset(&i, 0, sizeof(i));
	i.platform_forced = dec_u32(d);
	i.platform_driver = dec_u32(d);
	i.dropped = dec_u(d);
	i.sample_interval_ms = dec_u32(d);
	if (d->bad)
		return;
	rp->st->infos++;
	if (rp->ops->on_info)
		rp->ops->on_info(rp->ctx, &i);
}

static const char *const type_names[] = {
	[REC_STR] = "string", [REC_STACK] = "stack", [REC_CALL] = "call",
	[REC_EXIT] = "exit", [REC_SAMPLE] = "sample", [REC_STOP] = "stop",
	[REC_INFO] = "info",
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

/* ---- host memory samples ---- */

static int read_text(const char *path, char *buf, size_t len)
{
	size_t used = 0;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (used < len - 1) {
		n = read(fd, buf + used, len - 1 - used);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		used += (size_t)n;
	}
	close(fd);
	buf[used] = '\0';
	return 0;
}

/* "12.34" into 1234. */
static uint32_t hundredths(const char *p)
{
	uint32_t v = 0, frac = 0, digits = 0;

	while (*p >= '0' && *p <= '9' && v < 100000)
		v = v * 10 + (uint32_t)(*p++ - '0');
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++)
			if (digits < 2) {
				frac = frac * 10 + (uint32_t)(*p - '0');
				digits++;
			}
	while (digits++ < 2)
		frac *= 10;
	return v * 100 + frac;
}

/* "some avg10=0.12 avg60=0.05 avg300=0.01 total=12345" */
static int psi_line(const char *text, const char *kind, uint32_t *avg10, uint64_t *total)
{
	const char *line = text, *p;
	size_t klen = strlen(kind);

	for (; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		if (strncmp(line, kind, klen) || line[klen] != ' ')
			continue;
		p = strstr(line, "avg10=");
		if (!p)
			return -EINVAL;
		*avg10 = hundredths(p + 6);
		p = strstr(line, "total=");
		if (!p)
			return -EINVAL;
		*total = strtoull(p + 6, NULL, 10);
		return 0;
	}
	return -EINVAL;
}

int rec_sample__parse_psi(const char *text, struct rec_sample *s)
{
	s->has_psi = false;
	if (psi_line(text, "some", &s->psi_some_avg10, &s->psi_some_total_us))
		return -EINVAL;
	/* "full" came with 5.2's memory PSI too, but be lenient. */
	if (psi_line(text, "full", &s->psi_full_avg10, &s->psi_full_total_us)) {
		s->psi_full_avg10 = 0;
		s->psi_full_total_us = 0;
	}
	s->has_psi = true;
	return 0;
}

/*
 * allocstall_<zone>, and pgscan_direct / pgsteal_direct (per zone, as
 * pgscan_direct_<zone>, before 4.8); pgscan_direct_throttle counts
 * something else.
 */
void rec_sample__parse_vmstat(const char *text, struct rec_sample *s)
{
	const char *line = text;
	unsigned long long v;
	char name[64];

	s->allocstall = s->pgscan_direct = s->pgsteal_direct = 0;
	for (; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		if (sscanf(line, "%63s %llu", name, &v) != 2)
			continue;
		if (!strncmp(name, "allocstall", 10))
			s->allocstall += v;
		else if (!strcmp(name, "pgscan_direct_throttle"))
			continue;
		else if (!strncmp(name, "pgscan_direct", 13))
			s->pgscan_direct += v;
		else if (!strncmp(name, "pgsteal_direct", 14))
			s->pgsteal_direct += v;
	}
}

int rec_sample__read(struct rec_sample *s, const struct numa_nodes *nodes)
{
	struct timespec ts;
	struct meminfo m;
	char buf[16384];
	int err;

	memset(s, 0, sizeof(*s));
	clock_gettime(CLOCK_MONOTONIC, &ts);
	s->ts_ns = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	err = meminfo__read_host(&m, nodes);
	if (err)
		return err;
	s->mem_total = m.total;
	s->mem_available = m.available;
	s->mem_free = m.free;
	if (!read_text("/proc/pressure/memory", buf, sizeof(buf)))
		rec_sample__parse_psi(buf, s);
	if (!read_text("/proc/vmstat", buf, sizeof(buf)))
		rec_sample__parse_vmstat(buf, s);
	return 0;
}
