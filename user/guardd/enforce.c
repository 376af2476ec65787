// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A decision carried out, then told: a stop (the kernel's or the sampled
 * rule's) is carried out at once (the signal the kernel could not send,
 * the cgroup frozen) and queued; once the records in hand are read it is
 * made into one struct guard_stop and told: the log line, then what
 * postmortem.c keeps of it (the flight recorder's record, the bundle, the
 * --on-stop hook). A resume undoes it.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "guardd/daemon.h"
#include "lib/escape.h"
#include "lib/units.h"
#include "lib/sys.h"
#include "lib/procfs.h"

/* Freeze the cgroup too (--action freeze), after the stop took hold. */
static int freeze_cgroup(struct guard *g, struct guard_proc *p)
{
	char cg[ESC_KV_LEN(sizeof(p->cgroup))];
	int err;

	if (g->opt.action != GUARD_ACT_FREEZE || p->dry || !p->cgroup[0])
		return 0;
	err = cgroup__set_frozen(p->cgroup, true);
	if (!err) {
		p->froze = true;
		return 0;
	}
	esc__kv(p->cgroup, cg, sizeof(cg));
	if (err == -EDEADLK)
		wlog("guard: not freezing %s: umtrace itself runs in it", cg);
	else
		wlog("guard: cannot freeze %s: %s", cg, strerror(-err));
	return err;
}

static void make_stop(struct guard *g, struct guard_proc *p, struct guard_stop *s)
{
	s->pid = p->pid;
	memcpy(s->comm, p->comm, sizeof(s->comm));
	snprintf(s->cgroup, sizeof(s->cgroup), "%s", p->cgroup);
	s->when = p->when;
	s->action = g->opt.action;
	s->metric = g->opt.pol.metric;
	s->metric_bytes = g->last_metric;
	s->held = guard_sites__proc_host(&g->who, p->pid);
	guard_sites__top_site(&g->who, p->pid, s->top_site, sizeof(s->top_site));
	s->torch = torch_model__judge_pid(&g->torch, p->pid, &s->torch_v);
	guard_stop__name(s);
}

/*
 * A slot for a stop carried out, to be told once the records in hand are
 * read: a tick is asked for at once. Full, the oldest are told now.
 */
static struct guard_told *to_tell(struct guard *g)
{
	struct guard_told *t;

	if (g->n_told == GUARD_TELL_MAX)
		guard__tell(g);
	t = &g->told[g->n_told++];
	memset(t, 0, sizeof(*t));
	session__tick_by(&g->session, 0);
	return t;
}

/* r: the kernel's record, or the rule's (pid, reason, ts_ns) with its words in detail. */
static void carry_out(struct guard *g, struct guard_proc *p, const struct umt_guard_rec *r,
		      const char *detail, bool dry, int send_err)
{
	struct guard_told *t = to_tell(g);

	t->r = *r;
	if (detail)
		snprintf(t->detail, sizeof(t->detail), "%s", detail);
	t->first = !p->stopped;
	t->dry = dry;
	t->send_err = send_err;
	if (proc__cgroup((pid_t)p->pid, p->cgroup, sizeof(p->cgroup)))
		p->cgroup[0] = '\0';
	p->dry = dry;
	if (!t->first)
		return;
	p->stopped = true;
	p->when = time(NULL);
	p->reason = r->reason;
	g->stops_by[guard_reason__index(r->reason)]++;
	g->last_stop = p->when;
	freeze_cgroup(g, p);
}

void guard__stopped(struct guard *g, struct guard_proc *p, uint64_t ts_ns,
		    enum umt_guard_reason reason, const char *detail, bool dry, int send_err)
{
	struct umt_guard_rec r = {
		.pid = p->pid,
		.reason = reason,
		.ts_ns = ts_ns,
	};

	carry_out(g, p, &r, detail, dry, send_err);
}

/* A stop carried out, made into a struct guard_stop and told; the first kept too. */
static void tell_one(struct guard *g, const struct guard_told *t)
{
	struct guard_proc *p = guard__proc(&g->procs, t->r.pid, false);
	char comm[ESC_TERM_LEN(TASK_COMM_LEN)];
	struct guard_stop s = {
		.reason = t->r.reason,
		.ts_ns = t->r.ts_ns,
		.first = t->first,
		.dry = t->dry,
		.send_err = t->send_err,
	};

	if (t->detail[0])
		snprintf(s.detail, sizeof(s.detail), "%s", t->detail);
	else
		guard_stop__kernel_detail(&t->r, s.detail, sizeof(s.detail));
	if (t->gone || !p) {
		wlog("guard: process %u (%s) was stopped but is gone: %s", t->r.pid,
		     esc__term(t->r.pcomm, comm, sizeof(comm)), s.detail);
		return;
	}
	make_stop(g, p, &s);
	guard_stop__log(&s);
	if (s.send_err)
		elog("guard: could not stop %u: %s", s.pid, strerror(-s.send_err));
	if (!s.first)
		return;
	postmortem__stop(&g->pm, &s);
	guard__write_report(g);
}

