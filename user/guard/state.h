/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The running guard's state file, the only channel between the daemon and
 * `umtrace status` / `umtrace resume`: a root-owned file (0600) replaced
 * atomically, no socket, no listener. Line-based text:
 *
 *	umtrace-guard-state 1
 *	KEY VALUE			(one per line, see state.c)
 *	stopped PID ACTION REASON TIME_UNIX CGROUP COMM
 *	warned PID TIME_UNIX SECONDS_TO_FLOOR SIGNAL COMM
 *
 * CGROUP ("-" if none) and COMM are tokens (esc__token(): \xNN for a
 * space, a control or a byte that is not UTF-8, "\\" for '\'), read back
 * to the bytes they were.
 */
#ifndef UMTRACE_GUARD_STATE_H
#define UMTRACE_GUARD_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GUARD_STATE_DEFAULT "/run/umtrace/guard.state"
#define GUARD_STATE_MAX_STOPPED 256
#define GUARD_STATE_MAX_WARNED 64

struct guard_stopped {
	uint32_t pid;
	char action[16];	/* "stop", "freeze", "dry-run" */
	char reason[16];	/* "admission", "floor", "reclaim", "policy" */
	int64_t when;		/* unix seconds */
	char cgroup[512];	/* "-" if none */
	char comm[64];
};

/* A job warned of its floor (--warn-eta), in its episode still. */
struct guard_warned {
	uint32_t pid;
	int64_t when;		/* unix seconds */
	uint64_t eta;		/* seconds to the floor when warned */
	char signal[8];		/* "USR1"..., "-": none sent */
	char comm[64];
};

struct guard_status {
	uint32_t pid;		/* the daemon */
	int64_t started, updated;	/* unix seconds */
	uint64_t floor, low, drop, auto_resume;
	char metric[16];	/* "available" or "free" */
	char action[16];
	bool dry_run;
	int64_t headroom;	/* the kernel's, bytes above the floor */
	uint64_t metric_value;	/* the last sample */
	uint64_t checks, kernel_stops, policy_stops, send_failed, reclaims, samples;
	/*
	 * The page programs (guardd/arm.h): attached all the time, or attached
	 * now (within arm_margin of LOW, attached arms times); the margin
	 * covers looks up to arm_late_us past their time.
	 */
	uint64_t pages_always, pages_on, arm_margin, arm_late_us, arms;
	/*
	 * The metric's slide (guardd/daemon.h), on the shortest horizon that
	 * names one: its length in seconds (0: none slides), its fall per
	 * hour, and when the floor is reached at that pace.
	 */
	uint64_t slide_horizon, slide_per_hour, seconds_to_floor;
	/* What the daemon and its helper locked (enum mem_lock); the daemon's resident bytes. */
	uint64_t memlock, helper_memlock, resident_bytes;
	/*
	 * What the NVIDIA driver's page pool holds (model/driver_pool.h): host
	 * memory no process holds, given back under pressure by its shrinker,
	 * but not in MemAvailable. driver_pool_seen: a free kept its pages.
	 */
	uint64_t driver_pool, driver_pool_seen;
	uint64_t warn_eta;	/* --warn-eta, seconds; 0: no warnings */
	uint64_t warnings;	/* jobs warned since the start */
	size_t n_stopped;
	struct guard_stopped stopped[GUARD_STATE_MAX_STOPPED];
	size_t n_warned;
	struct guard_warned warned[GUARD_STATE_MAX_WARNED];
};

/* A status to read into (150 KiB: not for the stack), or NULL, said. */
struct guard_status *guard_state__new(void);
/* The file's text (the caller frees it), or NULL with errno set. */
char *guard_state__format(const struct guard_status *st, size_t *len);
/* 0, -ENOENT (no guard has run), -EINVAL (not a state file), -errno. */
int guard_state__read(const char *path, struct guard_status *st);
/* The same, saying in one line why it could not be read. */
int guard_state__load(const char *path, struct guard_status *st);

/* The daemon that wrote the state file is alive and is a umtrace. */
bool guard_state__daemon_alive(uint32_t pid);
/* The process is still stopped, or its cgroup frozen, as the guard left it. */
bool guard_state__still_held(const struct guard_stopped *s);

#endif /* UMTRACE_GUARD_STATE_H */
