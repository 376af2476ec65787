// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Who holds what, for the guard: the attribution table and call sites fed
 * with every GPU call, so that a stop names the process's GPU-attributed
 * host memory and the call site holding most of it, and a post-mortem
 * can say who held what at that moment.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "guardd/daemon.h"
#include "lib/sys.h"
#include "stacks/callstack.h"

static void on_release(const struct alloc_entry *e, bool at_exit, void *ctx)
{
	callsites__release(ctx, e->site, e->host_bytes, e->size, at_exit);
}

int guard_sites__init(struct guard_holders *h, enum platform forced)
{
	summary__init(&h->summary, page__size());
	h->summary.forget_exited = true;	/* a daemon: jobs come and go */
	platform__init(&h->summary.platform, forced);
	callsites__init(&h->sites, 65536);
	h->summary.on_release = on_release;
	h->summary.release_ctx = &h->sites;
	/* Frame pointers only: a daemon keeps its per-call cost small. */
	return callstack__init(&h->stacks, STACK_FP);
}

size_t guard_sites__call(struct guard_holders *h, const struct umt_call_rec *r,
			 struct sym_frame *frames, uint32_t *site)
{
	size_t n = callstack__resolve(&h->stacks, r, frames);

	*site = callsites__add(&h->sites, r, frames, n, page__size());
	summary__consume_site(&h->summary, r, *site);
	return n;
}

void guard_sites__exit(struct guard_holders *h, const struct umt_proc_exit_rec *r)
{
	summary__proc_exit(&h->summary, r);
	callstack__forget(&h->stacks, r->pid);
}

uint64_t guard_sites__proc_host(const struct guard_holders *h, uint32_t pid)
{
	const struct summary_proc *p = summary__proc(&h->summary, pid);

	return p ? summary__proc_holds(&h->summary, p) : 0;
}

struct top_site {
	uint32_t pid;
	uint32_t best;
	uint64_t best_host;
	uint64_t *host;		/* by site id */
	size_t n;
};

static void add_entry(const struct alloc_entry *e, void *ctx)
{
	struct top_site *t = ctx;

	if (e->key.pid != t->pid || !e->site || e->site > t->n)
		return;
	t->host[e->site - 1] += e->host_bytes ? e->host_bytes : 1;
	if (t->host[e->site - 1] > t->best_host) {
		t->best_host = t->host[e->site - 1];
		t->best = e->site;
	}
}

/* The call site whose outstanding allocations of pid hold the most. */
void guard_sites__top_site(const struct guard_holders *h, uint32_t pid, char *buf, size_t len)
{
	struct top_site t = { .pid = pid, .n = h->sites.n };
	struct callsite *c;

	snprintf(buf, len, "-");
	if (!t.n)
		return;
	t.host = calloc(t.n, sizeof(*t.host));
	if (!t.host)
		return;
	alloc_table__for_each(&h->summary.table, add_entry, &t);
	c = t.best ? callsites__get(&h->sites, t.best) : NULL;
	if (c)
		snprintf(buf, len, "%s", c->key);
	free(t.host);
}

void guard_sites__free(struct guard_holders *h)
{
	summary__free(&h->summary);
	callsites__free(&h->sites);
	callstack__free(&h->stacks);
}
