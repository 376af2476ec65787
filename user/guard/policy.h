/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * user/guard: what the guard shares with the commands that read it
 * (status, resume, check), below the daemon (guardd/): the sampled rule
 * (policy.c), the actuator (action.c), the state file (state.c) and the
 * kernel side's pins (pin.c). Uses lib/ to attach/.
 */
/*
 * The guard's user-space rule, a pure function of (policy, state, sample,
 * candidates): no I/O, no clock, so that every decision can be replayed in
 * a unit test. It sits above the kernel side (admission at GPU calls, the
 * page-level backstop) and sees only /proc/meminfo samples.
 *
 * Stop the biggest GPU job in scope when
 *   (a) one sample fell by DROP or more and left less than LOW, or
 *   (b) the metric stayed below FLOOR for two consecutive samples.
 * A stop frees nothing (the job keeps its memory), so after a stop rule (b)
 * fires again only if the metric keeps falling; rule (a) always may,
 * unless a job was stopped during the fall (by the kernel side, mostly:
 * it stops the job that crossed before the sample shows the fall): the
 * fall has had its answer, and the next job is as innocent as before.
 * With auto-resume, one job the guard stopped is resumed each time the
 * metric has stayed above ABOVE for GUARD_RESUME_SAMPLES samples in a row.
 */
#ifndef UMTRACE_GUARD_POLICY_H
#define UMTRACE_GUARD_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define GUARD_DEFAULT_FLOOR	(2500ULL << 20)
#define GUARD_DEFAULT_LOW	(3000ULL << 20)
#define GUARD_DEFAULT_DROP	(2500ULL << 20)
/* Probe PyTorch's allocator hook (--torch, --no-torch): see README, Overhead. */
#define GUARD_TORCH_DEFAULT	true
/* Defaults shrink in proportion on hosts with less MemTotal than this. */
#define GUARD_SCALE_TOTAL	(32ULL << 30)
#define GUARD_MIN_FLOOR		(64ULL << 20)
#define GUARD_MIN_LOW		(96ULL << 20)
#define GUARD_MIN_DROP		(64ULL << 20)
#define GUARD_RESUME_SAMPLES	3
#define GUARD_MIN_INTERVAL_MS	100
#define GUARD_MAX_INTERVAL_MS	1000

enum guard_metric {
	GUARD_METRIC_AVAILABLE,	/* MemAvailable: page cache counts as free */
	GUARD_METRIC_FREE,	/* MemFree: what cudaMemGetInfo tracks */
};

struct guard_policy {
	uint64_t floor;		/* bytes */
	uint64_t low;
	uint64_t drop;		/* per sample */
	uint64_t restop;	/* after a stop, rule (b) waits for this much more fall */
	enum guard_metric metric;
	uint64_t auto_resume_above;	/* 0: stopped jobs wait for an operator */
	unsigned int resume_samples;
	unsigned int min_interval_ms;
	unsigned int max_interval_ms;
	uint64_t total;		/* MemTotal the thresholds were resolved against */
	bool floor_default, low_default, drop_default;	/* for messages */
};

/* One /proc/meminfo reading. */
struct guard_sample {
	uint64_t t_ms;		/* any monotonic clock */
	uint64_t available;	/* bytes */
	uint64_t free;
	uint64_t total;
	/*
	 * Stops the kernel side has decided so far. Its stop reaches the
	 * sample at once, the stopped state only when the job next runs.
	 */
	uint64_t kernel_stops;
};

/* What decide() carries from one sample to the next. */
struct guard_state {
	bool have_prev;
	struct guard_sample prev;
	uint64_t fall;		/* the metric's fall over the last interval, 0 if it rose */
	uint64_t fall_ms;	/* that interval */
	unsigned int below_floor;	/* consecutive samples under the floor rule's bar */
	bool rearm;		/* since a stop, rule (b) needs the metric below: */
	uint64_t rearm_below;
	unsigned int above_resume;	/* consecutive samples above auto_resume_above */
	size_t stopped;		/* candidates already stopped at the last sample */
	uint64_t samples;
};

