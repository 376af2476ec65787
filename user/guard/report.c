// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * What the guard tells the outside: its state file (for `umtrace status`
 * and `resume`) and the Prometheus metrics file.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "lib/clock.h"
#include "lib/file_writer.h"
#include "guard/guard.h"
#include "guard/kernel.h"
#include "guard/state.h"
#include "lib/log.h"
#include "guard/metrics.h"
#include "lib/out_file.h"

static void fill_status(struct guard *g, struct guard_status *st)
{
	struct guard_kstats ks;
	struct guard_proc **all;
	size_t i, n;

	guard_kernel__stats(&g->session.probes, &ks);
	st->pid = (uint32_t)getpid();
	st->started = g->started;
	st->updated = time(NULL);
	st->floor = g->pol.floor;
	st->low = g->pol.low;
	st->drop = g->pol.drop;
	st->auto_resume = g->pol.auto_resume_above;
	snprintf(st->metric, sizeof(st->metric), "%s", guard_metric__name(g->pol.metric));
	snprintf(st->action, sizeof(st->action), "%s", guard_act__name(g->opt.action));
	st->dry_run = g->opt.dry_run;
	st->headroom = ks.headroom;
	st->metric_value = g->last_metric;
	st->checks = ks.checks;
	st->kernel_stops = g->kernel_stops;
	st->policy_stops = g->policy_stops;
	st->send_failed = ks.send_failed;
	st->reclaims = ks.reclaims;
	st->samples = g->samples;
	all = guard__procs_sorted(g, &n);
	for (i = 0; all && i < n && st->n_stopped < GUARD_STATE_MAX_STOPPED; i++) {
		struct guard_proc *p = all[i];
		struct guard_stopped *s;

		if (!p->stopped)
			continue;
		s = &st->stopped[st->n_stopped++];
		s->pid = p->pid;
		snprintf(s->action, sizeof(s->action), "%s",
			 p->dry ? "dry-run" : guard_act__name(g->opt.action));
		snprintf(s->reason, sizeof(s->reason), "%s", p->reason);
		s->when = p->when;
		snprintf(s->cgroup, sizeof(s->cgroup), "%s", p->cgroup);
		snprintf(s->comm, sizeof(s->comm), "%s", p->comm);
	}
	free(all);
}

/*
 * Hand a file's new content to the writer thread (the loop goes on at
 * once), or, before it runs, write it here. Failures are logged when
 * they start, now and then while they last, and when they end.
 */
static void put_file(struct guard *g, struct log_repeat *r, const char *path,
		     char *buf, size_t len, mode_t mode, bool mkdir)
{
	int err;

	if (!buf) {
		err = -ENOMEM;
	} else if (g->files) {
		file_writer__put(g->files, path, buf, len, mode, mkdir);
		/* The last write that ended: this one may still be on its way. */
		err = file_writer__result(g->files, path);
	} else {
		err = mkdir ? file__make_parent(path) : 0;
		if (!err)
			err = out_file__replace(path, buf, len, mode);
		free(buf);
	}
	if (err > 0)
		return;
	if (err)
		log__repeat(r, clock__mono_ms(), "guard: cannot write %s: %s", path,
			    strerror(-err));
	else
		log__repeat_end(r);
}

void guard__write_state(struct guard *g)
{
	struct guard_status *st;
	size_t len = 0;
	char *buf;

	if (!g->session.probes.skel)
		return;
	st = calloc(1, sizeof(*st));
	if (!st)
		return;
	fill_status(g, st);
	buf = guard_state__format(st, &len);
	free(st);
	put_file(g, &g->state_err, g->opt.state_file, buf, len, 0600, true);
}

static struct guard_metrics_process *metric_procs(struct guard *g, size_t *n)
{
	struct guard_metrics_process *v;
	struct guard_proc **all;
	size_t i;

	all = guard__procs_sorted(g, n);
	if (!all)
		return NULL;
	v = calloc(*n ? *n : 1, sizeof(*v));
	for (i = 0; v && i < *n; i++) {
		v[i].pid = (pid_t)all[i]->pid;
		v[i].comm = all[i]->comm;
		v[i].host_bytes = guard_sites__proc_host(g, all[i]->pid);
		v[i].stopped = all[i]->stopped && !all[i]->dry;
	}
	free(all);
	return v;
}

void guard__write_metrics(struct guard *g)
{
	struct guard_metrics_count stops[GUARD_N_REASONS];
	struct guard_metrics m = { .up = !g->exiting };
	struct guard_kstats ks;
	size_t i, n = 0, len = 0;
	char *buf;

	if (!g->opt.metrics_file || !g->session.probes.skel)
		return;
	guard_kernel__stats(&g->session.probes, &ks);
	for (i = 0; i < GUARD_N_REASONS; i++) {
		stops[i].reason = guard_reasons[i];
		stops[i].count = g->stops_by[i];
	}
	m.floor = g->pol.floor;
	m.low = g->pol.low;
	m.drop = g->pol.drop;
	m.auto_resume_above = g->pol.auto_resume_above;
	m.headroom = ks.headroom;
	m.mem_available = g->sample.available;
	m.mem_free = g->sample.free;
	m.mem_total = g->sample.total;
	m.stops = stops;
	m.n_stops = GUARD_N_REASONS;
	m.resumes = g->resumes;
	m.signal_failures = ks.send_failed;
	m.reclaim_events = ks.reclaims;
	m.kernel_decisions = ks.stops;
	m.admission_checks = ks.checks;
	m.samples = g->samples;
	m.last_stop_time = (double)g->last_stop;
	m.procs = metric_procs(g, &n);
	m.n_procs = m.procs ? n : 0;
	for (i = 0; i < m.n_procs; i++)
		m.stopped_processes += m.procs[i].stopped;
	buf = metrics__text(&m, &len);
	free((void *)m.procs);
	put_file(g, &g->metrics_err, g->opt.metrics_file, buf, len, METRICS_MODE, false);
}
