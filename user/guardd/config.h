/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * `umtrace guard --config FILE`: an INI file (inih) of the same settings
 * as the command line, the guard's scope (which processes it may stop)
 * and the processes it never stops. See scripts/guard.conf.example.
 *
 * Order: guard_config__init(), guard_config__load() for the file, then
 * guard_config__set() for each command-line flag, which wins.
 */
#ifndef UMTRACE_GUARD_CONFIG_H
#define UMTRACE_GUARD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "guard/action.h"
#include "guard/policy.h"
#include "guardd/protect.h"
#include "guardd/scope.h"

struct guard_config {
	/* As written (SIZE or N%), resolved against MemTotal by guard_config__policy. */
	char *floor;		/* NULL: the default */
	char *low;
	char *drop;
	char *auto_resume;	/* NULL: stopped jobs stay stopped */
	enum guard_metric metric;
	enum guard_act action;
	struct guard_scope scope;
	struct protect_set protect;	/* --protect: besides the built-ins */
	bool dry_run;
	bool torch;		/* probe PyTorch's allocator hook (libc10) */
	/* The page programs stay attached far from the floor too (guardd/arm.h). */
	bool pages_always;
	char *on_stop;		/* a command; NULL: none */
	/* Warn a job whose time to the floor falls under warn_eta_ms (0: never). */
	uint64_t warn_eta_ms;
	char *on_warn;		/* a command; NULL: none */
	int warn_signal;	/* sent to the job warned; 0: none */
	char *postmortem_dir;
	char *metrics_file;
	char **libcuda;
	size_t n_libcuda;
	pid_t self_pid;		/* umtrace itself, never stopped */
	bool cli_libcuda;	/* a --libcuda has replaced the file's list */
};

void guard_config__init(struct guard_config *cfg);
/*
 * Read FILE on top of cfg. Keys go before any section or in [guard];
 * only libcuda and protect may repeat. An empty file (or one of comments)
 * is valid: everything keeps its default. The file must be owned by root
 * (or by the caller) and not writable by group or others: it names
 * commands and paths that umtrace, as root, runs and writes.
 * 0, or -errno with a one-line message "FILE:LINE: ..." in err; cfg may
 * then hold part of the file.
 */
int guard_config__load(struct guard_config *cfg, const char *path, char *err, size_t errlen);
/*
 * One command-line flag: key as in the file ("auto_resume") or as the flag
 * ("auto-resume"); a flag without a value passes "true". Replaces the
 * file's value; the first --libcuda replaces the file's list, --protect
 * adds to it (a flag never unprotects), --auto-resume off turns it off.
 * 0, or -EINVAL with a message naming the flag ("invalid --floor ...").
 */
int guard_config__set(struct guard_config *cfg, const char *key, const char *value,
		      char *err, size_t errlen);
/* The thresholds resolved against mem_total, and checked: guard_policy__init. */
int guard_config__policy(const struct guard_config *cfg, uint64_t mem_total,
			 struct guard_policy *p, char *err, size_t errlen);
void guard_config__free(struct guard_config *cfg);
/* "USR1", "TERM"... of a warn_signal; "-" for another. */
const char *guard_config__signal_name(int sig);

#endif /* UMTRACE_GUARD_CONFIG_H */
