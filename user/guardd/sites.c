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
#include "guardd/guard.h"
#include "lib/sys.h"
#include "stacks/callstack.h"

static void on_release(const struct alloc_entry *e, bool at_exit, void *ctx)
{
	callsites__release(ctx, e->site, e->host_bytes, e->size, at_exit);
}

int guard_sites__init(struct guard *g)
{
	summary__init(&g->summary, page__size());
	g->summary.forget_exited = true;	/* a daemon: jobs come and go */
	platform__init(&g->summary.platform, g->opt.ao.platform);
	callsites__init(&g->sites, 65536);
	g->summary.on_release = on_release;
	g->summary.release_ctx = &g->sites;
	/* Frame pointers only: a daemon keeps its per-call cost small. */
	return callstack__init(&g->stacks, STACK_FP);
}

size_t guard_sites__call(struct guard *g, const struct umt_call_rec *r,
			 struct sym_frame *frames, uint32_t *site)
{
	size_t n = callstack__resolve(&g->stacks, r, frames);

	*site = callsites__add(&g->sites, r, frames, n, page__size());
	summary__consume_site(&g->summary, r, *site);
	return n;
}

void guard_sites__exit(struct guard *g, const struct umt_proc_exit_rec *r)
{
	summary__proc_exit(&g->summary, r);
	callstack__forget(&g->stacks, r->pid);
}

uint64_t guard_sites__proc_host(struct guard *g, uint32_t pid)
{
	const struct summary_proc *p = summary__proc(&g->summary, pid);

	return p ? summary__proc_holds(&g->summary, p) : 0;
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
void guard_sites__top_site(struct guard *g, uint32_t pid, char *buf, size_t len)
{
	struct top_site t = { .pid = pid, .n = g->sites.n };
	struct callsite *c;

	snprintf(buf, len, "-");
	if (!t.n)
		return;
	t.host = calloc(t.n, sizeof(*t.host));
	if (!t.host)
		return;
	alloc_table__for_each(&g->summary.table, add_entry, &t);
	c = t.best ? callsites__get(&g->sites, t.best) : NULL;
	if (c)
		snprintf(buf, len, "%s", c->key);
	free(t.host);
}

void guard_sites__free(struct guard *g)
{
	summary__free(&g->summary);
	callsites__free(&g->sites);
	callstack__free(&g->stacks);
}
