// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The processes the guard knows: those that made GPU calls and those it
 * stopped, by pid, each with a pidfd opened at first sight so that a
 * recycled pid is never signalled.
 */
#include <search.h>
#include <stdlib.h>
#include <unistd.h>
#include "guardd/guard.h"

static int proc_cmp(const void *a, const void *b)
{
	const struct guard_proc *x = a, *y = b;

	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

struct guard_proc *guard__proc(struct guard *g, uint32_t pid, bool create)
{
	struct guard_proc key = { .pid = pid }, *p, **slot;

	slot = tfind(&key, &g->procs, proc_cmp);
	if (slot)
		return *slot;
	if (!create || g->n_procs >= GUARD_MAX_PROCS)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	/* Opened now, while pid surely names this process. */
	p->pidfd = pidfd__open((pid_t)pid);
	if (p->pidfd < 0) {
		free(p);
		return NULL;
	}
	if (!tsearch(p, &g->procs, proc_cmp)) {
		close(p->pidfd);
		free(p);
		return NULL;
	}
	g->n_procs++;
	return p;
}

struct collect {
	struct guard_proc **v;
	size_t n;
};

static void collect_one(const void *node, VISIT which, void *ctx)
{
	struct collect *c = ctx;

	if (which == postorder || which == leaf)
		c->v[c->n++] = *(struct guard_proc *const *)node;
}

struct guard_proc **guard__procs_sorted(struct guard *g, size_t *n)
{
	struct collect c = { .v = calloc(g->n_procs + 1, sizeof(*c.v)) };

	*n = 0;
	if (!c.v)
		return NULL;
	twalk_r(g->procs, collect_one, &c);
	*n = c.n;
	return c.v;
}

static void proc_free(void *p)
{
	struct guard_proc *gp = p;

	if (gp->pidfd >= 0)
		close(gp->pidfd);
	free(gp);
}

void guard__proc_drop(struct guard *g, struct guard_proc *p)
{
	tdelete(p, &g->procs, proc_cmp);
	g->n_procs--;
	proc_free(p);
}

void guard__procs_free(struct guard *g)
{
	tdestroy(g->procs, proc_free);
	g->procs = NULL;
	g->n_procs = 0;
}
