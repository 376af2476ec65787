// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lib/escape.h"
#include "lib/log.h"
#include "rec/replay.h"

static void on_release(const struct alloc_entry *e, bool at_exit, void *ctx)
{
	callsites__release(ctx, e->site, e->host_bytes, e->size, at_exit);
}

void replay_view__init(struct replay_view *v, uint64_t page_size)
{
	memset(v, 0, sizeof(*v));
	v->page_size = page_size;
	summary__init(&v->summary, page_size);
	callsites__init(&v->sites, REPLAY_MAX_SITES);
	torch_model__init(&v->torch, NULL);
	/* What leaves the table of allocations leaves its call site's held figures. */
	v->summary.on_release = on_release;
	v->summary.release_ctx = &v->sites;
}

uint32_t replay_view__add_call(struct replay_view *v, const struct umt_call_rec *r,
			       const struct sym_frame *frames, size_t n)
{
	uint32_t site;

	site = callsites__add(&v->sites, r, frames, n, v->page_size);
	summary__consume_site(&v->summary, r, site);
	torch_model__call(&v->torch, r, site);
	if (!v->first_call_ns)
		v->first_call_ns = r->ts_ns;
	v->last_call_ns = r->ts_ns;
	return site;
}

void replay_view__add_torch(struct replay_view *v, const struct torch_sample *s)
{
	if (torch_model__add(&v->torch, s))
		wlog("out of memory: PyTorch allocator samples are lost");
}

void replay_view__exit(struct replay_view *v, const struct umt_proc_exit_rec *r)
{
	summary__proc_exit(&v->summary, r);
	torch_model__exit(&v->torch, r->pid);
}

bool replay_view__wanted(const struct replay_view *v, uint32_t pid)
{
	const struct replay_opts *o = v->opts;
	size_t i;

	if (!o || !o->n_pids)
		return true;
	for (i = 0; i < o->n_pids; i++)
		if ((uint32_t)o->pids[i] == pid)
			return true;
	return false;
}

void replay_view__free(struct replay_view *v)
{
	summary__free(&v->summary);
	callsites__free(&v->sites);
	torch_model__free(&v->torch);
}

/* ---- from a recording ---- */

static const struct replay_hooks no_hooks;

static const struct replay_hooks *hooks_of(const struct replay_view *v)
{
	return v->opts->hooks ? v->opts->hooks : &no_hooks;
}

static void seen_at(struct replay_view *v, uint64_t ts_ns)
{
	if (ts_ns > v->last_ns)
		v->last_ns = ts_ns;
}

static void file_header(void *ctx, const struct recording_header *h)
{
	struct replay_view *v = ctx;

	v->hdr = *h;
	/* Host bytes are pages of the recording host's size. */
	v->page_size = h->file.page_size;
	v->summary.page_size = h->file.page_size;
}

/* The cost model of the recording host, unless told otherwise. */
static void file_info(void *ctx, const struct rec_info *i)
{
	struct replay_view *v = ctx;
	struct platform_model *m = &v->summary.platform;

	v->dropped = i->dropped;
	v->summary.pages_unseen = i->pages_unseen;
	if (v->info_seen || v->opts->platform_given)
		return;
	v->info_seen = true;
	if (i->platform_forced == PLATFORM_UNIFIED || i->platform_forced == PLATFORM_DISCRETE) {
		m->forced = i->platform_forced;
		m->why = "--platform when recorded";
	} else if (i->platform_driver == PLATFORM_UNIFIED) {
		m->decided = PLATFORM_UNIFIED;
		m->why = "the recording host's driver: a GPU without memory of its own";
	}
}

static void file_call(void *ctx, const struct umt_call_rec *r,
		      const struct sym_frame *frames, size_t n)
{
	struct replay_view *v = ctx;
	const struct replay_hooks *h = hooks_of(v);
	uint32_t site;

	seen_at(v, r->ts_ns);
	if (!replay_view__wanted(v, r->pid))
		return;
	site = replay_view__add_call(v, r, frames, n);
	if (h->on_call)
		h->on_call(v->opts->ctx, v, r, site);
}

static void file_exit(void *ctx, const struct umt_proc_exit_rec *r)
{
	struct replay_view *v = ctx;
	const struct replay_hooks *h = hooks_of(v);

	seen_at(v, r->ts_ns);
	if (!replay_view__wanted(v, r->pid))
		return;
	replay_view__exit(v, r);
	if (h->on_exit)
		h->on_exit(v->opts->ctx, v, r);
}

static void file_sample(void *ctx, const struct rec_sample *s)
{
	struct replay_view *v = ctx;
	const struct replay_hooks *h = hooks_of(v);

	seen_at(v, s->ts_ns);
	if (s->has_shrunk)
		driver_pool__shrunk(&v->summary.pool, s->driver_shrunk);
	if (h->on_sample)
		h->on_sample(v->opts->ctx, v, s);
}

static void file_stop(void *ctx, const struct rec_stop *s)
{
	struct replay_view *v = ctx;
	const struct replay_hooks *h = hooks_of(v);

	seen_at(v, s->ts_ns);
	if (replay_view__wanted(v, s->pid) && h->on_stop)
		h->on_stop(v->opts->ctx, v, s);
}

static void file_torch(void *ctx, const struct torch_sample *s)
{
	struct replay_view *v = ctx;
	const struct replay_hooks *h = hooks_of(v);

	seen_at(v, s->ts_ns);
	if (!replay_view__wanted(v, s->pid))
		return;
	replay_view__add_torch(v, s);
	if (h->on_torch)
		h->on_torch(v->opts->ctx, v, s);
}

static const struct recording_ops file_ops = {
	.on_header = file_header,
	.on_info = file_info,
	.on_call = file_call,
	.on_exit = file_exit,
	.on_sample = file_sample,
	.on_stop = file_stop,
	.on_torch = file_torch,
};

int replay_view__load(struct replay_view *v, const char *path, const struct replay_opts *o)
{
	char warn[320], shown[ESC_TERM_LEN(PATH_MAX)];
	int err;

	/* The recording host's driver counts, not this one's. */
	memset(&v->summary.platform, 0, sizeof(v->summary.platform));
	if (o->platform_given) {
		v->summary.platform.forced = o->platform;
		v->summary.platform.why = "--platform";
	}
	v->opts = o;
	err = recording__replay(path, &file_ops, v, &v->st);
	v->opts = NULL;
	/* Recordings come from elsewhere, their names with them. */
	esc__term(path, shown, sizeof(shown));
	if (err) {
		elog("%s: %s", shown, v->st.why);
		return err;
	}
	if (replay_stats__warning(&v->st, warn, sizeof(warn)))
		wlog("%s: %s", shown, warn);
	return 0;
}
