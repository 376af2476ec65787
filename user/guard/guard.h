/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The guard daemon's state, shared by its parts: the command and its loop
 * (guard.c), options (guard_opts.c), who holds what (guard_sites.c), its
 * scope (guard_scope.c), its state file and metrics (guard_report.c) and
 * the post-mortem bundle (postmortem.c).
 */
#ifndef UMTRACE_GUARD_H
#define UMTRACE_GUARD_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include "attach/opts.h"
#include "model/callsites.h"
#include "stacks/callstack.h"
#include "guard/action.h"
#include "guard/config.h"
#include "guard/pin.h"
#include "guard/policy.h"
#include "lib/log.h"
#include "lib/meminfo.h"
#include "attach/probes.h"
#include "attach/session.h"
#include "model/summary.h"

#define GUARD_MAX_PROCS 65536

/* Stop reasons, as they appear in logs and metrics. */
#define GUARD_N_REASONS 4
extern const char *const guard_reasons[GUARD_N_REASONS];

/* A process the guard has seen make GPU calls, or has stopped. */
struct guard_proc {
	uint32_t pid;
	int pidfd;		/* opened at first sight: a recycled pid is never hit */
	char comm[TASK_COMM_LEN];
	bool stopped;		/* by this guard, and not resumed since */
	bool dry;		/* only a dry-run decision */
	bool froze;		/* its cgroup was frozen by this guard */
	time_t when;
	char reason[16];
	char cgroup[512];
};

struct guard_opts {
	enum guard_act action;
	bool dry_run;
	const char *on_stop;
	const char *postmortem_dir;
	const char *metrics_file;
	const char *state_file;
	uint64_t flight_seconds;	/* flight recorder window, 0: none */
	bool no_pin;			/* the kernel side dies with the daemon */
};

struct flight_recorder;
struct file_writer;

struct guard {
	struct guard_config cfg;
	struct guard_opts opt;
	struct attach_opts ao;
	struct guard_policy pol;
	struct guard_state pstate;
	struct guard_sample sample;
	struct pcp_info pcp;		/* at the last sample */
	struct guard_kcfg kcfg;
	struct session session;
	struct guard_pins pins;
	/* who holds what */
	struct summary summary;
	struct callsites sites;
	struct callstack stacks;
	struct flight_recorder *flight;
	/* processes */
	void *procs;		/* tsearch(3) tree of struct guard_proc */
	size_t n_procs;
	/* figures */
	uint64_t last_metric;
	uint64_t samples, kernel_stops, policy_stops, fallback_sends, resumes;
	uint64_t stops_by[GUARD_N_REASONS];	/* by guard__reason_index() */
	time_t last_stop;
	/* The kernel's headroom against each fresh sample (bytes, absolute). */
	uint64_t error_max, error_sum, error_n;
	uint64_t next_write_ms;
	time_t started;
	bool exiting;
	/* conditions that can hold at every sample */
	struct log_repeat no_victim, no_meminfo, slow_meminfo, no_pin;
	struct log_repeat state_err, metrics_err;
	/* the state file and metrics, once the loop runs: never stalls it */
	struct file_writer *files;
};

/* guard.c */
struct guard_proc *guard__proc(struct guard *g, uint32_t pid, bool create);
/* ts_ns: when it was decided (CLOCK_MONOTONIC, the kernel's clock). */
void guard__stopped(struct guard *g, struct guard_proc *p, uint64_t ts_ns,
		    const char *reason, const char *detail, bool dry, int send_err);
/* Every known process, by pid; the caller frees the array. */
struct guard_proc **guard__procs_sorted(struct guard *g, size_t *n);
/* guard_opts.c: 0, 1 (--help shown), or -EINVAL (usage error, said). */
int guard__parse_args(struct guard *g, int argc, char **argv);
void guard__free(struct guard *g);
/* guard_sites.c */
int guard_sites__init(struct guard *g);
void guard_sites__call(struct guard *g, const struct umt_call_rec *r);
void guard_sites__exit(struct guard *g, const struct umt_proc_exit_rec *r);
uint64_t guard_sites__proc_host(struct guard *g, uint32_t pid);
void guard_sites__top_site(struct guard *g, uint32_t pid, char *buf, size_t len);
uint64_t g_page_size(void);
/* guard_flight.c: all but init do nothing without a flight recorder. */
int guard_flight__init(struct guard *g);
void guard_flight__call(struct guard *g, const struct umt_call_rec *r,
			const struct sym_frame *frames, size_t n);
void guard_flight__exit(struct guard *g, const struct umt_proc_exit_rec *r);
void guard_flight__sample(struct guard *g);
void guard_flight__stop(struct guard *g, const struct guard_proc *p, uint32_t reason,
			const char *detail, const char *site);
/* Write the flight recorder into dir/recording.umt. 0 or -errno. */
int guard_flight__dump(struct guard *g, const char *dir);
/* guard_scope.c */
uint32_t guard__scope_kind(const struct guard *g);	/* enum umt_guard_scope */
int guard__setup_scope(struct guard *g);
void guard__answer_scope(struct guard *g, const struct umt_scope_ask_rec *r);
bool guard__in_scope(struct guard *g, const struct guard_proc *p);
bool guard__protected(struct guard *g, const struct guard_proc *p);
/* guard_report.c */
void guard__write_state(struct guard *g);
void guard__write_metrics(struct guard *g);

#endif /* UMTRACE_GUARD_H */
