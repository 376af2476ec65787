// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The guard's sample, every 100 ms near the thresholds and up to 1 s far
 * from them: re-anchor the kernel's headroom to /proc/meminfo, notice
 * jobs resumed by an operator or gone, apply the sampled rule
 * (guard/policy.c) on top of the kernel's decisions, and tell the outside.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "guardd/daemon.h"
#include "guardd/kernel.h"
#include "lib/sys.h"
#include "lib/procfs.h"

/* The kernel side may be wrong by up to this; log when it is worse. */
#define ANCHOR_MAX_MS 100
/* The state file and metrics, at most this often. */
#define REPORT_MS 1000

/*
 * /proc's figures now, host RAM only. Without /proc/zoneinfo the lists'
 * and the watermarks' figures are 0: no margin, and a meter that will not
 * match the kernel's (guard_kernel__find_zones then says so).
 */
static int read_host(struct guard *g, struct meminfo *m, struct pcp_info *pcp)
{
	int err = meminfo__read_host(m, &g->session.nodes);

	if (err)
		return err;
	if (meminfo__read_pcp(pcp, &g->session.nodes))
		memset(pcp, 0, sizeof(*pcp));
	return 0;
}

static uint64_t meter_of(const struct guard *g, const struct meminfo *m,
			 const struct pcp_info *pcp)
{
	return guard_kernel__meter(m, pcp->low, g->opt.pol.metric == GUARD_METRIC_FREE);
}

/*
 * The figure the kernel side is anchored to, which it decides by where
 * the kernel's counters were not found. The kernel side counts pages
 * as they are taken and freed, the lists' pages included, while MemFree
 * leaves out the per-CPU lists: a list that runs empty refills from
 * MemFree in one batch, which lowers MemFree and not the kernel's figure.
 * Anchored to the metric less one refill of every list, the kernel's
 * figure stays at or below the metric until the next sample while pages
 * are only taken. Pages a CPU frees onto its own list count as free (they
 * are: the kernel hands them out before it takes from MemFree).
 *
 * It used to be less the lists' whole free room (high - count): since
 * Linux 6.7 a free burst tunes the high marks up to high_max, 1.3 GiB a
 * CPU on a 24 GiB host, and the guard stopped jobs gigabytes early.
 */
int guard__sample_metric(void *ctx, uint64_t *bytes)
{
	struct guard *g = ctx;
	struct pcp_info pcp;
	struct meminfo m;
	uint64_t v;
	int err = read_host(g, &m, &pcp);

	if (err)
		return err;
	g->sample.t_ms = clock__mono_ms();
	g->sample.available = m.available;
	g->sample.free = m.free;
	g->sample.total = m.total;
	g->sample.kernel_stops = g->kernel_stops;
	g->pcp = pcp;
	v = guard_policy__metric(&g->opt.pol, &g->sample);
	guard_kernel__set_sample(&g->session.probes, v, meter_of(g, &m, &pcp));
	*bytes = v > pcp.refill ? v - pcp.refill : 0;
	return 0;
}

static struct guard_candidate *candidates(struct guard *g, size_t *n)
{
	uint64_t now = clock__mono_ns();
	struct guard_candidate *c;
	struct guard_proc **all;
	size_t i;

	all = guard__procs_sorted(&g->procs, n);
	if (!all)
		return NULL;
	c = calloc(*n ? *n : 1, sizeof(*c));
	if (!c) {
		free(all);
		return NULL;
	}
	for (i = 0; i < *n; i++) {
		struct guard_proc *p = all[i];
		char st = proc__state((pid_t)p->pid);

		c[i].pid = (pid_t)p->pid;
		c[i].host_bytes = guard_sites__proc_host(&g->who, p->pid);
		guard__slide_proc(p, now, c[i].host_bytes);
		c[i].in_scope = guard_scoper__in_scope(&g->scoper, p);
		c[i].protected = guard_scoper__protected(&g->scoper, p);
		c[i].already_stopped = st == 'T' || (p->froze && cgroup__frozen(p->cgroup));
		c[i].guard_stopped = p->stopped;
	}
	free(all);
	return c;
}

static int policy_stop(struct guard *g, struct guard_proc *p)
{
	if (g->opt.dry_run)
		return 0;
	return guard_act__signal(p->pidfd, (pid_t)p->pid, SIGSTOP);
}

