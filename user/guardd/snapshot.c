// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The snapshot the state file and metrics are made from (guardd/report.h),
 * taken from the daemon's state in its loop: the only place the outside's
 * figures are read out of struct guard.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "guardd/kernel.h"
#include "lib/file_writer.h"
#include "rec/flight_recorder.h"
#include "guardd/daemon.h"

static const uint64_t horizons_s[GUARD_HORIZONS] = { 60, 900, 3600 };

/* Each horizon of t, made on first use: a guard and its processes start zeroed. */
static void feed(struct trend *t, uint64_t ts_ns, double v)
{
	unsigned int i;

	for (i = 0; i < GUARD_HORIZONS; i++) {
		if (!t[i].slot_ns)
			trend__init(&t[i], horizons_s[i] * 1000000000ULL);
		trend__add(&t[i], ts_ns, v);
	}
}

void guard__slide_add(struct guard *g, uint64_t ts_ns)
{
	feed(g->slide, ts_ns, (double)g->last_metric);
}

void guard__slide_proc(struct guard_proc *p, uint64_t ts_ns, uint64_t host_bytes)
{
	feed(p->grow, ts_ns, (double)host_bytes);
}

/*
 * The shortest horizon of trends on which one slides by GUARD_SLIDE_MIN
 * (sign -1 down, 1 up): its index, and its rate per second (positive);
 * GUARD_HORIZONS if none.
 */
static unsigned int sliding(const struct trend *t, int sign, uint64_t now, double *rate)
{
	struct trend_fit f;
	unsigned int i;

	for (i = 0; i < GUARD_HORIZONS; i++) {
		if (!t[i].slot_ns || !trend__fit(&t[i], now, &f) ||
		    !trend_fit__slides(&f, sign, (double)GUARD_SLIDE_MIN))
			continue;
		*rate = f.slope * sign;
		return i;
	}
	return GUARD_HORIZONS;
}

/*
 * The shortest horizon on which the metric slides down names the pace:
 * a burst shows on the minute, the seed's 1 GB/h only on the quarter.
 */
static void snapshot_slide(struct guard *g, struct guard_status *st)
{
	double headroom = (double)g->last_metric - (double)g->opt.pol.floor, rate;
	unsigned int i = sliding(g->slide, -1, clock__mono_ns(), &rate);

	if (i == GUARD_HORIZONS)
		return;
	st->slide_horizon = horizons_s[i];
	st->slide_per_hour = (uint64_t)(rate * 3600);
	st->seconds_to_floor = (uint64_t)trend__seconds_to(headroom, rate);
}

static void add_warned(const struct guard_proc *p, int sig, struct guard_status *st)
{
	struct guard_warned *w;

	if (st->n_warned >= GUARD_STATE_MAX_WARNED)
		return;
	w = &st->warned[st->n_warned++];
	w->pid = p->pid;
	w->when = p->warned_at;
	w->eta = p->warned_eta;
	snprintf(w->signal, sizeof(w->signal), "%s",
		 p->warned_signal ? guard_config__signal_name(sig) : "-");
	snprintf(w->comm, sizeof(w->comm), "%s", p->comm);
}

static void add_stopped(const struct guard_proc *p, enum guard_act action,
			struct guard_status *st)
{
	struct guard_stopped *s;

	if (st->n_stopped >= GUARD_STATE_MAX_STOPPED)
		return;
	s = &st->stopped[st->n_stopped++];
	s->pid = p->pid;
	snprintf(s->action, sizeof(s->action), "%s", p->dry ? "dry-run" : guard_act__name(action));
	snprintf(s->reason, sizeof(s->reason), "%s", guard_reason__name(p->reason));
	s->when = p->when;
	snprintf(s->cgroup, sizeof(s->cgroup), "%s", p->cgroup);
	snprintf(s->comm, sizeof(s->comm), "%s", p->comm);
}

