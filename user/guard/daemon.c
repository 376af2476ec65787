// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * umtrace guard: stop the job that is taking the host's memory before the
 * host goes down. The kernel side (bpf/guard.bpf.h) decides at the GPU
 * call and at the page; this loop keeps its headroom anchored to
 * /proc/meminfo, applies the sampled rule (user/guard/policy.c) on top,
 * and turns every stop into a log line, a state file, metrics, a
 * post-mortem bundle and an optional command.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <search.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "attach/opts.h"
#include "model/callsites.h"
#include "cmd/commands.h"
#include "lib/clock.h"
#include "model/cuda_api.h"
#include "lib/file_writer.h"
#include "guard/guard.h"
#include "guard/action.h"
#include "lib/procfs.h"
#include "guard/kernel.h"
#include "guard/state.h"
#include "lib/log.h"
#include "lib/meminfo.h"
#include "guard/postmortem.h"
#include "attach/session.h"
#include "lib/units.h"

void guard_usage(FILE *f)
{
	fprintf(f,
"usage: umtrace guard [OPTIONS]\n"
"\n"
"Stop (SIGSTOP, or freeze its cgroup; never kill) the process whose memory use\n"
"is about to take the host below FLOOR, decided in the kernel:\n"
"  - at a GPU allocation call's entry, before the call runs, when its host\n"
"    cost (by the platform's model) would cross the floor;\n"
"  - at the page that crosses the floor, for pages taken outside GPU calls;\n"
"  - when it enters direct reclaim with less than LOW left.\n"
"On top, every sample of /proc/meminfo (100 ms near the thresholds, up to 1 s\n"
"far from them) stops the in-scope process holding the most GPU-attributed\n"
"host memory when one sample drops by DROP and leaves less than LOW, or when\n"
"less than FLOOR is left two samples in a row. Stopped jobs stay stopped\n"
"until 'umtrace resume' (or --auto-resume). Runs until SIGINT or SIGTERM.\n"
"\n"
"Options:\n"
"      --floor SIZE         never go below this (default 2500M, scaled down on\n"
"                           hosts under 32G); SIZE is 1536M, 2G, or 5%% of MemTotal\n"
"      --low SIZE           the reclaim and drop rule's bar (default 3000M)\n"
"      --drop SIZE          one sample's fall that counts as a burst (default 2500M)\n"
"      --metric available|free  what is compared (default available: MemAvailable)\n"
"      --action stop|freeze stop the process, or freeze its cgroup v2 as well\n"
"      --scope SCOPE        who may be stopped: gpu (default: processes that made\n"
"                           GPU calls), all, pid:PID[,PID...], cgroup:PATH,\n"
"                           comm:REGEX\n"
"      --protect COMM[,COMM...]  never stop these (pid 1, kernel threads,\n"
"                           umtrace, sshd and systemd-journald never are)\n"
"  -n, --dry-run            decide and log, stop nothing\n"
"      --auto-resume SIZE   resume stopped jobs once the metric stays above SIZE\n"
"      --on-stop CMD        run CMD (sh -c) after each stop, with UMTRACE_* variables\n"
"      --postmortem-dir DIR write a bundle per stop: report, held stacks, recording\n"
"      --metrics-file PATH  Prometheus text for node_exporter's textfile collector\n"
"      --state-file PATH    for 'umtrace status' and 'resume' (default\n"
"                           " GUARD_STATE_DEFAULT ")\n"
"      --config FILE        read options from an INI file; flags override it\n"
"      --no-pin             do not pin the kernel side in " GUARD_PIN_DIR ":\n"
"                           by default it stays armed if the daemon is killed\n"
"                           (a clean exit on SIGINT or SIGTERM disarms it)\n");
	attach_opts__usage(f);
	fprintf(f,
"  -h, --help               show this help\n"
"\n"
"The guard's ring buffer is 1M unless --ringbuf-size says otherwise; -p is\n"
"not a guard option (use --scope pid:).\n"
"\n"
"The platform decides what a GPU call costs the host: on unified memory\n"
"(GB10, Jetson, Thor) a device allocation costs its size; on a discrete GPU\n"
"only pinned and registered host memory does. Without --platform it is\n"
"discrete when the NVIDIA driver lists a GPU with memory of its own, and\n"
"unified otherwise.\n");
}

