// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Writing a recording: each record encoded into a scratch buffer, its
 * strings and stack given ids (lib/strtab.h) and defined by a STR or
 * STACK record the first time, then appended to the recfile's chunk.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "lib/strtab.h"
#include "rec/recording_int.h"

/* Room before a record's body for its type and length. */
#define HDR_ROOM	16
#define SCRATCH_BYTES	(HDR_ROOM + REC_STR_MAX + REC_FRAMES_MAX * 4 * 10 + 64)

struct recording_writer {
	struct recfile_writer *f;
	/* A string's or stack's id in the file is its id here plus 1. */
	struct strtab strs, stacks;
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

/* The id of key in t for the file (1, 2...), *fresh when new. 0 or -ENOMEM. */
static int intern_id(struct strtab *t, const void *key, size_t len, uint32_t *id, bool *fresh)
{
	int err = strtab__intern(t, key, len, id, fresh);

	if (err)
		return -ENOMEM;
	++*id;
	return 0;
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
	err = intern_id(&w->strs, s, len, id, &fresh);
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
	err = intern_id(&w->stacks, k, n * 4 * sizeof(*k), id, &fresh);
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

int recording_writer__add_torch(struct recording_writer *w, const struct torch_sample *s)
{
	struct enc e;
	uint32_t comm;
	int err;

	if ((err = recfile_writer__error(w->f)) ||
	    (err = str_id(w, s->comm, sizeof(s->comm), &comm)))
		return err;
	e = body(w);
	enc_u(&e, s->ts_ns);
	enc_u(&e, s->pid);
	enc_u(&e, s->device);
	enc_u(&e, s->flags);
	enc_u(&e, s->allocated);
	enc_u(&e, s->reserved);
	enc_u(&e, s->peak_allocated);
	enc_u(&e, s->peak_reserved);
	enc_u(&e, s->alloc_low);
	enc_u(&e, s->alloc_high);
	enc_u(&e, s->allocs);
	enc_u(&e, s->frees);
	enc_u(&e, comm);
	w->st.torch++;
	return emit(w, REC_TORCH, &e);
}

int recording_writer__add_sample(struct recording_writer *w, const struct rec_sample *s)
{
	struct enc e;
	int err;

	if ((err = recfile_writer__error(w->f)))
		return err;
	e = body(w);
	enc_u(&e, (s->has_psi ? SAMPLE_PSI : 0) | (s->has_shrunk ? SAMPLE_SHRUNK : 0));
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
	if (s->has_shrunk)
		enc_u(&e, s->driver_shrunk);
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
	enc_u(&e, i->pages_unseen);
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
	strtab__free(&w->strs);
	strtab__free(&w->stacks);
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