/* The driver's page pool, from the calls and the kernel's count of its returns. */
static void driver_pool(struct guard *g, struct guard_status *st)
{
	struct summary *sm = &g->who.summary;
	uint64_t shrunk;
	bool device;

	if (probes__driver_shrunk(&g->session.probes, &shrunk))
		driver_pool__shrunk(&sm->pool, shrunk * sm->page_size);
	st->driver_pool = summary__pool_holds(sm, &device);
	st->driver_pool_seen = driver_pool__seen(&sm->pool, device);
}

static void snapshot_status(struct guard *g, const struct guard_kstats *ks,
			    struct guard_proc **all, size_t n, struct guard_status *st)
{
	const struct guard_opts *o = &g->opt;
	size_t i;

	st->pid = (uint32_t)getpid();
	st->started = g->started;
	st->updated = time(NULL);
	st->floor = o->pol.floor;
	st->low = o->pol.low;
	st->drop = o->pol.drop;
	st->auto_resume = o->pol.auto_resume_above;
	snprintf(st->metric, sizeof(st->metric), "%s", guard_metric__name(o->pol.metric));
	snprintf(st->action, sizeof(st->action), "%s", guard_act__name(o->action));
	st->dry_run = o->dry_run;
	st->headroom = ks->headroom;
	st->metric_value = g->last_metric;
	st->checks = ks->checks;
	st->kernel_stops = g->kernel_stops;
	st->policy_stops = g->policy_stops;
	st->send_failed = ks->send_failed;
	st->reclaims = ks->reclaims;
	st->samples = g->samples;
	if (g->armer.sh) {
		st->pages_always = g->armer.sh->for_good;
		st->pages_on = g->armer.sh->on;
		st->arm_margin = g->armer.sh->for_good ? 0 : g->armer.sh->margin;
		st->arm_late_us = st->arm_margin ?
			guard_arm__covered_late_us(GUARD_LOOK_MS, g->armer.sh->covered_us) : 0;
		st->arms = g->armer.sh->arms;
		st->helper_memlock = g->armer.pid ? (uint64_t)g->armer.sh->memlock : 0;
	}
	st->memlock = g->memlock;
	st->resident_bytes = mem__resident_bytes();
	driver_pool(g, st);
	snapshot_slide(g, st);
	st->warn_eta = o->warn_eta_ms / 1000;
	st->warnings = g->warnings;
	for (i = 0; i < n; i++) {
		if (all[i]->stopped)
			add_stopped(all[i], o->action, st);
		if (all[i]->warned)
			add_warned(all[i], o->warn_signal, st);
	}
}

bool guard__proc_eta(const struct guard *g, struct guard_proc *p, uint64_t now_ns,
		     uint64_t *horizon_s, uint64_t *eta_s, double *per_hour)
{
	double headroom = (double)g->last_metric - (double)g->opt.pol.floor;

	/* Up to 3 horizons of 435 slope pairs: the warning's and the metrics' one fit. */
	if (p->fit_sample != g->samples + 1) {
		p->fit_horizon = sliding(p->grow, 1, now_ns, &p->fit_rate);
		p->fit_sample = g->samples + 1;
	}
	if (p->fit_horizon == GUARD_HORIZONS)
		return false;
	*horizon_s = horizons_s[p->fit_horizon];
	*eta_s = (uint64_t)trend__seconds_to(headroom, p->fit_rate);
	*per_hour = p->fit_rate * 3600;
	return true;
}

static void proc_slide(struct guard *g, struct guard_proc *p,
		       struct guard_metrics_process *row)
{
	double per_hour;

	if (!guard__proc_eta(g, p, clock__mono_ns(), &row->slide_horizon,
			     &row->seconds_to_floor, &per_hour))
		row->slide_horizon = row->seconds_to_floor = 0;
}

