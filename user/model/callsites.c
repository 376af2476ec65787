// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/sys.h"
#include "model/callsites.h"

#define KEY_MAX 8192
#define OVERFLOW_KEY "[other call sites: table full]"

void callsites__init(struct callsites *cs, size_t max_sites)
{
	memset(cs, 0, sizeof(*cs));
	cs->max_sites = max_sites;
}

static int key_cmp(const void *a, const void *b)
{
	const struct callsite *x = a, *y = b;

	return cmp__u64(x->api, y->api) ?: strcmp(x->key, y->key);
}

/*
 * The aggregation key names functions only: offsets within a function
 * differ between builds. An unnamed frame is its place in its file, the
 * same in every process that maps the file, wherever it is mapped.
 */
static const char *frame_key(const struct sym_frame *f, char *buf, size_t len)
{
	if (f->func)
		return f->func;
	if (f->module) {
		snprintf(buf, len, "%s+0x%llx", f->module, (unsigned long long)f->offset);
		return buf;
	}
	return "[unknown]";
}

const char *callsites__frame_name(const struct sym_frame *f, char *buf, size_t len)
{
	if (f->func)
		snprintf(buf, len, "%s+0x%llx (%s)", f->func,
			 (unsigned long long)f->offset, f->module ? f->module : "?");
	else if (f->module)
		snprintf(buf, len, "%s+0x%llx", f->module, (unsigned long long)f->offset);
	else
		snprintf(buf, len, "[unknown 0x%llx]", (unsigned long long)f->addr);
	return buf;
}

/*
 * ';' joins a key's frames and flame__add_site() splits it there again: one
 * inside a name (a perf map can hold any) would make it two frames.
 */
static void semicolons_out(char *s)
{
	for (; *s; s++)
		if (*s == ';')
			*s = ':';
}

static void build_key(const struct sym_frame *frames, size_t n, char *key, size_t len)
{
	char buf[512];
	size_t i, used = 0, name;

	key[0] = '\0';
	for (i = 0; i < n && used < len; i++) {
		int w = snprintf(key + used, len - used, "%s%s", i ? ";" : "",
				 frame_key(&frames[i], buf, sizeof(buf)));

		if (w < 0)
			break;
		name = used + (i ? 1 : 0);
		if (name < len)
			semicolons_out(key + name);
		used += (size_t)w;
	}
}

