// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The guard daemon: arm the kernel side (bpf/guard.bpf.h), turn its
 * records into who-holds-what and stops, sample on every tick
 * (guardd/tick.c), and disarm on SIGINT or SIGTERM. Its state is struct
 * guard (guardd/daemon.h); it is made and torn down here alone.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include "guardd/daemon.h"
#include "guardd/kernel.h"
#include "lib/escape.h"
#include "lib/sys.h"
#include "lib/file_writer.h"
#include "lib/units.h"
#include "model/cuda_api.h"
#include "model/platform.h"
#include "rec/flight_recorder.h"

#define GUARD_RINGBUF (1ULL << 20)
/* Log lines the guard queues before it drops some, and its waits at exit. */
#define GUARD_LOG_LINES 256
#define GUARD_FLUSH_MS 2000

/* ----- records ----- */

static void on_call(void *ctx, const struct umt_call_rec *r)
{
	struct sym_frame frames[UMT_STACK_MAX];
	struct guard *g = ctx;
	struct guard_proc *p = guard__proc(&g->procs, r->pid, true);
	uint32_t site;
	size_t n;

	if (p)
		memcpy(p->comm, r->pcomm, sizeof(p->comm));
	n = guard_sites__call(&g->who, r, frames, &site);
	guard_flight__call(&g->pm, r, frames, n);
	torch_model__call(&g->torch, r, site);
}

static void on_exit_rec(void *ctx, const struct umt_proc_exit_rec *r)
{
	struct guard *g = ctx;
	struct guard_proc *p = guard__proc(&g->procs, r->pid, false);

	guard_sites__exit(&g->who, r);
	guard_flight__exit(&g->pm, r);
	torch_model__exit(&g->torch, r->pid);
	if (p && !p->stopped)
		guard__proc_drop(&g->procs, p);
}

/* PyTorch's allocator (--torch): for the stop line, post-mortem and metrics. */
static void on_torch(void *ctx, const struct torch_sample *s)
{
	struct guard *g = ctx;

	if (torch_model__add(&g->torch, s))
		log__repeat(&g->no_torch, clock__mono_ms(), "guard: PyTorch allocator "
			    "samples lost: %s", strerror(ENOMEM));
	guard_flight__torch(&g->pm, s);
}

static void on_scope_ask(void *ctx, const struct umt_scope_ask_rec *r)
{
	struct guard *g = ctx;

	guard_scoper__answer(&g->scoper, r);
}

static const struct session_ops guard_ops = {
	.on_call = on_call,
	.on_exit = on_exit_rec,
	.on_tick = guard__tick,
	.on_guard = guard__kernel_stop,
	.on_scope_ask = on_scope_ask,
	.on_torch = on_torch,
};

/* ----- set-up ----- */

static void log_start(struct guard *g, const char *plat, const char *why)
{
	const struct guard_policy *p = &g->opt.pol;
	char f[32], l[32], d[32], m[32];

	elog("guard: armed: floor %s, low %s, drop %s per sample, "
	     "metric %s (%s now), action %s%s, platform %s (%s), memory locked: %s",
	     fmt_bytes(p->floor, f, sizeof(f)), fmt_bytes(p->low, l, sizeof(l)),
	     fmt_bytes(p->drop, d, sizeof(d)), guard_metric__name(p->metric),
	     fmt_bytes(g->last_metric, m, sizeof(m)), guard_act__name(g->opt.action),
	     g->opt.dry_run ? " (dry run)" : "", plat, why, mem_lock__name(g->memlock));
}

/*
 * Decide from the kernel's free-page counters. Where they cannot be found
 * the guard still works, from its anchored figure, which stops up to the
 * per-CPU lists' margin early: say so once.
 */
static void find_zones(struct guard *g)
{
	struct guard_zones z;
	char why[128] = "";
	int err;

	err = guard_kernel__find_zones(&g->session.probes, g->session.nodes.device,
				       guard__sample_meter, g, &z, why, sizeof(why));
	if (err) {
		wlog("guard: the kernel's memory counters are not used (%s): stops may come "
		     "up to the per-CPU lists' margin above the floor", why);
		return;
	}
	vlog("guard: deciding from the kernel's counters (zones %u, nodes %u): "
	     "%lld pages, /proc %llu", z.zones, z.nodes, (long long)(z.kernel / page__size()),
	     (unsigned long long)(z.proc / page__size()));
}

/* Keep the kernel side armed if the daemon is killed (guard/pin.h). */
static void pin(struct guard *g)
{
	bool stale;
	int err;

	if (g->opt.no_pin)
		return;
	err = guard_pins__open(&g->pins, GUARD_PIN_DIR, &stale);
	if (!err && stale)
		wlog("guard: replacing the kernel side a previous guard left armed");
	if (!err)
		err = guard_pins__sync(&g->pins, &g->session.probes);
	if (err) {
		wlog("guard: cannot pin in %s (%s): the kernel side ends with this process",
		     GUARD_PIN_DIR, strerror(-err));
		guard_pins__remove(&g->pins);
	}
}

