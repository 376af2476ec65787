/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The guard's actuator: the one place that stops and resumes processes.
 * Stopping is SIGSTOP through a pidfd (a recycled pid is never hit) or a
 * freeze of the process's cgroup v2; resuming is SIGCONT or a thaw. Never
 * a kill: a stopped job keeps its state.
 */
#ifndef UMTRACE_GUARD_ACTION_H
#define UMTRACE_GUARD_ACTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum guard_act {
	GUARD_ACT_STOP,		/* SIGSTOP the process */
	GUARD_ACT_FREEZE,	/* freeze its cgroup (the container-level stop) */
};


int guard_act__parse(const char *s, enum guard_act *out);
const char *guard_act__name(enum guard_act a);

/* SIGSTOP/SIGCONT through a pidfd (or the pid if pidfd < 0). 0 or -errno. */
int guard_act__signal(int pidfd, pid_t pid, int sig);

/* The cgroup is frozen (cgroup.events says "frozen 1"). */
bool cgroup__frozen(const char *cg);
/*
 * Freeze or thaw cgroup cg (relative path). Refuses the root cgroup and
 * any cgroup that holds umtrace itself: the guard must not freeze itself.
 * 0 or -errno.
 */
int cgroup__set_frozen(const char *cg, bool frozen);

#endif /* UMTRACE_GUARD_ACTION_H */
