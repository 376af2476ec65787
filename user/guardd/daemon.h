/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * user/guardd: the guard daemon, `umtrace guard`, a concept a file. It
 * uses everything below it (guard/ for what it shares with status and
 * resume; attach/ to load and poll; stacks/ and rec/ for who holds what
 * and its flight recorder; export/ for the post-mortem's stacks) and is
 * used by cmd/guard.c only.
 *
 *   opts.c          the command line over the config: struct guard_opts
 *   config.c        the config file (--config)
 *   daemon.c        set-up, the kernel's records, the snapshot, teardown
 *   kernel.c        the kernel side's user-space half: its maps and links
 *   tick.c          each sample and the sampled rule
 *   stop.c          a stop as a value, named once: its words, its log
 *                   line and hook variables (what tells of it reads these)
 *   enforce.c       a stop carried out, then made (struct guard_stop)
 *                   and told; the warning before it (--warn-eta)
 *   procs.c         the processes it knows, by pid
 *   sites.c         who holds what: attribution and call sites per call
 *   arm.c           the page programs' margin, and the helper that attaches
 *                   them near the floor only
 *   memlock.c       the daemon's and the helper's memory lock
 *   protect.c       who is never stopped
 *   scope.c         --scope: the spec and its matching (pure: fuzzed apart)
 *   scope_kernel.c  the scope kept in the kernel side, and victims' scope
 *   postmortem.c    what is kept of each stop: the flight recorder's
 *                   record, then in a child the bundle and --on-stop;
 *                   --on-warn
 *   report.c        the state file and metrics from one snapshot, off the
 *                   loop, and the metrics' text
 *
 * struct guard below is the daemon's state: daemon.c, tick.c,
 * enforce.c and snapshot.c take it whole; the others take their parts
 * (struct guard_armer, _holders, _scoper, _postmortem, the pid table).
 * Nothing here prints but through lib/log.h.
 */
#ifndef UMTRACE_GUARDD_DAEMON_H
#define UMTRACE_GUARDD_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include "attach/opts.h"
#include "attach/probes.h"
#include "attach/session.h"
#include "guard/action.h"
#include "guardd/arm.h"
#include "guardd/config.h"
#include "guardd/kernel.h"
#include "guard/pin.h"
#include "guard/policy.h"
#include "guardd/report.h"
#include "guardd/stop.h"
#include "lib/log.h"
#include "lib/meminfo.h"
#include "lib/sys.h"
#include "model/callsites.h"
#include "model/summary.h"
#include "model/torch.h"
#include "model/trend.h"
#include "stacks/callstack.h"

#define GUARD_MAX_PROCS 65536

/*
 * The sampled metric's slide, over 1 min, 15 min and 1 h (model/trend.h):
 * the shortest horizon on which it falls by at least GUARD_SLIDE_MIN says
 * when the floor is reached at that pace (snapshot.c).
 */
#define GUARD_HORIZONS		3
#define GUARD_SLIDE_MIN		(64ULL << 20)

/* A kernel stop held back while the guard looks again (enforce.c). */
#define GUARD_HELD_MAX		64
#define GUARD_RECHECK_MS	20
#define GUARD_RECHECK_LOOKS	10

struct guard_held {
	struct umt_guard_rec r;
	uint64_t due_ms;		/* the next look */
	unsigned int looks;		/* left */
};

/*
 * A stop carried out (the job stopped, its cgroup frozen) and not yet
 * told (enforce.c): told once the records in hand are read, so a burst of
 * stops is carried out first and no job waits on another's words.
 */
#define GUARD_TELL_MAX		64

struct guard_told {
	struct umt_guard_rec r;		/* the kernel's; the rule's: pid, reason, ts_ns */
	char detail[GUARD_STOP_DETAIL_MAX];	/* the rule's words; "": the record's */
	bool first;			/* not already stopped by this guard */
	bool dry;
	bool gone;			/* no such process by the time it was read */
	int send_err;
};

/* A process the guard has seen make GPU calls, or has stopped. */
struct guard_proc {
	uint32_t pid;
	int pidfd;		/* opened at first sight: a recycled pid is never hit */
	char comm[TASK_COMM_LEN];
	bool stopped;		/* by this guard, and not resumed since */
	bool dry;		/* only a dry-run decision */
	bool froze;		/* its cgroup was frozen by this guard */
	time_t when;
	enum umt_guard_reason reason;
	char cgroup[512];
	struct trend grow[GUARD_HORIZONS];	/* its GPU-attributed host bytes (snapshot.c) */
	/*
	 * grow's fit, made once a sample for all who ask (the warning and
	 * the metrics): the sample it was made at + 1 (0: never), the
	 * shortest horizon it slides on (GUARD_HORIZONS: none), its rate.
	 */
	uint64_t fit_sample;
	unsigned int fit_horizon;
	double fit_rate;
	/* warned of its floor (--warn-eta), and not out of that episode since */
	bool warned;
	time_t warned_at;
	uint64_t warned_eta;		/* seconds to the floor then */
	bool warned_signal;		/* --warn-signal was sent */
};

/* What the command line and the config file ask for (guardd/opts.c). */
struct guard_opts {
	struct guard_config cfg;
	struct attach_opts ao;
	struct guard_policy pol;	/* thresholds resolved against MemTotal */
	enum guard_act action;
	bool dry_run;
	const char *on_stop;
	uint64_t warn_eta_ms;		/* warn a job this long before its floor; 0: never */
	const char *on_warn;
	int warn_signal;		/* 0: none */
	const char *postmortem_dir;
	const char *metrics_file;
	const char *state_file;
	uint64_t flight_seconds;	/* flight recorder window, 0: none */
	bool no_pin;			/* the kernel side dies with the daemon */
	bool torch;			/* probe PyTorch's allocator hook (--torch) */
};

struct flight_recorder;

/* The page programs' helper (arm.c). */
struct guard_armer {
	/* what it works with, from guard_armer__start */
	struct session *session;
	const struct guard_pins *pins;	/* read as they are: removed at exit */
	const struct guard_policy *pol;
	pid_t pid;			/* 0: none */
	struct guard_arm_shared *sh;	/* shared with it */
	struct guard_page_links links;	/* held here when the daemon attached them */
	/* what the log has said of the helper's work (guard_armer__tick) */
	uint64_t arms_said, disarms_said, fails_said;
	uint64_t margin_said;		/* the last logged; 0: none yet */
	bool helper_said;		/* its start-up has been told */
};

/*
 * Who holds what (sites.c): the attribution table and the call sites,
 * fed every GPU call, with the stacks' resolver.
 */
struct guard_holders {
	struct summary summary;
	struct callsites sites;
	struct callstack stacks;
};

/* Who may be stopped, as the kernel side and the sampled rule keep it (scope_kernel.c). */
struct guard_scoper {
	struct guard_config *cfg;	/* its --scope and --protect */
	struct probes *probes;		/* the kernel side's maps */
	uint64_t next_protect_ms;	/* protected files and cgroups looked up again */
};

/* What is kept of each stop (postmortem.c): its parts of the daemon, set at start. */
struct guard_postmortem {
	const char *dir;		/* --postmortem-dir; NULL: no bundle */
	const char *on_stop;		/* --on-stop; NULL: none */
	enum platform platform;		/* --platform, for the recording's cost model */
	struct flight_recorder *flight;	/* NULL: none */
	const struct guard_holders *who;
	const struct torch_model *torch;
	struct session *session;	/* its memory nodes and probes' counts */
};

struct guard {
	struct guard_opts opt;
	struct guard_state pstate;
	struct guard_sample sample;
	struct pcp_info pcp;		/* at the last sample */
	struct guard_kcfg kcfg;
	struct session session;
	struct guard_pins pins;
	struct guard_armer armer;
	struct guard_report report;
	struct guard_holders who;	/* who holds what (sites.c) */
	struct torch_model torch;	/* PyTorch's caching allocator per process */
	struct guard_postmortem pm;	/* what is kept of each stop */
	struct guard_scoper scoper;	/* who may be stopped */
	/* processes */
	struct pid_table procs;	/* of { pid, struct guard_proc * } (guardd/procs.c) */
	/* figures */
	uint64_t last_metric;
	struct trend slide[GUARD_HORIZONS];	/* last_metric, 1 min, 15 min, 1 h */
	uint64_t samples, kernel_stops, policy_stops, fallback_sends, resumes;
	uint64_t transients;		/* kernel stops let go: the crossing did not last */
	uint64_t warnings;		/* jobs warned of their floor (--warn-eta) */
	uint64_t next_warn_ms;
	struct guard_held held[GUARD_HELD_MAX];
	size_t n_held;
	struct guard_told told[GUARD_TELL_MAX];
	size_t n_told;
	uint64_t next_sample_ms;
	uint64_t stops_by[GUARD_N_REASONS];	/* by guard_reason__index() */
	time_t last_stop;
	/* The kernel's headroom against each fresh sample (bytes, absolute). */
	uint64_t error_max, error_sum, error_n;
	uint64_t error_above;		/* most the kernel's figure was over a sample */
	uint64_t next_write_ms;
	time_t started;
	bool exiting;
	enum mem_lock memlock;		/* what mem__lock() could lock of the daemon */
	/* conditions that can hold at every sample */
	struct log_repeat no_victim, no_meminfo, slow_meminfo, no_pin, no_torch;
};

/* opts.c: 0, 1 (--help asked: show the usage), or -EINVAL (said). */
int guard_opts__parse(struct guard_opts *o, int argc, char **argv);
void guard_opts__free(struct guard_opts *o);

/* daemon.c: arm, run until SIGINT or SIGTERM, disarm; the exit code. Takes o. */
int guard__run(struct guard_opts *o);
/* memlock.c: may what the guard maps later be locked too (CAP_IPC_LOCK, no limit)? */
bool guard__may_lock_more(void);
/* memlock.c: lock the calling process's memory as far as it may (mem__lock). */
enum mem_lock guard__lock_memory(int *err);

/* The state file and metrics from a snapshot of now (guardd/report.h), in snapshot.c. */
void guard__write_report(struct guard *g);

/* snapshot.c: each sample's value fed to the horizons. */
void guard__slide_add(struct guard *g, uint64_t ts_ns);
void guard__slide_proc(struct guard_proc *p, uint64_t ts_ns, uint64_t host_bytes);
/*
 * When a job whose host bytes grow reaches the floor, alone at its pace:
 * false if it grows on no horizon; else the horizon (s) that says so, the
 * seconds to the floor and its growth per hour. Its trends are fitted
 * once a sample, however many ask.
 */
bool guard__proc_eta(const struct guard *g, struct guard_proc *p, uint64_t now_ns,
		     uint64_t *horizon_s, uint64_t *eta_s, double *per_hour);

/* tick.c: the sample and the sampled rule, every session tick. */
void guard__tick(void *ctx);
/* The metric the kernel's headroom is anchored to (guard_kernel__anchor). */
int guard__sample_metric(void *ctx, uint64_t *bytes);
/* The meter from /proc, to check the kernel's counters by (guard_kernel__find_zones). */
int guard__sample_meter(void *ctx, uint64_t *bytes);

/* enforce.c: a stop carried out, then told (guard__tell); a resume. */
void guard__stopped(struct guard *g, struct guard_proc *p, uint64_t ts_ns,
		    enum umt_guard_reason reason, const char *detail, bool dry, int send_err);
void guard__resume(struct guard *g, struct guard_proc *p, const char *why);
/* The stops carried out since, told: their log lines, bundles and hooks. */
void guard__tell(struct guard *g);
/* --warn-eta: each job in scope whose floor is nearer, warned once an episode. */
void guard__warn(struct guard *g, uint64_t now_ms);
/* A record of the kernel side's stop: held for a second look, or told (a session op). */
void guard__kernel_stop(void *guard, const struct umt_guard_rec *r);
/* The held stops' looks due by now_ms; whether any is still held. */
bool guard__recheck(struct guard *g, uint64_t now_ms);
/* Each held stop looked at one last time, and told or let go: at exit. */
void guard__settle_held(struct guard *g);
/* A job it stopped runs again, resumed by someone else (an operator). */
void guard__resumed_by_operator(struct guard *g, struct guard_proc *p);

/*
 * arm.c: attach the page programs, and start the helper that detaches
 * them far from the floor; before capabilities are dropped. 0 or -errno.
 */
int guard_armer__start(struct guard_armer *a, struct session *session,
		       const struct guard_pins *pins, const struct guard_opts *o);
/* A child reaped: if it was the helper, the daemon attaches them for good. */
void guard_armer__reaped(struct guard_armer *a, pid_t pid, int status);
/* Log what the helper did since the last sample. */
void guard_armer__tick(struct guard_armer *a);
/* Stop the helper: before the pins are removed and the probes closed. */
void guard_armer__stop(struct guard_armer *a);

/* procs.c */
struct guard_proc *guard__proc(struct pid_table *procs, uint32_t pid, bool create);
/* Every known process, by pid; the caller frees the array. */
struct guard_proc **guard__procs_sorted(struct pid_table *procs, size_t *n);
void guard__proc_drop(struct pid_table *procs, struct guard_proc *p);
void guard__procs_free(struct pid_table *procs);

/* sites.c */
int guard_sites__init(struct guard_holders *h, enum platform forced);
/* Attribute a call; its frames (for the flight recorder) in frames, its site's id in site. */
size_t guard_sites__call(struct guard_holders *h, const struct umt_call_rec *r,
			 struct sym_frame *frames, uint32_t *site);
void guard_sites__exit(struct guard_holders *h, const struct umt_proc_exit_rec *r);
uint64_t guard_sites__proc_host(const struct guard_holders *h, uint32_t pid);
void guard_sites__top_site(const struct guard_holders *h, uint32_t pid, char *buf, size_t len);
void guard_sites__free(struct guard_holders *h);

/*
 * postmortem.c: the bundle the guard leaves for each stop, in a fresh
 * directory (0700) under --postmortem-dir: event.txt (what was decided
 * and why), report.txt (per process and entry point, and the call sites
 * holding memory), held.folded (who held what at the stop, as folded
 * stacks weighted by host bytes) and recording.umt (the flight recorder:
 * the last minutes of calls and memory samples) when there is one; then
 * --on-stop, with the bundle's path. Both in a child: the loop goes on.
 * The stop is put in the flight recorder first, so the bundle has it.
 */
void postmortem__stop(struct guard_postmortem *pm, const struct guard_stop *s);
/* cmd (--on-warn) in a child, with the warning in UMTRACE_* variables and no bundle. */
void postmortem__hook(const char *cmd, const struct guard_stop *s);
/* Its parts; the flight recorder made if asked for: 0 or -errno. */
int postmortem__init(struct guard_postmortem *pm, const struct guard_opts *o,
		     const struct guard_holders *who, const struct torch_model *torch,
		     struct session *session);
/* postmortem.c, the flight recorder: all do nothing without one. */
void guard_flight__call(struct guard_postmortem *pm, const struct umt_call_rec *r,
			const struct sym_frame *frames, size_t n);
void guard_flight__exit(struct guard_postmortem *pm, const struct umt_proc_exit_rec *r);
void guard_flight__sample(struct guard_postmortem *pm);
void guard_flight__torch(struct guard_postmortem *pm, const struct torch_sample *s);
void guard_flight__free(struct guard_postmortem *pm);

/* scope_kernel.c */
uint32_t guard_scoper__kind(const struct guard_scoper *sc);	/* enum umt_guard_scope */
int guard_scoper__setup(struct guard_scoper *sc);
/* A name the kernel side has no verdict for, answered. */
void guard_scoper__answer(struct guard_scoper *sc, const struct umt_scope_ask_rec *r);
bool guard_scoper__in_scope(struct guard_scoper *sc, const struct guard_proc *p);
bool guard_scoper__protected(struct guard_scoper *sc, const struct guard_proc *p);
/* Who is never stopped, to the kernel side; again once a second (tick). */
int guard_scoper__setup_protect(struct guard_scoper *sc);
void guard_scoper__refresh_protect(struct guard_scoper *sc, uint64_t now_ms);

#endif /* UMTRACE_GUARDD_DAEMON_H */
