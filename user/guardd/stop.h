/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A stop, as decided: made once, at the decision (the kernel's record or
 * the sampled rule), and handed as it is to everything that tells of it:
 * the log line, the flight recorder, the post-mortem bundle and the
 * --on-stop hook. Nothing downstream computes it again.
 */
#ifndef UMTRACE_GUARD_STOP_H
#define UMTRACE_GUARD_STOP_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <linux/types.h>
#include "guard/action.h"
#include "guard/policy.h"
#include "model/torch.h"
#include "umtrace.h"

#define GUARD_STOP_DETAIL_MAX 192
#define GUARD_STOP_SITE_MAX 512
#define GUARD_STOP_CAUSE_MAX 256

struct guard_stop {
	uint32_t pid;
	char comm[TASK_COMM_LEN];
	char cgroup[512];		/* its cgroup v2 path, "" unknown */
	enum umt_guard_reason reason;
	char detail[GUARD_STOP_DETAIL_MAX];	/* why, in words */
	uint64_t ts_ns;			/* decided, CLOCK_MONOTONIC */
	time_t when;			/* decided, wall clock */
	bool first;			/* not already stopped by this guard */
	bool dry;			/* decided only: nothing was sent */
	int send_err;			/* the signal could not be sent: -errno */
	enum guard_act action;
	enum guard_metric metric;
	uint64_t metric_bytes;		/* the metric's last sample */
	uint64_t held;			/* host bytes its GPU allocations hold */
	char top_site[GUARD_STOP_SITE_MAX];	/* the call site holding most */
	bool torch;			/* its PyTorch allocator reported (--torch) */
	struct torch_verdict torch_v;	/* its allocator, summed over its devices */
	/* A warning (--warn-eta), not a stop: when the floor is reached at its pace. */
	bool warn;
	uint64_t eta_s, eta_horizon_s;	/* seconds to the floor; the horizon that says so */
	double per_hour;		/* its host bytes' growth */
	int signal;			/* --warn-signal; 0: none */
	int signal_err;			/* it could not be sent: -errno */
	/* Its words, named once when it is made (guard_stop__name). */
	const char *reason_name;	/* "admission", "floor", "reclaim", "policy", "warn" */
	const char *action_name;	/* "stop", "freeze", "dry-run", or "warn" */
	const char *metric_name;	/* "available" or "free" */
	const char *verdict;		/* its allocator's ("warm-up", "ok"...), "" without */
	/* its allocator's root cause, an episode of its life in words; "" none */
	char cause[GUARD_STOP_CAUSE_MAX];
};

#define GUARD_N_REASONS 4	/* enum umt_guard_reason: 1..4 */

/* "admission", "floor", "reclaim", "policy". */
const char *guard_reason__name(enum umt_guard_reason r);
/* 0..GUARD_N_REASONS - 1, for counting stops by reason. */
unsigned int guard_reason__index(enum umt_guard_reason r);

/* What the kernel side's record says, in words: the stop's detail. */
void guard_stop__kernel_detail(const struct umt_guard_rec *r, char *buf, size_t len);
/* Name its reason, action, metric and verdict, once it is made. */
void guard_stop__name(struct guard_stop *s);
/* One line per stop, key=value (names quoted, esc__kv()), for the journal and grep. */
void guard_stop__log(const struct guard_stop *s);
/* A warning's line, key=value as a stop's; signal: its name ("USR1"), NULL for none. */
void guard_stop__log_warn(const struct guard_stop *s, const char *signal);
/*
 * Run hook (sh -c) with the stop in UMTRACE_* variables (names in the
 * terminal form, esc__term()) and the bundle's path; for a child: it does
 * not return.
 */
void guard_stop__exec_hook(const struct guard_stop *s, const char *hook,
			   const char *bundle) __attribute__((noreturn));

#endif /* UMTRACE_GUARD_STOP_H */
