// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "lib/sys.h"
#include "lib/hashtab.h"
#include "rec/flight_recorder.h"

/*
 * A symbolized stack with its strings in the same allocation. The
 * strings are its own, not interned with other stacks': they go with the
 * stack's last call, and the budget counts them.
 */
struct fr_stack {
	uint64_t hash;
	uint32_t id;		/* its place in flight_recorder.stacks */
	uint32_t refs;		/* calls held that have it */
	uint32_t n;
	size_t bytes;		/* its allocation, counted in the budget */
	struct sym_frame frames[];
};

/* What replaying a call needs of its record; the raw stack is not kept. */
struct fr_call {
	uint64_t duration_ns, size, flags, handle, aux;
	uint64_t pages_taken, pages_freed, faulted_pages, device_pages;
	uint32_t pid, tid, api, end, is_free;
	int32_t ret;
	char comm[TASK_COMM_LEN], pcomm[TASK_COMM_LEN];
	struct fr_stack *stack;	/* NULL: none */
};

struct fr_event {
	uint64_t ts_ns;
	enum rec_type type;	/* REC_CALL, REC_EXIT, REC_SAMPLE, REC_STOP or REC_TORCH */
	union {
		struct fr_call call;
		struct torch_sample torch;
		struct {
			uint32_t pid;
			char comm[TASK_COMM_LEN];
		} exit;
		struct rec_sample sample;
		struct rec_stop *stop;	/* big and rare: kept apart */
	};
};

struct flight_recorder {
	uint64_t window_ns;
	size_t max_bytes;
	struct fr_event *ev;	/* a ring: ev[head], ... count of them */
	size_t cap, head, count;
	struct hashtab stack_index;	/* stack hash -> id */
	struct fr_stack **stacks;	/* by id, 0 .. n_stacks - 1 */
	size_t n_stacks, cap_stacks;
	size_t bytes;		/* ev's capacity, stacks and stops (see held()) */
	uint64_t calls, evicted, newest_ns;
	struct rec_info info;
	bool info_set;
};

#define INITIAL_EVENTS	64
#define INITIAL_STACKS	256

struct flight_recorder *flight__new(uint64_t window_ns, size_t max_bytes)
{
	struct flight_recorder *fr;

	if (max_bytes < FLIGHT_MIN_BYTES) {
		errno = EINVAL;
		return NULL;
	}
	fr = calloc(1, sizeof(*fr));
	if (!fr)
		return NULL;
	fr->window_ns = window_ns;
	fr->max_bytes = max_bytes;
	return fr;
}

/* Everything held against the budget: fr->bytes and the stacks' index. */
static size_t held(const struct flight_recorder *fr)
{
	return fr->bytes + hashtab__bytes(&fr->stack_index) +
	       fr->cap_stacks * sizeof(*fr->stacks);
}

/* ---- stacks ---- */

static uint64_t str_hash(const char *s)
{
	return s ? hash__bytes(s, strlen(s)) : 0x5bd1e995;
}

static uint64_t stack_hash(const struct sym_frame *f, size_t n)
{
	uint64_t h = hash__add(0x9e3779b97f4a7c15ULL, n);
	size_t i;

	for (i = 0; i < n; i++) {
		h = hash__add(h, str_hash(f[i].func));
		h = hash__add(h, str_hash(f[i].module));
		h = hash__add(h, f[i].addr);
		h = hash__add(h, f[i].offset);
	}
	return hash__mix(h);
}

