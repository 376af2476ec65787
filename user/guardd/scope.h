/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * --scope: which processes the guard may stop. One kind list for both
 * halves: the kernel side's (enum umt_guard_scope in bpf/umtrace.h).
 */
#ifndef UMTRACE_GUARD_SCOPE_H
#define UMTRACE_GUARD_SCOPE_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <linux/types.h>
#include "umtrace.h"

#define GUARD_SCOPE_MAX_PIDS 64

struct guard_scope {
	enum umt_guard_scope kind;	/* the kernel side's kinds (bpf/umtrace.h) */
	pid_t pids[GUARD_SCOPE_MAX_PIDS];
	size_t n_pids;
	char *cgroup;		/* relative to /sys/fs/cgroup, "a/b"; "" is the root */
	regex_t *comm_re;	/* compiled REG_EXTENDED | REG_NOSUB */
	char *spec;		/* as given, for log lines; NULL: none was given */
};

/*
 * "gpu", "all", "pid:1,2,3", "cgroup:/sys/fs/cgroup/a/b" or "cgroup:a/b",
 * "comm:REGEX" (extended, unanchored: "comm:^python"). On success sc is
 * replaced (free it with guard_scope__free); on failure it is left alone.
 * name is the setting as messages call it ("--scope"; NULL: "scope").
 * 0, or -EINVAL/-ENOMEM with a one-line message.
 */
int guard_scope__parse(struct guard_scope *sc, const char *spec, const char *name,
		       char *err, size_t errlen);
/*
 * cgroup: the process's cgroup v2 path as /proc/PID/cgroup gives it
 * ("/a/b"); NULL if unknown. comm: NULL if unknown.
 */
bool guard_scope__match(const struct guard_scope *sc, pid_t pid, const char *comm,
			const char *cgroup);
void guard_scope__free(struct guard_scope *sc);

/*
 * A cgroup v2 path as the guard keeps it, relative to the root with single
 * slashes ("a/b"; "" is the root), from "/sys/fs/cgroup/a/b" or "a/b"; ".."
 * and "." refused. name and spec for the message. 0, or -EINVAL/-ENOMEM.
 */
int guard_cgroup__parse(const char *path, char **out, const char *name, const char *spec,
			char *err, size_t errlen);
/* base ("a/b") holds cgroup (/proc/PID/cgroup's "/a/b/c"); NULL: unknown, no. */
bool guard_cgroup__holds(const char *base, const char *cgroup);

#endif /* UMTRACE_GUARD_SCOPE_H */
