// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "lib/parse.h"
#include "guard/policy.h"
#include "lib/units.h"

#define MIB (1ULL << 20)
/* "2.5%" is kept as 25000 millionths of MemTotal: four decimals of a percent. */
#define PERCENT_DECIMALS 4
#define PPM_PER_PERCENT 10000ULL
#define PPM 1000000ULL
/* Rule (b) after a stop: wait for a fall of floor/RESTOP_DIV below that sample. */
#define RESTOP_DIV 8
/* The fall rate may bring the metric to LOW within this many intervals. */
#define LOOKAHEAD_INTERVALS 4

/*
 * Digits, optionally a point and one to four decimals, then '%'. Parsed by
 * hand: strtod would take "1e1", "nan", "0x10" and the locale's decimal
 * point, none of which belong in a threshold.
 */
static int parse_percent_ppm(const char *s, uint64_t *ppm)
{
	const char *p = s;
	uint64_t whole = 0, frac = 0;
	unsigned int ndec = 0;
	bool big = false;

	if (!isdigit((unsigned char)*p))
		return -EINVAL;
	for (; isdigit((unsigned char)*p); p++) {
		whole = whole * 10 + (uint64_t)(*p - '0');
		if (whole >= 100) {
			big = true;	/* keep scanning: junk still wins */
			whole = 100;
		}
	}
	if (*p == '.') {
		for (p++; isdigit((unsigned char)*p); p++, ndec++)
			if (ndec < PERCENT_DECIMALS)
				frac = frac * 10 + (uint64_t)(*p - '0');
		if (!ndec || ndec > PERCENT_DECIMALS)
			return -EINVAL;
		for (; ndec < PERCENT_DECIMALS; ndec++)
			frac *= 10;
	}
	if (p[0] != '%' || p[1])
		return -EINVAL;
	*ppm = whole * PPM_PER_PERCENT + frac;
	if (big || !*ppm || *ppm >= PPM)
		return -ERANGE;
	return 0;
}

int parse_size_or_percent(const char *s, uint64_t total, uint64_t *out)
{
	size_t len;
	uint64_t ppm;
	int err;

	if (!s)
		return -EINVAL;
	len = strlen(s);
	if (!len || s[len - 1] != '%')
		return parse_size(s, out);
	err = parse_percent_ppm(s, &ppm);
	if (err)
		return err;
	*out = (uint64_t)((unsigned __int128)total * ppm / PPM);
	return 0;
}

/* v * total / GUARD_SCALE_TOTAL, whole MiB, at least min. */
static uint64_t scale_default(uint64_t v, uint64_t total, uint64_t min)
{
	uint64_t r;

	if (total >= GUARD_SCALE_TOTAL)
		return v;
	r = (uint64_t)((unsigned __int128)v * total / GUARD_SCALE_TOTAL);
	r &= ~(MIB - 1);
	return r < min ? min : r;
}

void guard_policy__defaults(struct guard_policy *p, uint64_t mem_total)
{
	memset(p, 0, sizeof(*p));
	/*
	 * 2.5 GB of floor is what keeps a 128 GB DGX Spark alive while the
	 * driver still needs pages to unwind a stopped job; a 16 GB Jetson
	 * cannot spare that, but needs the same share of its memory.
	 */
	p->floor = scale_default(GUARD_DEFAULT_FLOOR, mem_total, GUARD_MIN_FLOOR);
	p->low = scale_default(GUARD_DEFAULT_LOW, mem_total, GUARD_MIN_LOW);
	p->drop = scale_default(GUARD_DEFAULT_DROP, mem_total, GUARD_MIN_DROP);
	p->restop = p->floor / RESTOP_DIV;
	p->metric = GUARD_METRIC_AVAILABLE;
	p->resume_samples = GUARD_RESUME_SAMPLES;
	p->min_interval_ms = GUARD_MIN_INTERVAL_MS;
	p->max_interval_ms = GUARD_MAX_INTERVAL_MS;
	p->total = mem_total;
	p->floor_default = p->low_default = p->drop_default = true;
}