void guard__tell(struct guard *g)
{
	size_t i;

	for (i = 0; i < g->n_told; i++)
		tell_one(g, &g->told[i]);
	g->n_told = 0;
}

/* ----- the warning before the stop (--warn-eta) ----- */

#define GUARD_WARN_MS 1000

static void warn_one(struct guard *g, struct guard_proc *p, uint64_t horizon, uint64_t eta,
		     double per_hour)
{
	struct guard_stop s = {
		.warn = true,
		.ts_ns = clock__mono_ns(),
		.dry = g->opt.dry_run,
		.eta_s = eta,
		.eta_horizon_s = horizon,
		.per_hour = per_hour,
		.signal = g->opt.warn_signal,
	};

	if (proc__cgroup((pid_t)p->pid, p->cgroup, sizeof(p->cgroup)))
		p->cgroup[0] = '\0';
	p->warned = true;
	p->warned_at = time(NULL);
	p->warned_eta = eta;
	g->warnings++;
	if (s.signal && !s.dry) {
		s.signal_err = guard_act__signal(p->pidfd, (pid_t)p->pid, s.signal);
		p->warned_signal = !s.signal_err;
	}
	make_stop(g, p, &s);
	s.when = p->warned_at;
	guard_stop__log_warn(&s, s.signal ? guard_config__signal_name(s.signal) : NULL);
	if (g->opt.on_warn)
		postmortem__hook(g->opt.on_warn, &s);
	guard__write_report(g);
}

/*
 * A job's episode ends when it no longer grows toward the floor, or its
 * floor is twice the lead away again: a job near the line is warned once,
 * not at every wobble of its slope.
 */
void guard__warn(struct guard *g, uint64_t now_ms)
{
	uint64_t lead = g->opt.warn_eta_ms / 1000, now = clock__mono_ns(), horizon, eta;
	struct guard_proc **all;
	double per_hour;
	size_t i, n;

	if (!lead || now_ms < g->next_warn_ms)
		return;
	g->next_warn_ms = now_ms + GUARD_WARN_MS;
	all = guard__procs_sorted(&g->procs, &n);
	if (!all)
		return;
	for (i = 0; i < n; i++) {
		struct guard_proc *p = all[i];

		if (!guard__proc_eta(g, p, now, &horizon, &eta, &per_hour) || eta > 2 * lead) {
			p->warned = p->warned_signal = false;
			continue;
		}
		if (p->warned || p->stopped || eta > lead)
			continue;
		if (!guard_scoper__in_scope(&g->scoper, p) || guard_scoper__protected(&g->scoper, p))
			continue;
		warn_one(g, p, horizon, eta, per_hour);
	}
	free(all);
}

void guard__resume(struct guard *g, struct guard_proc *p, const char *why)
{
	char comm[ESC_KV_LEN(sizeof(p->comm))];
	int err = 0;

	if (p->froze)
		err = cgroup__set_frozen(p->cgroup, false);
	if (!err && !p->dry)
		err = guard_act__signal(p->pidfd, (pid_t)p->pid, SIGCONT);
	if (err)
		wlog("guard: cannot resume %u: %s", p->pid, strerror(-err));
	slog("guard: resume pid=%u comm=%s reason=%s", p->pid,
	     esc__kv(p->comm, comm, sizeof(comm)), why);
	p->stopped = p->froze = p->dry = false;
	g->resumes++;
}

void guard__resumed_by_operator(struct guard *g, struct guard_proc *p)
{
	char comm[ESC_KV_LEN(sizeof(p->comm))];

	slog("guard: resumed pid=%u comm=%s by=operator", p->pid,
	     esc__kv(p->comm, comm, sizeof(comm)));
	p->stopped = p->froze = false;
	g->resumes++;
}

/* ----- the kernel's stops ----- */

/*
 * The job goes on as if nothing had happened (a call stopped at its entry
 * had not run yet), and its next crossing is stopped at once: the kernel
 * side forgets it stopped it.
 */
static void let_go(struct guard *g, struct guard_proc *p, const struct umt_guard_rec *r,
		   const char *why)
{
	char comm[ESC_KV_LEN(TASK_COMM_LEN)];
	int err = 0;

	if (!r->dry_run)
		err = guard_act__signal(p->pidfd, (pid_t)p->pid, SIGCONT);
	guard_kernel__forget_stop(&g->session.probes, p->pid);
	elog("guard: let go pid=%u comm=%s: %s%s", p->pid, esc__kv(p->comm, comm, sizeof(comm)),
	     why, err ? " (cannot continue it)" : "");
	if (err)
		wlog("guard: cannot continue %u: %s", p->pid, strerror(-err));
}

