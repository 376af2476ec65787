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
#include "guard.h"
#include "guard_kernel.h"
#include "guard_state.h"
#include "log.h"
#include "metrics.h"

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

/* The state file's directory: root's, created 0700 when missing. */
static int state_dir(const char *path)
{
	char dir[4096], *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	if (mkdir(dir, 0700) && errno != EEXIST)
		return -errno;
	return 0;
}

void guard__write_state(struct guard *g)
{
	static bool warned;
	struct guard_status *st;
	int err;

	if (!g->session.probes.skel)
		return;
	st = calloc(1, sizeof(*st));
	if (!st)
		return;
	fill_status(g, st);
	err = state_dir(g->opt.state_file);
	if (!err)
		err = guard_state__write(g->opt.state_file, st);
	if (err && !warned) {
		wlog("guard: cannot write %s: %s ('umtrace status' will not see this guard)",
		     g->opt.state_file, strerror(-err));
		warned = true;
	}
	free(st);
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
	static bool warned;
	size_t i, n = 0;
	int err;

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
	err = metrics__write(g->opt.metrics_file, &m);
	free((void *)m.procs);
	if (err && !warned) {
		wlog("guard: cannot write %s: %s", g->opt.metrics_file, strerror(-err));
		warned = true;
	}
}
