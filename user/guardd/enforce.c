// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A decision carried out and told: a stop (the kernel's or the sampled
 * rule's) becomes one struct guard_stop, made here once, then the cgroup
 * freeze, the log line, the flight recorder's record, the post-mortem
 * bundle and the --on-stop hook; a resume undoes the stop.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "guardd/guard.h"
#include "guardd/postmortem.h"
#include "lib/escape.h"
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

/* Everything but stdio: a child must not keep the guard's links alive. */
static void close_inherited(void)
{
	int fd;

	if (!close_range(3, ~0U, 0))
		return;
	for (fd = 3; fd < 1024; fd++)
		close(fd);
}

/*
 * The post-mortem bundle and --on-stop, in a child of their own: a
 * snapshot of the guard's memory as the stop found it, written at the
 * disk's pace while the loop goes on (a slow or hung disk stalls only the
 * child). The hook runs once the bundle is complete.
 */
static void aftermath(struct guard *g, const struct guard_stop *s)
{
	char bundle[4096] = "";
	pid_t child;

	if (!g->opt.postmortem_dir && !g->opt.on_stop)
		return;
	child = fork();
	if (child < 0) {
		wlog("guard: cannot write the post-mortem or run --on-stop: %s", strerror(errno));
		return;
	}
	if (child)
		return;
	close_inherited();
	if (g->opt.postmortem_dir && postmortem__write(g, s, bundle, sizeof(bundle)))
		bundle[0] = '\0';
	if (g->opt.on_stop)
		guard_stop__exec_hook(s, g->opt.on_stop, bundle);
	_exit(0);
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
	s->held = guard_sites__proc_host(g, p->pid);
	guard_sites__top_site(g, p->pid, s->top_site, sizeof(s->top_site));
	s->torch = torch_model__judge_pid(&g->torch, p->pid, &s->torch_v);
}

void guard__stopped(struct guard *g, struct guard_proc *p, uint64_t ts_ns,
		    enum umt_guard_reason reason, const char *detail, bool dry, int send_err)
{
	struct guard_stop s = {
		.reason = reason,
		.ts_ns = ts_ns,
		.first = !p->stopped,
		.dry = dry,
		.send_err = send_err,
	};

	if (proc__cgroup((pid_t)p->pid, p->cgroup, sizeof(p->cgroup)))
		p->cgroup[0] = '\0';
	p->dry = dry;
	if (s.first) {
		p->stopped = true;
		p->when = time(NULL);
		p->reason = reason;
		g->stops_by[guard_reason__index(reason)]++;
		g->last_stop = p->when;
		freeze_cgroup(g, p);
	}
	snprintf(s.detail, sizeof(s.detail), "%s", detail);
	make_stop(g, p, &s);
	guard_stop__log(&s);
	if (send_err)
		elog("guard: could not stop %u: %s", p->pid, strerror(-send_err));
	if (!s.first)
		return;
	guard_flight__stop(g, &s);
	aftermath(g, &s);
	guard__write_report(g);
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