static void kernel_cfg(struct guard *g, enum platform plat)
{
	g->kcfg.on = true;
	g->kcfg.dry_run = g->opt.dry_run;
	g->kcfg.metric_free = g->opt.pol.metric == GUARD_METRIC_FREE;
	g->kcfg.cost_apis = platform__admission_apis(plat);
	g->kcfg.scope = guard_scoper__kind(&g->scoper);
}

static void lock_memory(struct guard *g)
{
	int err;

	g->memlock = guard__lock_memory(&err);
	if (g->memlock == MEM_LOCK_NONE && !err) {
		wlog("guard: memory not locked: UMTRACE_NO_MLOCK=1");
		return;
	}
	if (g->memlock == MEM_LOCK_NONE)
		wlog("guard: cannot lock its memory (%s): under reclaim it may wait on page-ins",
		     strerror(-err));
	else if (g->memlock == MEM_LOCK_CURRENT)
		wlog("guard: memory locked as mapped now, not what it maps later: it lacks "
		     "CAP_IPC_LOCK and RLIMIT_MEMLOCK is bounded");
}

static int arm(struct guard *g)
{
	int64_t error;
	const char *why;
	enum platform plat = platform__decide_now(g->opt.ao.platform, &why);
	int err;

	kernel_cfg(g, plat);
	g->session.guard = &g->kcfg;
	/* Attached by the page programs' helper, near the floor only (arm.c). */
	g->session.leave = guard_kernel__page_prog;
	/* Pinning may have to mount bpffs first: capabilities go after it. */
	g->session.drop_caps_later = true;
	err = session__start(&g->session);
	if (err)
		return err;
	lock_memory(g);
	err = guard_scoper__setup(&g->scoper);
	if (!err)
		err = guard_scoper__setup_protect(&g->scoper);
	if (err)
		return err;
	find_zones(g);
	pin(g);
	err = guard_armer__start(&g->armer, &g->session, &g->pins, &g->opt);
	if (err)
		return err;
	session__drop_caps(&g->session);
	guard_kernel__set_thresholds(&g->session.probes, g->opt.pol.floor, g->opt.pol.low);
	err = guard_kernel__anchor(&g->session.probes, guard__sample_metric, g, &error);
	if (err) {
		elog("cannot read /proc/meminfo: %s", strerror(-err));
		return err;
	}
	g->last_metric = guard_policy__metric(&g->opt.pol, &g->sample);
	guard__slide_add(g, clock__mono_ns());
	g->started = time(NULL);
	/* Status must find it by the time anyone is told it is armed. */
	guard__write_report(g);
	log_start(g, plat == PLATFORM_UNIFIED ? "unified" : "discrete", why);
	return 0;
}

static struct guard *guard__new(struct guard_opts *o)
{
	struct guard *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->opt = *o;
	memset(o, 0, sizeof(*o));	/* the guard owns what it held */
	guard_state__init(&g->pstate);
	guard_report__init(&g->report, g->opt.state_file, g->opt.metrics_file);
	g->no_victim.what = "guard: no process in scope may be stopped";
	g->no_meminfo.what = "guard: cannot read /proc/meminfo";
	g->slow_meminfo.what = "guard: slow /proc/meminfo reads";
	g->no_pin.what = "guard: cannot pin the probes of a new libcuda";
	g->no_torch.what = "guard: PyTorch allocator samples lost";
	torch_model__init(&g->torch, NULL);
	g->torch.forget_exited = true;	/* a daemon: jobs come and go */
	session__init(&g->session, &g->opt.ao, NULL, &guard_ops, g);
	g->session.torch = g->opt.torch;
	g->session.driver_pool = true;
	g->scoper.cfg = &g->opt.cfg;
	g->scoper.probes = &g->session.probes;
	/*
	 * Ticks end the ring buffer's waits (session__run), stop records
	 * wake it at once: idle, the daemon wakes once a sample.
	 */
	g->session.poll_ms = GUARD_MAX_INTERVAL_MS;
	g->session.tick_ms = g->opt.pol.min_interval_ms;
	/*
	 * An always-on daemon: wake per 1/8 of the buffer or poll, not per
	 * call (a wake-up per call tripled the return probe's cost), and a
	 * smaller buffer than trace's (it is mapped twice: it is most of the
	 * daemon's RSS). Kernel stop records still wake it at once.
	 */
	g->session.batch_wakeups = true;
	if (g->opt.ao.ringbuf_bytes == ATTACH_DEFAULT_RINGBUF)
		g->opt.ao.ringbuf_bytes = GUARD_RINGBUF;
	if (!g->opt.ao.rescan_given)
		g->opt.ao.rescan_ms = 2000;	/* a daemon outlives the jobs it starts with */
	return g;
}