int guard_policy__parse_threshold(const char *name, const char *s, uint64_t total,
				  uint64_t *out, char *err, size_t errlen)
{
	int ret = parse_size_or_percent(s, total, out);

	if (ret == -ERANGE && s[strlen(s) - 1] == '%')
		errbuf__set(err, errlen, "invalid %s '%s': a percentage of MemTotal must be above 0 and below 100",
			name, s);
	else if (ret == -ERANGE)
		errbuf__set(err, errlen, "invalid %s '%s': too large", name, s);
	else if (ret)
		errbuf__set(err, errlen, "invalid %s '%s': expected a size (2G, 1536M, 4096) or a percentage of MemTotal (5%%, 2.5%%)",
			name, s);
	else if (!*out)
		errbuf__set(err, errlen, "invalid %s '%s': must be above 0", name, s);
	else
		return 0;
	return -EINVAL;
}

/* "floor 5% (1.6G)", "floor 2500M", "the default floor 2.4G". */
static const char *describe(const char *name, const char *given, uint64_t v, char *buf,
			    size_t len)
{
	char b[16];

	fmt_bytes(v, b, sizeof(b));
	if (!given)
		snprintf(buf, len, "the default %s %s", name, b);
	else if (strchr(given, '%'))
		snprintf(buf, len, "%s %s (%s)", name, given, b);
	else
		snprintf(buf, len, "%s %s", name, given);
	return buf;
}

int guard_policy__init(struct guard_policy *p, uint64_t mem_total, const char *floor,
		       const char *low, const char *drop, const char *auto_resume,
		       char *err, size_t errlen)
{
	char a[64], b[64], t[16];

	guard_policy__defaults(p, mem_total);
	if ((floor && guard_policy__parse_threshold("floor", floor, mem_total, &p->floor,
						    err, errlen)) ||
	    (low && guard_policy__parse_threshold("low", low, mem_total, &p->low,
						  err, errlen)) ||
	    (drop && guard_policy__parse_threshold("drop", drop, mem_total, &p->drop,
						   err, errlen)) ||
	    (auto_resume && guard_policy__parse_threshold("auto-resume", auto_resume, mem_total,
							  &p->auto_resume_above, err, errlen)))
		return -EINVAL;
	p->floor_default = !floor;
	p->low_default = !low;
	p->drop_default = !drop;
	p->restop = p->floor / RESTOP_DIV;

	fmt_bytes(mem_total, t, sizeof(t));
	if (p->floor >= p->low) {
		errbuf__set(err, errlen, "%s must be below %s",
			describe("floor", floor, p->floor, a, sizeof(a)),
			describe("low", low, p->low, b, sizeof(b)));
		return -EINVAL;
	}
	if (p->low >= mem_total) {
		errbuf__set(err, errlen, "%s must be below MemTotal %s",
			describe("low", low, p->low, a, sizeof(a)), t);
		return -EINVAL;
	}
	if (p->drop >= mem_total) {
		errbuf__set(err, errlen, "%s must be below MemTotal %s",
			describe("drop", drop, p->drop, a, sizeof(a)), t);
		return -EINVAL;
	}
	if (auto_resume && p->auto_resume_above <= p->low) {
		/* Without a gap between the two the guard would stop and resume in turn. */
		errbuf__set(err, errlen, "%s must be above %s",
			describe("auto-resume", auto_resume, p->auto_resume_above, a, sizeof(a)),
			describe("low", low, p->low, b, sizeof(b)));
		return -EINVAL;
	}
	if (auto_resume && p->auto_resume_above >= mem_total) {
		errbuf__set(err, errlen, "%s must be below MemTotal %s",
			describe("auto-resume", auto_resume, p->auto_resume_above, a, sizeof(a)),
			t);
		return -EINVAL;
	}
	return 0;
}

void guard_state__init(struct guard_state *st)
{
	memset(st, 0, sizeof(*st));
}

uint64_t guard_policy__metric(const struct guard_policy *p, const struct guard_sample *s)
{
	return p->metric == GUARD_METRIC_FREE ? s->free : s->available;
}