#define GUARD_RINGBUF (1ULL << 20)
/* Log lines the guard queues before it drops some, and its wait at exit. */
#define GUARD_LOG_LINES 256
#define GUARD_LOG_FLUSH_MS 2000

/* The kernel side may be wrong by up to this; log when it is worse. */
#define ANCHOR_MAX_MS 100

static void reap_children(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

/*
 * At exit, give the last stops' bundles and hooks (stop_aftermath) up to
 * timeout_ms to finish, so that a bundle is whole once the guard is gone;
 * what is still running then is left to finish on its own.
 */
static void wait_children(unsigned int timeout_ms)
{
	uint64_t until = clock__mono_ms() + timeout_ms;
	struct timespec tick = { 0, 10 * 1000000L };

	while (waitpid(-1, NULL, WNOHANG) >= 0 && clock__mono_ms() < until)
		nanosleep(&tick, NULL);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ----- processes the guard knows ----- */

static int proc_cmp(const void *a, const void *b)
{
	const struct guard_proc *x = a, *y = b;

	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

struct guard_proc *guard__proc(struct guard *g, uint32_t pid, bool create)
{
	struct guard_proc key = { .pid = pid }, *p, **slot;

	slot = tfind(&key, &g->procs, proc_cmp);
	if (slot)
		return *slot;
	if (!create || g->n_procs >= GUARD_MAX_PROCS)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	/* Opened now, while pid surely names this process. */
	p->pidfd = pidfd__open((pid_t)pid);
	if (p->pidfd < 0) {
		free(p);
		return NULL;
	}
	if (!tsearch(p, &g->procs, proc_cmp)) {
		close(p->pidfd);
		free(p);
		return NULL;
	}
	g->n_procs++;
	return p;
}

struct collect {
	struct guard_proc **v;
	size_t n;
};

static void collect_one(const void *node, VISIT which, void *ctx)
{
	struct collect *c = ctx;

	if (which == postorder || which == leaf)
		c->v[c->n++] = *(struct guard_proc *const *)node;
}

struct guard_proc **guard__procs_sorted(struct guard *g, size_t *n)
{
	struct collect c = { .v = calloc(g->n_procs + 1, sizeof(*c.v)) };

	*n = 0;
	if (!c.v)
		return NULL;
	twalk_r(g->procs, collect_one, &c);
	*n = c.n;
	return c.v;
}

static void proc_drop(struct guard *g, struct guard_proc *p)
{
	tdelete(p, &g->procs, proc_cmp);
	g->n_procs--;
	if (p->pidfd >= 0)
		close(p->pidfd);
	free(p);
}

/* ----- records ----- */

static void on_call(void *ctx, const struct umt_call_rec *r)
{
	struct guard *g = ctx;
	struct guard_proc *p = guard__proc(g, r->pid, true);

	if (p)
		memcpy(p->comm, r->pcomm, sizeof(p->comm));
	guard_sites__call(g, r);
}

static void on_exit_rec(void *ctx, const struct umt_proc_exit_rec *r)
{
	struct guard *g = ctx;
	struct guard_proc *p = guard__proc(g, r->pid, false);

	guard_sites__exit(g, r);
	guard_flight__exit(g, r);
	if (p && !p->stopped)
		proc_drop(g, p);
}

const char *const guard_reasons[GUARD_N_REASONS] = {
	"admission", "floor", "reclaim", "policy",
};

/* enum umt_guard_reason starts at 1 and ends with the policy's. */
static const char *reason_name(uint32_t reason)
{
	if (reason < UMT_GUARD_ADMISSION || reason > UMT_GUARD_POLICY)
		return "policy";
	return guard_reasons[reason - UMT_GUARD_ADMISSION];
}

static uint32_t reason_code(const char *reason)
{
	uint32_t i;

	for (i = 0; i < GUARD_N_REASONS; i++)
		if (!strcmp(reason, guard_reasons[i]))
			return UMT_GUARD_ADMISSION + i;
	return UMT_GUARD_POLICY;
}

static void count_stop(struct guard *g, const char *reason)
{
	size_t i;

	for (i = 0; i < GUARD_N_REASONS; i++)
		if (!strcmp(reason, guard_reasons[i]))
			g->stops_by[i]++;
	g->last_stop = time(NULL);
}

/* What the kernel said, in words, for the log line. */
static void kernel_detail(const struct umt_guard_rec *r, char *buf, size_t len)
{
	char a[32], b[32];
	int64_t room = r->headroom_pages * (int64_t)g_page_size();
	uint64_t mag = room < 0 ? (uint64_t)-room : (uint64_t)room;

	switch (r->reason) {
	case UMT_GUARD_ADMISSION:
		snprintf(buf, len, "%s of %s with %s%s above the floor",
			 cuda_api__name(r->api), fmt_bytes(r->cost_bytes, a, sizeof(a)),
			 room < 0 ? "-" : "", fmt_bytes(mag, b, sizeof(b)));
		break;
	case UMT_GUARD_FLOOR:
		snprintf(buf, len, "a page taken %s%s past the floor", room < 0 ? "" : "-",
			 fmt_bytes(mag, a, sizeof(a)));
		break;
	default:
		snprintf(buf, len, "direct reclaim with %s%s under low", room < 0 ? "" : "-",
			 fmt_bytes(mag, a, sizeof(a)));
		break;
	}
}

static void on_guard(void *ctx, const struct umt_guard_rec *r)
{
	struct guard *g = ctx;
	struct guard_proc *p = guard__proc(g, r->pid, true);
	char detail[192];
	int err = 0;

	kernel_detail(r, detail, sizeof(detail));
	g->kernel_stops++;
	if (!p) {
		wlog("guard: process %u (%s) was stopped but is gone: %s", r->pid, r->pcomm,
		     detail);
		return;
	}
	memcpy(p->comm, r->pcomm, sizeof(p->comm));
	/* The kernel could not send it (irq_work busy...): send it now. */
	if (r->sig_ret && !r->dry_run) {
		err = guard_act__signal(p->pidfd, (pid_t)p->pid, SIGSTOP);
		g->fallback_sends++;
	}
	guard__stopped(g, p, r->ts_ns, reason_name(r->reason), detail, r->dry_run, err);
}

static void on_scope_ask(void *ctx, const struct umt_scope_ask_rec *r)
{
	guard__answer_scope(ctx, r);
}

static const struct session_ops guard_ops = {
	.on_call = on_call,
	.on_exit = on_exit_rec,
	.on_tick = NULL,	/* set in cmd_guard */
	.on_guard = on_guard,
	.on_scope_ask = on_scope_ask,
};

/* ----- stops ----- */

/* In the child: exec --on-stop with the stop in its environment. */
static void exec_on_stop(struct guard *g, const struct guard_proc *p, const char *reason,
			 const char *bundle, uint64_t held, const char *site)
{
	char buf[64];

	snprintf(buf, sizeof(buf), "%u", p->pid);
	setenv("UMTRACE_PID", buf, 1);
	setenv("UMTRACE_COMM", p->comm, 1);
	setenv("UMTRACE_CGROUP", p->cgroup, 1);
	setenv("UMTRACE_REASON", reason, 1);
	setenv("UMTRACE_ACTION", p->dry ? "dry-run" : guard_act__name(g->opt.action), 1);
	snprintf(buf, sizeof(buf), "%" PRIu64, g->last_metric);
	setenv("UMTRACE_AVAILABLE", buf, 1);
	snprintf(buf, sizeof(buf), "%" PRIu64, held);
	setenv("UMTRACE_HOST_BYTES", buf, 1);
	setenv("UMTRACE_TOP_SITE", site, 1);
	setenv("UMTRACE_POSTMORTEM", bundle, 1);
	execl("/bin/sh", "sh", "-c", g->opt.on_stop, (char *)NULL);
	_exit(127);
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
 * child). The hook runs once the bundle is complete, as before.
 */
static void stop_aftermath(struct guard *g, const struct guard_proc *p, const char *reason,
			   const char *detail, uint64_t held, const char *site)
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
	if (g->opt.postmortem_dir &&
	    postmortem__write(g, p, reason, detail, bundle, sizeof(bundle)))
		bundle[0] = '\0';
	if (g->opt.on_stop)
		exec_on_stop(g, p, reason, bundle, held, site);
	_exit(0);
}

/* Freeze the cgroup too (--action freeze), after the stop took hold. */
static int freeze_cgroup(struct guard *g, struct guard_proc *p)
{
	int err;

	if (g->opt.action != GUARD_ACT_FREEZE || p->dry || !p->cgroup[0])
		return 0;
	err = cgroup__set_frozen(p->cgroup, true);
	if (err == -EDEADLK)
		wlog("guard: not freezing %s: umtrace itself runs in it", p->cgroup);
	else if (err)
		wlog("guard: cannot freeze %s: %s", p->cgroup, strerror(-err));
	else
		p->froze = true;
	return err;
}

void guard__stopped(struct guard *g, struct guard_proc *p, uint64_t ts_ns,
		    const char *reason, const char *detail, bool dry, int send_err)
{
	char held_s[32], avail_s[32], site[512];
	uint64_t held = guard_sites__proc_host(g, p->pid);
	bool first = !p->stopped;

	if (proc__cgroup((pid_t)p->pid, p->cgroup, sizeof(p->cgroup)))
		p->cgroup[0] = '\0';
	p->dry = dry;
	if (first) {
		p->stopped = true;
		p->when = time(NULL);
		snprintf(p->reason, sizeof(p->reason), "%s", reason);
		count_stop(g, reason);
		freeze_cgroup(g, p);
	}
	guard_sites__top_site(g, p->pid, site, sizeof(site));
	/* One line per stop, key=value, for the journal and for grep. */
	slog("guard: %s pid=%u ts=%" PRIu64 ".%09" PRIu64
		" comm=\"%s\" cgroup=%s reason=%s "
		"%s=%s gpu_host=%s top_site=\"%s\" detail=\"%s\"%s",
		dry ? "would-stop" : "stop", p->pid, ts_ns / 1000000000, ts_ns % 1000000000, p->comm, p->cgroup[0] ? p->cgroup : "-",
		reason, guard_metric__name(g->pol.metric),
		fmt_bytes(g->last_metric, avail_s, sizeof(avail_s)),
		fmt_bytes(held, held_s, sizeof(held_s)), site, detail,
		send_err ? " send=failed" : "");
	if (send_err)
		elog("guard: could not stop %u: %s", p->pid, strerror(-send_err));
	if (!first)
		return;
	guard_flight__stop(g, p, reason_code(reason), detail, site);
	stop_aftermath(g, p, reason, detail, held, site);
	guard__write_state(g);
}

/* ----- the sampled rule ----- */

/*
 * The figure the kernel side is anchored to. Pages on the per-CPU free
 * lists are free yet outside MemFree, and the lists refill from MemFree
 * in batches up to their high marks: counted page by page, the kernel's
 * figure would run ahead of MemAvailable by whatever the lists soak up
 * (130 MiB seen here after a burst). Anchored to metric + in the lists -
 * their high marks, it can only be below the metric, never above it.
 */
static int sample_metric(void *ctx, uint64_t *bytes)
{
	struct guard *g = ctx;
	struct pcp_info pcp = {};
	struct meminfo m;
	uint64_t v;
	int err = meminfo__read_host(&m, &g->session.nodes);

	if (err)
		return err;
	if (meminfo__read_pcp(&pcp, &g->session.nodes))
		memset(&pcp, 0, sizeof(pcp));
	g->sample.t_ms = now_ms();
	g->sample.available = m.available;
	g->sample.free = m.free;
	g->sample.total = m.total;
	g->pcp = pcp;
	v = guard_policy__metric(&g->pol, &g->sample) + pcp.count;
	*bytes = v > pcp.high ? v - pcp.high : 0;
	return 0;
}

static struct guard_candidate *candidates(struct guard *g, size_t *n)
{
	struct guard_candidate *c;
	struct guard_proc **all;
	size_t i;

	all = guard__procs_sorted(g, n);
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
		c[i].host_bytes = guard_sites__proc_host(g, p->pid);
		c[i].in_scope = guard__in_scope(g, p);
		c[i].protected = guard__protected(g, p);
		c[i].already_stopped = st == 'T' || (p->froze && cgroup__frozen(p->cgroup));
		c[i].guard_stopped = p->stopped;
	}
	free(all);
	return c;
}

static int act_policy_stop(struct guard *g, struct guard_proc *p)
{
	if (g->opt.dry_run)
		return 0;
	return guard_act__signal(p->pidfd, (pid_t)p->pid, SIGSTOP);
}

static void act_resume(struct guard *g, struct guard_proc *p, const char *why)
{
	int err = 0;

	if (p->froze)
		err = cgroup__set_frozen(p->cgroup, false);
	if (!err && !p->dry)
		err = guard_act__signal(p->pidfd, (pid_t)p->pid, SIGCONT);
	if (err)
		wlog("guard: cannot resume %u: %s", p->pid, strerror(-err));
	slog("guard: resume pid=%u comm=\"%s\" reason=%s", p->pid,
		p->comm, why);
	p->stopped = p->froze = p->dry = false;
	g->resumes++;
}

static void apply(struct guard *g, const struct guard_action *a)
{
	struct guard_proc *p;

	if (a->kind == GUARD_NONE) {
		if (a->reason == GUARD_REASON_NO_VICTIM)
			log__repeat(&g->no_victim, now_ms(), "guard: %s, but no process in "
				    "scope may be stopped", a->text);
		else
			log__repeat_end(&g->no_victim);
		return;
	}
	log__repeat_end(&g->no_victim);
	p = guard__proc(g, (uint32_t)a->pid, false);
	if (!p)
		return;
	if (a->kind == GUARD_RESUME) {
		act_resume(g, p, "recovered");
		return;
	}
	g->policy_stops++;
	guard__stopped(g, p, now_ms() * 1000000, "policy", a->text, g->opt.dry_run,
		       act_policy_stop(g, p));
}

/* A job the guard stopped that runs again: resumed by an operator, or gone. */
static void reconcile(struct guard *g)
{
	struct guard_proc **all;
	size_t i, n;

	all = guard__procs_sorted(g, &n);
	if (!all)
		return;
	for (i = 0; i < n; i++) {
		struct guard_proc *p = all[i];
		char st;

		if (!p->stopped || p->dry)
			continue;
		st = proc__state((pid_t)p->pid);
		if (!st) {
			proc_drop(g, p);
			continue;
		}
		if (st == 'T' || (p->froze && cgroup__frozen(p->cgroup)))
			continue;
		slog("guard: resumed pid=%u comm=\"%s\" by=operator",
			p->pid, p->comm);
		p->stopped = p->froze = false;
		g->resumes++;
	}
	free(all);
}

/* How far the kernel's headroom had drifted from /proc/meminfo. */
static void note_error(struct guard *g, int64_t error)
{
	uint64_t mag = error < 0 ? (uint64_t)-error : (uint64_t)error;

	if (mag > g->error_max)
		g->error_max = mag;
	g->error_sum += mag;
	g->error_n++;
}

static void on_tick(void *ctx)
{
	struct guard *g = ctx;
	struct guard_candidate *c;
	struct guard_action a;
	uint64_t t0 = now_ms();
	int64_t error;
	size_t n = 0;
	int err;

	err = guard_kernel__anchor(&g->session.probes, sample_metric, g, &error);
	if (err) {
		log__repeat(&g->no_meminfo, t0, "guard: cannot read /proc/meminfo: %s",
			    strerror(-err));
		return;
	}
	log__repeat_end(&g->no_meminfo);
	note_error(g, error);
	if (now_ms() - t0 > ANCHOR_MAX_MS)
		log__repeat(&g->slow_meminfo, t0, "guard: reading /proc/meminfo took %llu ms",
			    (unsigned long long)(now_ms() - t0));
	else
		log__repeat_end(&g->slow_meminfo);
	g->samples++;
	g->last_metric = guard_policy__metric(&g->pol, &g->sample);
	reap_children();
	reconcile(g);
	c = candidates(g, &n);
	a = guard_policy__decide(&g->pol, &g->pstate, &g->sample, c, c ? n : 0);
	free(c);
	apply(g, &a);
	g->session.tick_ms = guard_policy__next_interval_ms(&g->pol, &g->pstate);
	guard_flight__sample(g);
	/* Libraries found by the rescan bring new links. */
	if (guard_pins__sync(&g->pins, &g->session.probes))
		log__repeat(&g->no_pin, t0, "guard: cannot pin the probes of a new libcuda");
	else
		log__repeat_end(&g->no_pin);
	if (t0 >= g->next_write_ms) {
		guard__write_state(g);
		guard__write_metrics(g);
		g->next_write_ms = t0 + 1000;
	}
}

/* ----- set-up ----- */

/*
 * The host cost of a GPU call at admission, by class and platform (see
 * user/model/platform.h): bit n set means API n's size comes out of host RAM.
 */
static uint64_t cost_apis(enum platform plat)
{
	uint64_t mask = 0;
	unsigned int i;

	for (i = 0; i < UMT_API__COUNT; i++) {
		const struct cuda_api *a = cuda_api__get(i);

		if (!a || a->is_free)
			continue;
		switch (a->class) {
		case UMT_CLASS_PINNED:
		case UMT_CLASS_REGISTERED:
			mask |= 1ULL << i;
			break;
		case UMT_CLASS_DEVICE:
		case UMT_CLASS_VMM_PHYS:
			if (plat == PLATFORM_UNIFIED)
				mask |= 1ULL << i;
			break;
		default:
			break;	/* managed: the page-level backstop's */
		}
	}
	return mask;
}

static bool driver_lists_gpus(void)
{
	struct stat st;

	return !stat("/proc/driver/nvidia/gpus", &st) && S_ISDIR(st.st_mode);
}

/* Decide the platform now: admission cannot wait for evidence. */
static enum platform pick_platform(struct guard *g, const char **why)
{
	struct platform_model m;

	platform__init(&m, g->ao.platform);
	if (m.forced != PLATFORM_AUTO) {
		*why = "--platform";
		return m.forced;
	}
	if (m.decided != PLATFORM_AUTO) {
		*why = m.why;
		return m.decided;
	}
	if (driver_lists_gpus()) {
		*why = "the NVIDIA driver lists GPUs with memory of their own";
		return PLATFORM_DISCRETE;
	}
	*why = "no NVIDIA GPU with memory of its own is listed";
	return PLATFORM_UNIFIED;
}

static void log_start(struct guard *g, const char *plat, const char *why)
{
	char f[32], l[32], d[32], m[32];

	elog("guard: armed: floor %s, low %s, drop %s per sample, "
		"metric %s (%s now), action %s%s, platform %s (%s)",
		fmt_bytes(g->pol.floor, f, sizeof(f)), fmt_bytes(g->pol.low, l, sizeof(l)),
		fmt_bytes(g->pol.drop, d, sizeof(d)), guard_metric__name(g->pol.metric),
		fmt_bytes(g->last_metric, m, sizeof(m)), guard_act__name(g->opt.action),
		g->opt.dry_run ? " (dry run)" : "", plat, why);
}

/* Keep the kernel side armed if the daemon is killed (user/guard/pin.h). */
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

static int arm(struct guard *g)
{
	int64_t error;
	const char *why;
	enum platform plat = pick_platform(g, &why);
	int err;

	g->kcfg.on = true;
	g->kcfg.dry_run = g->opt.dry_run;
	g->kcfg.cost_apis = cost_apis(plat);
	g->kcfg.scope = guard__scope_kind(g);
	g->session.guard = &g->kcfg;
	/* Pinning may have to mount bpffs first: capabilities go after it. */
	g->session.drop_caps_later = true;
	err = session__start(&g->session);
	if (err)
		return err;
	err = guard__setup_scope(g);
	if (err)
		return err;
	pin(g);
	session__drop_caps(&g->session);
	guard_kernel__set_thresholds(&g->session.probes, g->pol.floor, g->pol.low);
	err = guard_kernel__anchor(&g->session.probes, sample_metric, g, &error);
	if (err) {
		elog("cannot read /proc/meminfo: %s", strerror(-err));
		return err;
	}
	g->last_metric = guard_policy__metric(&g->pol, &g->sample);
	g->started = time(NULL);
	/* Status must find it by the time anyone is told it is armed. */
	guard__write_state(g);
	log_start(g, plat == PLATFORM_UNIFIED ? "unified" : "discrete", why);
	return 0;
}

static struct session_ops ops;

int cmd_guard(int argc, char **argv)
{
	struct guard *g;
	int err, code = 1;

	g = calloc(1, sizeof(*g));
	if (!g) {
		elog("out of memory");
		return 1;
	}
	g->no_victim.what = "guard: no process in scope may be stopped";
	g->no_meminfo.what = "guard: cannot read /proc/meminfo";
	g->slow_meminfo.what = "guard: slow /proc/meminfo reads";
	g->no_pin.what = "guard: cannot pin the probes of a new libcuda";
	err = guard__parse_args(g, argc, argv);
	if (err) {
		code = err > 0 ? 0 : 2;
		goto out;
	}
	err = guard_sites__init(g);
	if (!err)
		err = guard_flight__init(g);
	if (err)
		goto out;
	ops = guard_ops;
	ops.on_tick = on_tick;
	session__init(&g->session, &g->ao, NULL, &ops, g);
	/*
	 * Ticks end the ring buffer's waits (session__run), stop records
	 * wake it at once: idle, the daemon wakes once a sample.
	 */
	g->session.poll_ms = GUARD_MAX_INTERVAL_MS;
	g->session.tick_ms = g->pol.min_interval_ms;
	/*
	 * An always-on daemon: wake per 1/8 of the buffer or poll, not per
	 * call (a wake-up per call tripled the return probe's cost), and a
	 * smaller buffer than trace's (it is mapped twice: it is most of the
	 * daemon's RSS). Kernel stop records still wake it at once.
	 */
	g->session.batch_wakeups = true;
	if (g->ao.ringbuf_bytes == ATTACH_DEFAULT_RINGBUF)
		g->ao.ringbuf_bytes = GUARD_RINGBUF;
	if (!g->ao.rescan_given)
		g->ao.rescan_ms = 2000;	/* a daemon outlives the jobs it starts with */
	err = arm(g);
	if (err) {
		/* Nothing was guarded: no summary, no state for status to find. */
		guard_pins__remove(&g->pins);
		session__close(&g->session);
		goto out;
	}
	/*
	 * From here the loop never waits for stderr (a stuck journald, a
	 * pipe nobody reads): lines queue, and the oldest ordinary ones go
	 * first when the queue is full.
	 */
	if (log__start_async(GUARD_LOG_LINES))
		wlog("guard: cannot start the log writer: a slow stderr can stall the guard");
	g->files = file_writer__new();
	if (!g->files)
		wlog("guard: cannot start the file writer: a slow disk can stall the guard");
	err = session__run(&g->session);
	code = err ? 1 : 0;
	elog("guard: exiting; %" PRIu64 " kernel stops, %" PRIu64
		" policy stops; kernel headroom vs /proc/meminfo over %" PRIu64
		" samples: mean error %" PRIu64 " KiB, max %" PRIu64 " KiB",
		g->kernel_stops, g->policy_stops, g->error_n,
		g->error_n ? g->error_sum / g->error_n >> 10 : 0, g->error_max >> 10);
	wait_children(GUARD_LOG_FLUSH_MS);
	g->exiting = true;
	guard__write_state(g);
	guard__write_metrics(g);
	guard_pins__remove(&g->pins);
	session__close(&g->session);
	if (file_writer__free(g->files, GUARD_LOG_FLUSH_MS))
		wlog("guard: the state file or metrics could not be written before exit");
	g->files = NULL;
	log__stop_async(GUARD_LOG_FLUSH_MS);
out:
	guard__free(g);
	return code;
}