/* A process the guard may act on, as the caller sees it now. */
struct guard_candidate {
	pid_t pid;
	uint64_t host_bytes;	/* GPU-attributed host memory */
	bool in_scope;
	bool protected;		/* pid 1, kernel threads, sshd, --protect... */
	bool already_stopped;	/* stopped (state T) or frozen, by anyone */
	bool guard_stopped;	/* stopped by this guard: auto-resume may continue it */
};

enum guard_action_kind {
	GUARD_NONE,
	GUARD_STOP,
	GUARD_RESUME,
};

/*
 * Which of the sampled rules fired: a stop it makes has the one stop
 * reason UMT_GUARD_POLICY (bpf/umtrace.h); this says why, in its text.
 */
enum guard_rule {
	GUARD_RULE_NONE,	/* nothing to do */
	GUARD_RULE_DROP,	/* rule (a) */
	GUARD_RULE_UNDER_FLOOR,	/* rule (b) */
	GUARD_RULE_RECOVERED,	/* auto-resume */
	GUARD_RULE_NO_VICTIM,	/* a rule fired, but nobody may be stopped */
};

#define GUARD_RULE_TEXT 192

struct guard_action {
	enum guard_action_kind kind;
	enum guard_rule rule;
	pid_t pid;		/* the process to stop or resume; 0 with GUARD_NONE */
	uint64_t host_bytes;	/* its GPU-attributed host memory */
	uint64_t metric;	/* the sample's metric */
	char text[GUARD_RULE_TEXT];	/* for a log line; "" with GUARD_RULE_NONE */
};

/*
 * "4096", "64K", "1536M", "2G" (units.h's parse_size: a plain number is
 * bytes) or a share of total above 0 and below 100: "5%", "2.5%" (at most
 * four decimals). 0, or -EINVAL for junk, -ERANGE for an overflow or a
 * percentage out of range.
 */
int parse_size_or_percent(const char *s, uint64_t total, uint64_t *out);
/*
 * parse_size_or_percent() for threshold name ("floor", "--low"), with a
 * one-line message; 0 is refused too. 0 or -EINVAL.
 */
int guard_policy__parse_threshold(const char *name, const char *s, uint64_t total,
				  uint64_t *out, char *err, size_t errlen);

/* The defaults for a host with mem_total bytes, scaled down on small ones. */
void guard_policy__defaults(struct guard_policy *p, uint64_t mem_total);
/*
 * Defaults, then the thresholds given (NULL: the default; auto_resume NULL:
 * off), then the checks: floor < low < MemTotal, drop < MemTotal,
 * low < auto_resume < MemTotal. 0, or -EINVAL with a one-line message.
 */
int guard_policy__init(struct guard_policy *p, uint64_t mem_total, const char *floor,
		       const char *low, const char *drop, const char *auto_resume,
		       char *err, size_t errlen);

void guard_state__init(struct guard_state *st);
uint64_t guard_policy__metric(const struct guard_policy *p, const struct guard_sample *s);
/*
 * One sample in, one action out. st is updated as if the action were
 * carried out. Candidates are read only.
 */
struct guard_action guard_policy__decide(const struct guard_policy *p, struct guard_state *st,
					 const struct guard_sample *s,
					 const struct guard_candidate *c, size_t n);
/*
 * How long to wait before the next sample: min_interval_ms within 2*LOW or
 * when the last interval's fall, kept up, would reach LOW within four
 * intervals; growing to max_interval_ms at 4*LOW.
 */
unsigned int guard_policy__next_interval_ms(const struct guard_policy *p,
					    const struct guard_state *st);

/* "drop", "floor", "recovered", "no_victim", "none": the rule, as a resume says it. */
const char *guard_rule__name(enum guard_rule r);
/* "available" or "free". */
const char *guard_metric__name(enum guard_metric m);
int guard_metric__parse(const char *s, enum guard_metric *out);

#endif /* UMTRACE_GUARD_POLICY_H */