struct tally {
	size_t protected, out_of_scope, stopped, no_memory;
};

/*
 * The process holding the most GPU-attributed host memory that may be
 * stopped; one holding none is not a GPU job. Ties go to the lower pid, so
 * the order of the candidates does not matter.
 */
static const struct guard_candidate *pick_victim(const struct guard_candidate *c, size_t n,
						 struct tally *t)
{
	const struct guard_candidate *best = NULL;
	size_t i;

	memset(t, 0, sizeof(*t));
	for (i = 0; i < n; i++) {
		if (c[i].protected)
			t->protected++;
		else if (!c[i].in_scope)
			t->out_of_scope++;
		else if (c[i].already_stopped)
			t->stopped++;
		else if (!c[i].host_bytes)
			t->no_memory++;
		else if (!best || c[i].host_bytes > best->host_bytes ||
			 (c[i].host_bytes == best->host_bytes && c[i].pid < best->pid))
			best = &c[i];
	}
	return best;
}

/* The smallest job first: the one least likely to bring the metric back down. */
static const struct guard_candidate *pick_resume(const struct guard_candidate *c, size_t n)
{
	const struct guard_candidate *best = NULL;
	size_t i;

	for (i = 0; i < n; i++) {
		if (!c[i].guard_stopped)
			continue;
		if (!best || c[i].host_bytes < best->host_bytes ||
		    (c[i].host_bytes == best->host_bytes && c[i].pid < best->pid))
			best = &c[i];
	}
	return best;
}

static size_t count_stopped(const struct guard_candidate *c, size_t n)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		k += c[i].already_stopped;
	return k;
}

/*
 * A stop (this rule's or the kernel side's) freed nothing: the metric
 * stays where it is. Without this the floor rule would take one more job
 * every two samples until none is left, though nothing is growing any more.
 */
static void note_stop(const struct guard_policy *p, struct guard_state *st, uint64_t m)
{
	st->below_floor = 0;
	st->rearm = true;
	st->rearm_below = m > p->restop ? m - p->restop : 0;
}