static bool str_eq(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

static bool stack_eq(const struct fr_stack *s, const struct sym_frame *f, size_t n)
{
	size_t i;

	if (s->n != n)
		return false;
	for (i = 0; i < n; i++)
		if (s->frames[i].addr != f[i].addr || s->frames[i].offset != f[i].offset ||
		    !str_eq(s->frames[i].func, f[i].func) ||
		    !str_eq(s->frames[i].module, f[i].module))
			return false;
	return true;
}

static char *copy_str(char **area, const char *s)
{
	char *p = *area;
	size_t len;

	if (!s)
		return NULL;
	len = strlen(s) + 1;
	memcpy(p, s, len);
	*area += len;
	return p;
}

static struct fr_stack *stack_new(const struct sym_frame *f, size_t n, uint64_t h)
{
	size_t bytes = sizeof(struct fr_stack) + n * sizeof(*f), i;
	struct fr_stack *s;
	char *area;

	for (i = 0; i < n; i++)
		bytes += (f[i].func ? strlen(f[i].func) + 1 : 0) +
			 (f[i].module ? strlen(f[i].module) + 1 : 0);
	s = calloc(1, bytes);
	if (!s)
		return NULL;
	s->hash = h;
	s->n = (uint32_t)n;
	s->bytes = bytes;
	area = (char *)&s->frames[n];
	for (i = 0; i < n; i++) {
		s->frames[i].addr = f[i].addr;
		s->frames[i].offset = f[i].offset;
		s->frames[i].func = copy_str(&area, f[i].func);
		s->frames[i].module = copy_str(&area, f[i].module);
	}
	return s;
}

static int stacks_grow(struct flight_recorder *fr)
{
	size_t cap = fr->cap_stacks ? fr->cap_stacks * 2 : INITIAL_STACKS;
	struct fr_stack **v = realloc(fr->stacks, cap * sizeof(*v));

	if (!v)
		return -ENOMEM;
	fr->stacks = v;
	fr->cap_stacks = cap;
	return 0;
}

static struct fr_stack *stack_get(struct flight_recorder *fr, const struct sym_frame *f,
				  size_t n)
{
	uint64_t h = stack_hash(f, n);
	struct hashtab_iter it;
	struct fr_stack *s;
	uint32_t id;

	for (id = hashtab__first(&fr->stack_index, h, &it); id != HASHTAB_NONE;
	     id = hashtab__next(&fr->stack_index, &it)) {
		s = fr->stacks[id];
		if (s->hash == h && stack_eq(s, f, n)) {
			s->refs++;
			return s;
		}
	}
	if (fr->n_stacks == fr->cap_stacks && stacks_grow(fr))
		return NULL;
	s = stack_new(f, n, h);
	if (!s)
		return NULL;
	s->id = (uint32_t)fr->n_stacks;
	if (hashtab__add(&fr->stack_index, h, s->id)) {
		free(s);
		return NULL;
	}
	s->refs = 1;
	fr->stacks[fr->n_stacks++] = s;
	fr->bytes += s->bytes;
	return s;
}

/*
 * Free s with its last call. The last stack moves into its place, so ids
 * stay 0 .. n_stacks - 1; re-adding it after two removals cannot need
 * more room.
 */
static void stack_put(struct flight_recorder *fr, struct fr_stack *s)
{
	struct fr_stack *last;

	if (!s || --s->refs)
		return;
	hashtab__del(&fr->stack_index, s->hash, s->id);
	last = fr->stacks[--fr->n_stacks];
	if (last != s) {
		hashtab__del(&fr->stack_index, last->hash, last->id);
		last->id = s->id;
		fr->stacks[last->id] = last;
		hashtab__add(&fr->stack_index, last->hash, last->id);
	}
	fr->bytes -= s->bytes;
	free(s);
}

/* ---- the ring of events ---- */

static void evict_head(struct flight_recorder *fr)
{
	struct fr_event *e = &fr->ev[fr->head];

	if (e->type == REC_CALL) {
		stack_put(fr, e->call.stack);
		fr->calls--;
	} else if (e->type == REC_STOP) {
		free(e->stop);
		fr->bytes -= sizeof(*e->stop);
	}
	fr->head = (fr->head + 1) % fr->cap;
	fr->count--;
	fr->evicted++;
}

static int ring_grow(struct flight_recorder *fr)
{
	size_t cap = fr->cap ? fr->cap * 2 : INITIAL_EVENTS, i;
	struct fr_event *ev;

	if (held(fr) + (cap - fr->cap) * sizeof(*ev) > fr->max_bytes)
		return -ENOSPC;
	ev = malloc(cap * sizeof(*ev));
	if (!ev)
		return -ENOMEM;
	for (i = 0; i < fr->count; i++)
		ev[i] = fr->ev[(fr->head + i) % fr->cap];
	free(fr->ev);
	fr->bytes += (cap - fr->cap) * sizeof(*ev);
	fr->ev = ev;
	fr->cap = cap;
	fr->head = 0;
	return 0;
}

/* A free slot at the tail: more room within the budget, or the oldest's. */
static struct fr_event *ring_push(struct flight_recorder *fr, uint64_t ts_ns,
				  enum rec_type type)
{
	struct fr_event *e;

	if (fr->count == fr->cap && ring_grow(fr)) {
		if (!fr->count)
			return NULL;
		evict_head(fr);
	}
	e = &fr->ev[(fr->head + fr->count) % fr->cap];
	memset(e, 0, sizeof(*e));
	e->ts_ns = ts_ns;
	e->type = type;
	fr->count++;
	return e;
}

/* Within the budget (keeping the newest event) and the window again. */
static void trim(struct flight_recorder *fr, uint64_t ts_ns)
{
	if (ts_ns > fr->newest_ns)
		fr->newest_ns = ts_ns;
	while (fr->count > 1 && held(fr) > fr->max_bytes)
		evict_head(fr);
	flight__expire(fr, fr->newest_ns);
}

void flight__expire(struct flight_recorder *fr, uint64_t now_ns)
{
	uint64_t ts;

	while (fr->count) {
		ts = fr->ev[fr->head].ts_ns;
		if (ts >= now_ns || now_ns - ts <= fr->window_ns)
			break;
		evict_head(fr);
	}
}

int flight__add_call(struct flight_recorder *fr, const struct umt_call_rec *r,
		     const struct sym_frame *frames, size_t n)
{
	struct fr_stack *stack = NULL;
	struct fr_event *e;

	if (n > REC_FRAMES_MAX)
		n = REC_FRAMES_MAX;
	if (n && !(stack = stack_get(fr, frames, n)))
		return -ENOMEM;
	e = ring_push(fr, r->ts_ns, REC_CALL);
	if (!e) {
		stack_put(fr, stack);
		return -ENOMEM;
	}
	e->call = (struct fr_call){
		.duration_ns = r->duration_ns, .size = r->size, .flags = r->flags,
		.handle = r->handle, .aux = r->aux, .pages_taken = r->pages_taken,
		.pages_freed = r->pages_freed, .faulted_pages = r->faulted_pages,
		.device_pages = r->device_pages,
		.pid = r->pid, .tid = r->tid, .api = r->api, .end = r->end,
		.is_free = r->is_free, .ret = r->ret, .stack = stack,
	};
	memcpy(e->call.comm, r->comm, TASK_COMM_LEN);
	memcpy(e->call.pcomm, r->pcomm, TASK_COMM_LEN);
	fr->calls++;
	trim(fr, r->ts_ns);
	return 0;
}

int flight__add_torch(struct flight_recorder *fr, const struct torch_sample *t)
{
	struct fr_event *e = ring_push(fr, t->ts_ns, REC_TORCH);

	if (!e)
		return -ENOMEM;
	e->torch = *t;
	trim(fr, t->ts_ns);
	return 0;
}

int flight__add_exit(struct flight_recorder *fr, const struct umt_proc_exit_rec *r)
{
	struct fr_event *e = ring_push(fr, r->ts_ns, REC_EXIT);

	if (!e)
		return -ENOMEM;
	e->exit.pid = r->pid;
	memcpy(e->exit.comm, r->comm, TASK_COMM_LEN);
	trim(fr, r->ts_ns);
	return 0;
}

int flight__add_sample(struct flight_recorder *fr, const struct rec_sample *s)
{
	struct fr_event *e = ring_push(fr, s->ts_ns, REC_SAMPLE);

	if (!e)
		return -ENOMEM;
	e->sample = *s;
	trim(fr, s->ts_ns);
	return 0;
}

int flight__add_stop(struct flight_recorder *fr, const struct rec_stop *s)
{
	struct rec_stop *copy = malloc(sizeof(*copy));
	struct fr_event *e;

	if (!copy)
		return -ENOMEM;
	e = ring_push(fr, s->ts_ns, REC_STOP);
	if (!e) {
		free(copy);
		return -ENOMEM;
	}
	*copy = *s;
	e->stop = copy;
	fr->bytes += sizeof(*copy);
	trim(fr, s->ts_ns);
	return 0;
}

void flight__set_info(struct flight_recorder *fr, const struct rec_info *i)
{
	fr->info = *i;
	fr->info_set = true;
}

void flight__stats(const struct flight_recorder *fr, struct flight_stats *st)
{
	size_t i;

	memset(st, 0, sizeof(*st));
	st->events = fr->count;
	st->calls = fr->calls;
	st->stacks = fr->n_stacks;
	st->bytes = held(fr);
	st->evicted = fr->evicted;
	for (i = 0; i < fr->count; i++) {
		uint64_t ts = fr->ev[(fr->head + i) % fr->cap].ts_ns;

		if (!i || ts < st->oldest_ns)
			st->oldest_ns = ts;
		if (ts > st->newest_ns)
			st->newest_ns = ts;
	}
}

/* ---- dumping ---- */

static int dump_event(struct recording_writer *w, const struct fr_event *e)
{
	const struct fr_call *c = &e->call;
	struct umt_proc_exit_rec x;
	struct umt_call_rec r;

	switch (e->type) {
	case REC_CALL:
		memset(&r, 0, sizeof(r));
		r.type = UMT_REC_CALL;
		r.api = c->api;
		r.ts_ns = e->ts_ns;
		r.duration_ns = c->duration_ns;
		r.pid = c->pid;
		r.tid = c->tid;
		r.size = c->size;
		r.flags = c->flags;
		r.handle = c->handle;
		r.aux = c->aux;
		r.ret = c->ret;
		r.end = c->end;
		r.pages_taken = c->pages_taken;
		r.pages_freed = c->pages_freed;
		r.faulted_pages = c->faulted_pages;
		r.device_pages = c->device_pages;
		r.is_free = c->is_free;
		memcpy(r.comm, c->comm, TASK_COMM_LEN);
		memcpy(r.pcomm, c->pcomm, TASK_COMM_LEN);
		return recording_writer__add_call(w, &r, c->stack ? c->stack->frames : NULL,
						  c->stack ? c->stack->n : 0);
	case REC_EXIT:
		memset(&x, 0, sizeof(x));
		x.type = UMT_REC_PROC_EXIT;
		x.pid = e->exit.pid;
		x.ts_ns = e->ts_ns;
		memcpy(x.comm, e->exit.comm, TASK_COMM_LEN);
		return recording_writer__add_exit(w, &x);
	case REC_SAMPLE:
		return recording_writer__add_sample(w, &e->sample);
	case REC_STOP:
		return recording_writer__add_stop(w, e->stop);
	case REC_TORCH:
		return recording_writer__add_torch(w, &e->torch);
	default:
		return 0;
	}
}

int flight__dump_flags(struct flight_recorder *fr, const char *path, unsigned int flags)
{
	struct recording_writer *w;
	size_t i;
	int err = 0, cerr;

	flight__expire(fr, clock__mono_ns());
	/* Strings and stacks get the dump's own ids: the file stands alone. */
	w = recording_writer__open(path, flags);
	if (!w)
		return -errno;
	if (fr->info_set)
		err = recording_writer__set_info(w, &fr->info);
	for (i = 0; i < fr->count && !err; i++)
		err = dump_event(w, &fr->ev[(fr->head + i) % fr->cap]);
	cerr = recording_writer__close(w);
	return err ? err : cerr;
}

int flight__dump(struct flight_recorder *fr, const char *path)
{
	return flight__dump_flags(fr, path, 0);
}

void flight__free(struct flight_recorder *fr)
{
	if (!fr)
		return;
	while (fr->count)
		evict_head(fr);
	free(fr->ev);
	free(fr->stacks);
	hashtab__free(&fr->stack_index);
	free(fr);
}