/* Held while its name's verdict was on its way: the scope says now. */
static bool out_of_scope(struct guard *g, const struct umt_guard_rec *r)
{
	struct guard_proc *p = guard__proc(&g->procs, r->pid, true);

	if (!p || !(r->flags & UMT_GUARD_SCOPE_PENDING))
		return false;
	memcpy(p->comm, r->pcomm, sizeof(p->comm));
	if (guard_scoper__in_scope(&g->scoper, p))
		return false;
	let_go(g, p, r, "out of scope, held while its name's verdict was on its way");
	return true;
}

/* A stop of the kernel's, carried out: after it was held, or at once. */
static void act(struct guard *g, const struct umt_guard_rec *r)
{
	struct guard_proc *p = guard__proc(&g->procs, r->pid, true);
	int err = 0;

	g->kernel_stops++;
	if (!p) {
		struct guard_told *t = to_tell(g);

		t->r = *r;
		t->gone = true;
		return;
	}
	memcpy(p->comm, r->pcomm, sizeof(p->comm));
	/*
	 * The kernel sends no stop to a process one is on its way to: one
	 * still marked stopped was resumed since, sooner than a sample could
	 * notice. This is a stop of its own, with its bundle and hook.
	 */
	if (p->stopped && !p->dry)
		guard__resumed_by_operator(g, p);
	/* The kernel could not send it (irq_work busy...): send it now. */
	if (r->sig_ret && !r->dry_run) {
		err = guard_act__signal(p->pidfd, (pid_t)p->pid, SIGSTOP);
		g->fallback_sends++;
	}
	carry_out(g, p, r, NULL, r->dry_run, err);
}

/*
 * A crossing that does not last: a VM's free page reporting takes up to
 * its batch (128 MiB here) off the free lists for a few ms, with no page
 * handed out, and the counters the kernel decides by dip with it. Before
 * a kernel stop at the floor or at a call is told, the guard looks again
 * at the headroom the kernel decided by, every GUARD_RECHECK_MS, up to
 * GUARD_RECHECK_LOOKS times: back over what the stop was about (the
 * call's cost; any room at all for a page), the job goes on.
 */
static bool recheckable(struct guard *g, const struct umt_guard_rec *r)
{
	int64_t room;

	if (r->reason != UMT_GUARD_ADMISSION && r->reason != UMT_GUARD_FLOOR)
		return false;	/* reclaim is the kernel's own alarm */
	return g->n_held < GUARD_HELD_MAX && !guard_kernel__look(&g->session.probes, &room);
}

static bool crossing_over(const struct umt_guard_rec *r, int64_t room)
{
	if (r->reason == UMT_GUARD_ADMISSION)
		return room >= 0 && (uint64_t)room >= r->cost_bytes;
	return room > 0;
}

void guard__kernel_stop(void *guard, const struct umt_guard_rec *r)
{
	struct guard *g = guard;
	struct guard_held *h;

	if (out_of_scope(g, r))
		return;
	if (!recheckable(g, r)) {
		act(g, r);
		return;
	}
	h = &g->held[g->n_held++];
	h->r = *r;
	h->looks = GUARD_RECHECK_LOOKS;
	h->due_ms = clock__mono_ms() + GUARD_RECHECK_MS;
	session__tick_by(&g->session, h->due_ms);
}

/* One more look at a held stop: true when it is done with (told, or let go). */
static bool recheck(struct guard *g, struct guard_held *h, uint64_t now_ms)
{
	char b[32], why[128];
	struct guard_proc *p;
	int64_t room;

	if (now_ms < h->due_ms)
		return false;
	if (guard_kernel__look(&g->session.probes, &room) || !crossing_over(&h->r, room)) {
		if (--h->looks) {
			h->due_ms = now_ms + GUARD_RECHECK_MS;
			return false;
		}
		act(g, &h->r);
		return true;
	}
	p = guard__proc(&g->procs, h->r.pid, true);
	if (!p) {
		act(g, &h->r);
		return true;
	}
	memcpy(p->comm, h->r.pcomm, sizeof(p->comm));
	g->transients++;
	snprintf(why, sizeof(why), "the crossing did not last: %s above the floor again "
		 "after %u ms", fmt_bytes((uint64_t)room, b, sizeof(b)),
		 (GUARD_RECHECK_LOOKS - h->looks + 1) * GUARD_RECHECK_MS);
	let_go(g, p, &h->r, why);
	return true;
}

bool guard__recheck(struct guard *g, uint64_t now_ms)
{
	uint64_t next = UINT64_MAX;
	size_t i = 0;

	while (i < g->n_held) {
		if (recheck(g, &g->held[i], now_ms)) {
			g->held[i] = g->held[--g->n_held];
			continue;
		}
		if (g->held[i].due_ms < next)
			next = g->held[i].due_ms;
		i++;
	}
	if (next != UINT64_MAX)
		session__tick_by(&g->session, next);
	return g->n_held;
}

void guard__settle_held(struct guard *g)
{
	size_t i;

	for (i = 0; i < g->n_held; i++) {
		g->held[i].looks = 1;
		g->held[i].due_ms = 0;
	}
	guard__recheck(g, clock__mono_ms());
}