static void append(char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void append(char *buf, size_t len, const char *fmt, ...)
{
	size_t used = strlen(buf);
	va_list ap;

	if (used + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + used, len - used, fmt, ap);
	va_end(ap);
}

struct guard_action guard_policy__decide(const struct guard_policy *p, struct guard_state *st,
					 const struct guard_sample *s,
					 const struct guard_candidate *c, size_t n)
{
	struct guard_action a = { .kind = GUARD_NONE, .rule = GUARD_RULE_NONE };
	const struct guard_candidate *v;
	uint64_t m = guard_policy__metric(p, s), prev, bar;
	char b1[16], b2[16], b3[16];
	size_t stopped;
	bool answered;
	struct tally t;

	a.metric = m;
	st->samples++;
	st->fall = 0;
	st->fall_ms = 0;
	stopped = count_stopped(c, n);
	answered = st->have_prev && (stopped > st->stopped ||
				     s->kernel_stops > st->prev.kernel_stops);
	st->stopped = stopped;
	if (st->have_prev) {
		prev = guard_policy__metric(p, &st->prev);
		st->fall = prev > m ? prev - m : 0;
		st->fall_ms = s->t_ms > st->prev.t_ms ? s->t_ms - st->prev.t_ms : 0;
	}
	st->prev = *s;
	st->have_prev = true;

	/*
	 * Back over LOW, the host has recovered: a new fall is a new event.
	 * Not merely back over the floor: the kernel side stops jobs right
	 * at it, and the metric wanders a few MiB either side after.
	 */
	if (m >= p->low)
		st->rearm = false;
	if (answered)
		note_stop(p, st, m);
	bar = p->floor;
	if (st->rearm && st->rearm_below < bar)
		bar = st->rearm_below;
	if (m >= bar)
		st->below_floor = 0;
	else if (st->below_floor < 2)
		st->below_floor++;

	if (p->auto_resume_above && m > p->auto_resume_above) {
		if (st->above_resume < p->resume_samples)
			st->above_resume++;
	} else {
		st->above_resume = 0;
	}

	fmt_bytes(m, b2, sizeof(b2));
	if (st->fall >= p->drop && m < p->low && !answered) {
		a.rule = GUARD_RULE_DROP;
		snprintf(a.text, sizeof(a.text), "drop %s in one sample, %s left < low %s",
			 fmt_bytes(st->fall, b1, sizeof(b1)), b2,
			 fmt_bytes(p->low, b3, sizeof(b3)));
	} else if (st->below_floor >= 2) {
		a.rule = GUARD_RULE_UNDER_FLOOR;
		snprintf(a.text, sizeof(a.text), "%s left < floor %s for 2 samples%s", b2,
			 fmt_bytes(p->floor, b3, sizeof(b3)),
			 bar < p->floor ? ", still falling since the last stop" : "");
	} else if (p->auto_resume_above && st->above_resume >= p->resume_samples) {
		v = pick_resume(c, n);
		if (!v)
			return a;
		a.kind = GUARD_RESUME;
		a.rule = GUARD_RULE_RECOVERED;
		a.pid = v->pid;
		a.host_bytes = v->host_bytes;
		snprintf(a.text, sizeof(a.text), "%s left > auto-resume %s for %u samples", b2,
			 fmt_bytes(p->auto_resume_above, b3, sizeof(b3)), p->resume_samples);
		/* One job per N samples: each resume has to prove itself. */
		st->above_resume = 0;
		return a;
	} else {
		return a;
	}

	v = pick_victim(c, n, &t);
	if (!v) {
		a.rule = GUARD_RULE_NO_VICTIM;
		append(a.text, sizeof(a.text),
		       "; no victim among %zu processes (%zu protected, %zu out of scope, %zu stopped, %zu without GPU memory)",
		       n, t.protected, t.out_of_scope, t.stopped, t.no_memory);
		return a;
	}
	a.kind = GUARD_STOP;
	a.pid = v->pid;
	a.host_bytes = v->host_bytes;
	note_stop(p, st, m);
	st->stopped++;	/* shows at the next sample: not another's answer */
	return a;
}

unsigned int guard_policy__next_interval_ms(const struct guard_policy *p,
					    const struct guard_state *st)
{
	uint64_t m, near, iv, to_low;

	if (!st->have_prev)
		return p->min_interval_ms;
	m = guard_policy__metric(p, &st->prev);
	near = 2 * p->low;
	if (m <= near)
		return p->min_interval_ms;
	/* Linear from min at 2*LOW to max at 4*LOW. */
	if (m - near >= near)
		iv = p->max_interval_ms;
	else
		iv = p->min_interval_ms + (uint64_t)((unsigned __int128)(p->max_interval_ms -
			p->min_interval_ms) * (m - near) / near);
	if (st->fall && st->fall_ms) {
		to_low = (uint64_t)((unsigned __int128)(m - p->low) * st->fall_ms / st->fall);
		if (to_low / LOOKAHEAD_INTERVALS < iv)
			iv = to_low / LOOKAHEAD_INTERVALS;
	}
	if (iv < p->min_interval_ms)
		iv = p->min_interval_ms;
	if (iv > p->max_interval_ms)
		iv = p->max_interval_ms;
	return (unsigned int)iv;
}

const char *guard_rule__name(enum guard_rule r)
{
	switch (r) {
	case GUARD_RULE_DROP:
		return "drop";
	case GUARD_RULE_UNDER_FLOOR:
		return "floor";
	case GUARD_RULE_RECOVERED:
		return "recovered";
	case GUARD_RULE_NO_VICTIM:
		return "no_victim";
	case GUARD_RULE_NONE:
		break;
	}
	return "none";
}

const char *guard_metric__name(enum guard_metric m)
{
	return m == GUARD_METRIC_FREE ? "free" : "available";
}

int guard_metric__parse(const char *s, enum guard_metric *out)
{
	if (!strcmp(s, "available"))
		*out = GUARD_METRIC_AVAILABLE;
	else if (!strcmp(s, "free"))
		*out = GUARD_METRIC_FREE;
	else
		return -EINVAL;
	return 0;
}