static int grow_ids(struct callsites *cs)
{
	size_t cap = cs->cap ? cs->cap * 2 : 64;
	struct callsite **v;

	v = realloc(cs->by_id, cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	cs->by_id = v;
	cs->cap = cap;
	return 0;
}

static void site_free(void *p)
{
	struct callsite *s = p;
	size_t i;

	for (i = 0; i < s->n_frames; i++)
		free(s->frames[i]);
	free(s->frames);
	free(s->key);
	free(s);
}

static struct callsite *site_new(uint32_t api, const char *key, const struct sym_frame *frames,
				 size_t n)
{
	struct callsite *s = calloc(1, sizeof(*s));
	char buf[1024];
	size_t i;

	if (!s)
		return NULL;
	s->api = api;
	s->key = strdup(key);
	s->frames = calloc(n + 1, sizeof(*s->frames));
	if (!s->key || !s->frames)
		goto err;
	for (i = 0; i < n; i++) {
		s->frames[i] = strdup(callsites__frame_name(&frames[i], buf, sizeof(buf)));
		if (!s->frames[i])
			goto err;
		s->n_frames++;
	}
	return s;
err:
	site_free(s);
	return NULL;
}

static struct callsite *site_lookup(struct callsites *cs, uint32_t api, const char *key,
				    const struct sym_frame *frames, size_t n)
{
	struct callsite probe = { .api = api, .key = (char *)key }, *s, **slot;

	slot = tfind(&probe, &cs->tree, key_cmp);
	if (slot)
		return *slot;
	if (cs->max_sites && cs->n >= cs->max_sites && api != CALLSITES_ANY_API)
		return NULL;
	if (cs->n == cs->cap && grow_ids(cs))
		return NULL;
	s = site_new(api, key, frames, n);
	if (!s)
		return NULL;
	slot = tsearch(s, &cs->tree, key_cmp);
	if (!slot) {
		site_free(s);
		return NULL;
	}
	cs->by_id[cs->n++] = s;
	s->id = (uint32_t)cs->n;
	return s;
}

static void note_pid(struct callsite *s, uint32_t pid)
{
	size_t i;

	for (i = 0; i < s->n_pids; i++)
		if (s->pids[i] == pid)
			return;
	if (s->n_pids < sizeof(s->pids) / sizeof(s->pids[0]))
		s->pids[s->n_pids++] = pid;
}

uint32_t callsites__add(struct callsites *cs, const struct umt_call_rec *r,
			const struct sym_frame *frames, size_t n, uint64_t page_size)
{
	static char key[KEY_MAX];
	struct callsite *s;

	build_key(frames, n, key, sizeof(key));
	s = site_lookup(cs, r->api, key, frames, n);
	if (!s) {
		/* Bounded: past the cap, new stacks share one site. */
		cs->overflowed++;
		s = site_lookup(cs, CALLSITES_ANY_API, OVERFLOW_KEY, NULL, 0);
		if (!s)
			return 0;
	}
	if (!s->calls) {
		s->first_ns = r->ts_ns;
		memcpy(s->comm, r->pcomm, sizeof(s->comm));
		s->comm[sizeof(s->comm) - 1] = '\0';
	}
	s->calls++;
	s->last_ns = r->ts_ns;
	s->host_taken += r->pages_taken * page_size;
	s->device_taken += r->device_pages * page_size;
	note_pid(s, r->pid);
	if (r->end != UMT_END_RETURNED && r->end != UMT_END_LOST_RETURN)
		return s->id;
	if (r->ret) {
		s->failed++;
		return s->id;
	}
	if (!r->is_free) {
		s->size_bytes += r->size;
		s->held_count++;
		s->held_host += r->pages_taken * page_size;
		s->held_size += r->size;
	}
	return s->id;
}

struct callsite *callsites__get(const struct callsites *cs, uint32_t id)
{
	if (!id || id > cs->n)
		return NULL;
	return cs->by_id[id - 1];
}

void callsites__release(struct callsites *cs, uint32_t id, uint64_t host_bytes,
			uint64_t size, bool at_exit)
{
	struct callsite *s = callsites__get(cs, id);

	if (!s)
		return;
	s->held_count--;
	s->held_host -= host_bytes;
	s->held_size -= size;
	if (!at_exit)
		return;
	s->exit_count++;
	s->exit_host += host_bytes;
	s->exit_size += size;
}

static int by_host_desc(const void *a, const void *b)
{
	const struct callsite *x = *(struct callsite *const *)a;
	const struct callsite *y = *(struct callsite *const *)b;

	if (x->host_taken != y->host_taken)
		return x->host_taken < y->host_taken ? 1 : -1;
	if (x->held_host != y->held_host)
		return x->held_host < y->held_host ? 1 : -1;
	return x->id < y->id ? -1 : 1;
}

struct callsite **callsites__sorted(const struct callsites *cs)
{
	struct callsite **v = calloc(cs->n + 1, sizeof(*v));

	if (!v)
		return NULL;
	/* No site yet: by_id is NULL, which memcpy and qsort may not get. */
	if (!cs->n)
		return v;
	memcpy(v, cs->by_id, cs->n * sizeof(*v));
	qsort(v, cs->n, sizeof(*v), by_host_desc);
	return v;
}

void callsites__free(struct callsites *cs)
{
	tdestroy(cs->tree, site_free);
	free(cs->by_id);
	memset(cs, 0, sizeof(*cs));
}