static void guard__free(struct guard *g)
{
	guard__procs_free(&g->procs);
	guard_sites__free(&g->who);
	guard_flight__free(&g->pm);
	torch_model__free(&g->torch);
	guard_opts__free(&g->opt);
	free(g);
}

/*
 * At exit, give the last stops' bundles and hooks up to timeout_ms to
 * finish, so that a bundle is whole once the guard is gone; what is still
 * running then is left to finish on its own.
 */
static void wait_children(unsigned int timeout_ms)
{
	uint64_t until = clock__mono_ms() + timeout_ms;
	struct timespec tick = { 0, 10 * 1000000L };

	while (waitpid(-1, NULL, WNOHANG) >= 0 && clock__mono_ms() < until)
		nanosleep(&tick, NULL);
}

/* From here the loop never waits for stderr or the disk. */
static void go_async(struct guard *g)
{
	/*
	 * Lines queue, and the oldest ordinary ones go first when the queue
	 * is full (a stuck journald, a pipe nobody reads).
	 */
	if (log__start_writer())
		wlog("guard: cannot start the log writer: a slow stderr can stall the guard");
	g->report.files = file_writer__new();
	if (!g->report.files)
		wlog("guard: cannot start the file writer: a slow disk can stall the guard");
}

static void disarm(struct guard *g)
{
	guard_armer__stop(&g->armer);
	wait_children(GUARD_FLUSH_MS);
	g->exiting = true;
	guard__write_report(g);
	guard_pins__remove(&g->pins);
	session__close(&g->session);
	if (file_writer__free(g->report.files, GUARD_FLUSH_MS))
		wlog("guard: the state file or metrics could not be written before exit");
	g->report.files = NULL;
	log__stop_async(GUARD_FLUSH_MS);
}

/* How the page programs' helper did (guardd/arm.h), for the exit line. */
static void log_arming(struct guard *g)
{
	const struct guard_arm_shared *sh = g->armer.sh;
	char m[32];

	if (!sh || sh->for_good)
		return;
	elog("guard: page programs attached %llu times within %s above low; %llu looks, "
	     "none more than %.1f ms past its time; the margin widened %llu times for late "
	     "ones, and narrowed back %llu times; 99%% of the looks within %u ms",
	     (unsigned long long)sh->arms, fmt_bytes(sh->margin, m, sizeof(m)),
	     (unsigned long long)sh->looks, sh->max_late_us / 1000.0,
	     (unsigned long long)sh->widenings, (unsigned long long)sh->narrowings,
	     guard_late__pct_ms(sh->late_hist, 99));
}

int guard__run(struct guard_opts *o)
{
	struct guard *g;
	int err;

	/*
	 * From its first line the guard never waits for stderr: lines queue
	 * until the writer starts (go_async, once capabilities are dropped),
	 * and a stuck journald or a full pipe only costs them.
	 */
	if (log__queue(GUARD_LOG_LINES))
		wlog("guard: cannot queue its log: a slow stderr can stall the guard");
	g = guard__new(o);
	if (!g) {
		elog("out of memory");
		guard_opts__free(o);
		log__stop_async(GUARD_FLUSH_MS);
		return 1;
	}
	err = guard_sites__init(&g->who, g->opt.ao.platform);
	if (!err)
		err = postmortem__init(&g->pm, &g->opt, &g->who, &g->torch, &g->session);
	if (!err)
		err = arm(g);
	/* Only page programs attached for good see every call's pages. */
	if (!err)
		g->who.summary.pages_unseen = !g->armer.sh || !g->armer.sh->for_good;
	if (err) {
		/* Nothing was guarded: no summary, no state for status to find. */
		guard_armer__stop(&g->armer);
		guard_pins__remove(&g->pins);
		session__close(&g->session);
		guard__free(g);
		log__stop_async(GUARD_FLUSH_MS);
		return 1;
	}
	go_async(g);
	err = session__run(&g->session);
	guard__settle_held(g);
	guard__tell(g);
	elog("guard: exiting; %llu kernel stops, %llu policy stops, %llu let go (the crossing "
	     "did not last); anchored headroom vs /proc/meminfo over %llu samples: mean error "
	     "%llu KiB, max %llu KiB, max above the sample %llu KiB",
	     (unsigned long long)g->kernel_stops, (unsigned long long)g->policy_stops,
	     (unsigned long long)g->transients,
	     (unsigned long long)g->error_n,
	     (unsigned long long)(g->error_n ? g->error_sum / g->error_n >> 10 : 0),
	     (unsigned long long)(g->error_max >> 10),
	     (unsigned long long)(g->error_above >> 10));
	log_arming(g);
	disarm(g);
	guard__free(g);
	return err ? 1 : 0;
}
