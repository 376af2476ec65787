// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The processes the guard knows: those that made GPU calls and those it
 * stopped, by pid, each with a pidfd opened at first sight so that a
 * recycled pid is never signalled.
 */
#include <stdlib.h>
#include <unistd.h>
#include "guardd/daemon.h"
#include "lib/procfs.h"

/* A row of the table: callers keep a guard_proc across additions, so it stays put. */
struct proc_ref {
	uint32_t pid;
	struct guard_proc *p;
};

struct guard_proc *guard__proc(struct pid_table *procs, uint32_t pid, bool create)
{
	struct proc_ref *ref = pid_table__find(procs, pid);
	struct guard_proc *p;

	if (ref)
		return ref->p;
	if (!create || procs->n >= GUARD_MAX_PROCS)
		return NULL;
	/* The guard starts zeroed (calloc), its table unsized. */
	if (!procs->row_size)
		pid_table__init(procs, sizeof(struct proc_ref));
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	/* Opened now, while pid surely names this process. */
	p->pidfd = pidfd__open((pid_t)pid);
	if (p->pidfd < 0)
		goto err_free;
	ref = pid_table__get(procs, pid);
	if (!ref)
		goto err_close;
	ref->p = p;
	return p;
err_close:
	close(p->pidfd);
err_free:
	free(p);
	return NULL;
}

static int proc_cmp(const void *a, const void *b)
{
	const struct guard_proc *x = *(struct guard_proc *const *)a;
	const struct guard_proc *y = *(struct guard_proc *const *)b;

	return cmp__u64(x->pid, y->pid);
}

struct guard_proc **guard__procs_sorted(struct pid_table *procs, size_t *n)
{
	struct guard_proc **v = calloc(procs->n + 1, sizeof(*v));
	size_t i;

	*n = 0;
	if (!v)
		return NULL;
	for (i = 0; i < procs->n; i++)
		v[i] = ((struct proc_ref *)pid_table__row(procs, i))->p;
	qsort(v, procs->n, sizeof(*v), proc_cmp);
	*n = procs->n;
	return v;
}

static void proc_free(struct guard_proc *p)
{
	if (p->pidfd >= 0)
		close(p->pidfd);
	free(p);
}

void guard__proc_drop(struct pid_table *procs, struct guard_proc *p)
{
	pid_table__remove(procs, p->pid);
	proc_free(p);
}

void guard__procs_free(struct pid_table *procs)
{
	size_t i;

	for (i = 0; i < procs->n; i++)
		proc_free(((struct proc_ref *)pid_table__row(procs, i))->p);
	pid_table__free(procs);
}