static void apply(struct guard *g, const struct guard_action *a)
{
	struct guard_proc *p;

	if (a->kind == GUARD_NONE) {
		if (a->rule == GUARD_RULE_NO_VICTIM)
			log__repeat(&g->no_victim, clock__mono_ms(), "guard: %s, but no process "
				    "in scope may be stopped", a->text);
		else
			log__repeat_end(&g->no_victim);
		return;
	}
	log__repeat_end(&g->no_victim);
	p = guard__proc(&g->procs, (uint32_t)a->pid, false);
	if (!p)
		return;
	if (a->kind == GUARD_RESUME) {
		guard__resume(g, p, guard_rule__name(a->rule));
		return;
	}
	g->policy_stops++;
	guard__stopped(g, p, clock__mono_ns(), UMT_GUARD_POLICY, a->text, g->opt.dry_run,
		       policy_stop(g, p));
}

/* A job the guard stopped that runs again: resumed by an operator, or gone. */
static void reconcile(struct guard *g)
{
	struct guard_proc **all;
	size_t i, n;

	all = guard__procs_sorted(&g->procs, &n);
	if (!all)
		return;
	for (i = 0; i < n; i++) {
		struct guard_proc *p = all[i];
		char st;

		if (!p->stopped || p->dry)
			continue;
		st = proc__state((pid_t)p->pid);
		if (!st || st == 'Z' || st == 'X') {
			guard__proc_drop(&g->procs, p);
			continue;
		}
		if (st == 'T' || (p->froze && cgroup__frozen(p->cgroup)))
			continue;
		guard__resumed_by_operator(g, p);
	}
	free(all);
}

/* How far the kernel's headroom had drifted from /proc/meminfo. */
static void note_error(struct guard *g, int64_t error)
{
	uint64_t mag = error < 0 ? (uint64_t)-error : (uint64_t)error;

	if (mag > g->error_max)
		g->error_max = mag;
	if (error > 0 && (uint64_t)error > g->error_above)
		g->error_above = (uint64_t)error;
	g->error_sum += mag;
	g->error_n++;
}

static void reap_children(struct guard *g)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		guard_armer__reaped(&g->armer, pid, status);
}

void guard__tick(void *ctx)
{
	struct guard *g = ctx;
	struct guard_candidate *c;
	struct guard_action a;
	uint64_t t0 = clock__mono_ms();
	int64_t error;
	size_t n = 0;
	int err;

	/* Held stops are looked at again sooner than a sample is due. */
	guard__recheck(g, t0);
	guard__tell(g);
	if (t0 < g->next_sample_ms) {
		session__tick_by(&g->session, g->next_sample_ms);
		return;
	}

	err = guard_kernel__anchor(&g->session.probes, guard__sample_metric, g, &error);
	if (err) {
		log__repeat(&g->no_meminfo, t0, "guard: cannot read /proc/meminfo: %s",
			    strerror(-err));
		return;
	}
	log__repeat_end(&g->no_meminfo);
	/* Detached, nothing moves the anchored figure: no error to speak of. */
	if (g->armer.sh && g->armer.sh->on)
		note_error(g, error);
	if (clock__mono_ms() - t0 > ANCHOR_MAX_MS)
		log__repeat(&g->slow_meminfo, t0, "guard: reading /proc/meminfo took %llu ms",
			    (unsigned long long)(clock__mono_ms() - t0));
	else
		log__repeat_end(&g->slow_meminfo);
	g->samples++;
	g->last_metric = guard_policy__metric(&g->opt.pol, &g->sample);
	guard__slide_add(g, clock__mono_ns());
	reap_children(g);
	guard_armer__tick(&g->armer);
	reconcile(g);
	c = candidates(g, &n);
	a = guard_policy__decide(&g->opt.pol, &g->pstate, &g->sample, c, c ? n : 0);
	free(c);
	apply(g, &a);
	guard__tell(g);
	guard__warn(g, t0);
	g->session.tick_ms = guard_policy__next_interval_ms(&g->opt.pol, &g->pstate);
	g->next_sample_ms = t0 + g->session.tick_ms;
	guard_flight__sample(&g->pm);
	guard_scoper__refresh_protect(&g->scoper, clock__mono_ms());
	/* Libraries found by the rescan bring new links. */
	if (guard_pins__sync(&g->pins, &g->session.probes))
		log__repeat(&g->no_pin, t0, "guard: cannot pin the probes of a new libcuda");
	else
		log__repeat_end(&g->no_pin);
	if (t0 >= g->next_write_ms) {
		guard__write_report(g);
		g->next_write_ms = t0 + REPORT_MS;
	}
}

int guard__sample_meter(void *ctx, uint64_t *bytes)
{
	struct guard *g = ctx;
	struct pcp_info pcp;
	struct meminfo m;
	int err = read_host(g, &m, &pcp);

	if (!err)
		*bytes = meter_of(g, &m, &pcp);
	return err;
}