/* What the daemon could not keep, and its flight recorder's memory. */
static void snapshot_losses(struct guard *g, struct guard_snapshot *s)
{
	struct file_writer_stats fw;
	struct flight_stats fl;
	struct log_stats ls;

	log__stats(&ls);
	s->log_dropped = ls.dropped;
	s->log_stops_dropped = ls.dropped_stops;
	if (g->report.files) {
		file_writer__stats(g->report.files, &fw);
		s->file_writes_failed = fw.failed;
		s->file_writes_superseded = fw.replaced;
	}
	if (g->pm.flight) {
		flight__stats(g->pm.flight, &fl);
		s->flight_on = true;
		s->flight_bytes = fl.bytes;
		s->flight_evicted = fl.evicted;
	}
}

/* What only the metrics show: memory, counts by reason, each process. */
static void snapshot_metrics(struct guard *g, const struct guard_kstats *ks,
			     struct guard_proc **all, size_t n, struct guard_snapshot *s)
{
	struct guard_metrics_process *procs = calloc(n ? n : 1, sizeof(*procs));
	struct guard_metrics_count *stops = calloc(GUARD_N_REASONS, sizeof(*stops));
	unsigned int r;
	size_t i;

	s->up = !g->exiting;
	s->mem_available = g->sample.available;
	s->mem_free = g->sample.free;
	s->mem_total = g->sample.total;
	s->resumes = g->resumes;
	s->warn_on = g->opt.warn_eta_ms;
	s->kernel_decisions = ks->stops;
	s->last_stop_time = (double)g->last_stop;
	snapshot_losses(g, s);
	for (r = 0; stops && r < GUARD_N_REASONS; r++) {
		stops[r].reason = guard_reason__name(UMT_GUARD_ADMISSION + r);
		stops[r].count = g->stops_by[r];
	}
	s->stops = stops;
	s->n_stops = stops ? GUARD_N_REASONS : 0;
	for (i = 0; procs && i < n; i++) {
		procs[i].pid = (pid_t)all[i]->pid;
		procs[i].comm = all[i]->comm;
		procs[i].host_bytes = guard_sites__proc_host(&g->who, all[i]->pid);
		procs[i].stopped = all[i]->stopped && !all[i]->dry;
		procs[i].warned = all[i]->warned;
		proc_slide(g, all[i], &procs[i]);
	}
	s->procs = procs;
	s->n_procs = procs ? n : 0;
}

/* PyTorch's allocator per process and device, as the model has it now. */
static void snapshot_torch(struct guard *g, struct guard_snapshot *s)
{
	struct guard_metrics_torch *rows;
	const struct torch_dev *d;
	size_t i, n = 0;
	bool moved;

	s->torch_on = g->opt.torch;
	if (!g->torch.n)
		return;
	rows = calloc(g->torch.n, sizeof(*rows));
	for (i = 0; rows && i < g->torch.n; i++) {
		d = torch_model__dev(&g->torch, i);
		if (d->exited)
			continue;
		rows[n++] = (struct guard_metrics_torch){
			.pid = (pid_t)d->pid,
			.comm = d->last.comm,
			.device = d->device,
			.allocated = d->last.allocated,
			.reserved = torch_model__reserved(&g->torch, d, &moved),
			.reserved_known = d->last.flags & TORCH_S_TOTALS,
		};
	}
	s->torch = rows;
	s->n_torch = rows ? n : 0;
}

void guard__write_report(struct guard *g)
{
	struct guard_snapshot *s;
	struct guard_kstats ks;
	struct guard_proc **all;
	size_t n = 0;

	if (!g->session.probes.skel)
		return;
	s = calloc(1, sizeof(*s));
	all = guard__procs_sorted(&g->procs, &n);
	if (!s || !all)
		goto out;
	guard_kernel__stats(&g->session.probes, &ks);
	snapshot_status(g, &ks, all, n, &s->status);
	snapshot_metrics(g, &ks, all, n, s);
	snapshot_torch(g, s);
	guard_report__write(&g->report, s);
	guard_snapshot__free(s);
out:
	free(all);
	free(s);
}
