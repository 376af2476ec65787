// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * umtrace report: trace for a while, or read a recording (umtrace record),
 * then say which call sites took the host's memory and which still hold
 * it. Both feed the same summary and call sites, record by record.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "attach/kthreads.h"
#include "attach/opts.h"
#include "attach/session.h"
#include "cmd/cli.h"
#include "cmd/commands.h"
#include "cmd/json.h"
#include "export/kthreads_out.h"
#include "export/summary_out.h"
#include "export/torch_out.h"
#include "lib/escape.h"
#include "lib/log.h"
#include "lib/meminfo.h"
#include "lib/sys.h"
#include "lib/units.h"
#include "model/callsites.h"
#include "model/cuda_api.h"
#include "model/summary.h"
#include "rec/recording.h"
#include "rec/replay.h"
#include "stacks/callstack.h"
#include "stacks/symbolize.h"
#include "stacks/unwind.h"

#define MAX_STOPS 10000		/* guard stops kept from a recording */

/* What a recording holds besides calls, for its own lines of the report. */
struct rec_seen {
	uint64_t samples;
	uint64_t min_available;
	uint64_t last_available;		/* MemAvailable at its last sample */
	uint64_t last_total;		/* host RAM then (MemTotal less device nodes) */
	uint32_t max_psi_some;		/* hundredths of a percent */
	struct rec_stop *stops;
	size_t n_stops;
};

struct report {
	struct attach_opts ao;
	bool json;
	uint64_t duration_ms;
	char **cmd;
	const char *file;		/* a recording to read instead of tracing */
	const char *live_opt;		/* an option that only means something live */
	bool platform_given;
	struct session session;
	struct replay_view view;	/* the summary and call sites, live or from FILE */
	enum stack_mode stack;
	struct callstack cs;
	struct rec_seen rec;
	const char *floor_arg;		/* --floor, as written (SIZE or N% of host RAM) */
	uint64_t floor;			/* resolved; 0: none */
};

enum { OPT_FLOOR = OPT_CLI__LAST };

static int option(void *ctx, int opt, const char *arg)
{
	struct report *rp = ctx;

	if (opt != OPT_FLOOR)
		return 0;
	/* Checked against MemTotal here, taken against host RAM once it is known. */
	rp->floor_arg = arg;
	return cli__floor(arg, NULL, &rp->floor);
}

void report_usage(FILE *f)
{
	fprintf(f,
"usage: umtrace report [OPTIONS] [-- COMMAND [ARGS...]]\n"
"       umtrace report [-j] [-p PID] [--platform MODEL] FILE\n"
"\n"
"Trace GPU allocation calls for --duration, until COMMAND ends, or until\n"
"Ctrl-C, then print one entry per call site (its symbolized stack, one\n"
"frame per line, innermost first), most host memory first: calls, bytes\n"
"requested, host memory taken, host memory still held at the end, and the\n"
"growth of what it holds per hour. Then, for every process whose PyTorch\n"
"caching allocator reported through libc10 (--libc10), its allocated and\n"
"reserved bytes, their peaks, a verdict (ok, fragmentation, leak,\n"
"cache-held) and the advice that goes with it.\n"
"\n"
"With FILE, read a recording made by 'umtrace record' instead (on any\n"
"machine: its stacks were named when it was made) and report the same;\n"
"-p keeps only the records of those processes. A recording cut short or\n"
"damaged is read up to its last good chunk, with a warning saying what\n"
"was lost (exit 0); a file that is not a recording, or of an unknown\n"
"format version, is an error (exit 1).\n"
"\n"
"Options:\n"
"  -d, --duration INTERVAL  stop after this long (e.g. 30s, 5m)\n"
"  -j, --json               one JSON object per call site\n"
"      --stack MODE         how call stacks are walked: fp (frame pointers\n"
"                           only), dwarf (unwind 8 KiB of stack copied at\n"
"                           each call with the binaries' call frame\n"
"                           information: also through code built without\n"
"                           frame pointers; fp where that finds nothing), or\n"
"                           auto (default: dwarf where it finds more frames)\n"
"      --floor SIZE         and for each process whose GPU allocations hold\n"
"                           host memory at the end: when, at the pace that\n"
"                           grew over the report and alone, MemAvailable (now,\n"
"                           or a recording's last sample) reaches SIZE (1536M,\n"
"                           2G, or 5%% of host RAM: MemTotal less the device\n"
"                           nodes', as the guard's, or the recording's)\n");
	attach_opts__usage(f);
	fprintf(f, "  -h, --help               show this help\n");
}

/* Options that only mean something while tracing; -p, -v and --platform do both. */
static void seen(void *ctx, int opt)
{
	static const struct {
		int opt;
		const char *name;
	} live[] = {
		{ OPT_LIBCUDA, "--libcuda" }, { OPT_LIBC10, "--libc10" },
		{ OPT_NO_LIBC10, "--no-libc10" },
		{ OPT_RINGBUF, "--ringbuf-size" },
		{ OPT_RESCAN, "--rescan" }, { OPT_MANAGED_FAULTS, "--managed-faults" },
		{ 'd', "--duration" }, { OPT_STACK, "--stack" },
	};
	struct report *rp = ctx;
	size_t i;

	if (opt == OPT_PLATFORM)
		rp->platform_given = true;
	for (i = 0; i < sizeof(live) / sizeof(live[0]) && !rp->live_opt; i++)
		if (live[i].opt == opt)
			rp->live_opt = live[i].name;
}

/* After "--" comes a command; without it, a recording. */
static int operands(struct report *rp, int argc, char **argv)
{
	if (optind < argc && !strcmp(argv[optind - 1], "--")) {
		rp->cmd = &argv[optind];
		return cli__pids_or_command(&rp->ao, rp->cmd);
	}
	if (optind >= argc)
		return 0;
	rp->file = argv[optind];
	if (optind + 1 < argc) {
		elog("report: unexpected argument '%s'; give one recording, or -- COMMAND",
		     argv[optind + 1]);
		return -EINVAL;
	}
	if (rp->live_opt) {
		elog("report: %s applies to tracing, not to reading a recording", rp->live_opt);
		return -EINVAL;
	}
	return 0;
}

static int parse_args(struct report *rp, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "floor", required_argument, NULL, OPT_FLOOR },
		{}
	};
	const struct cli c = {
		.name = "report", .in_order = true, .ao = &rp->ao, .json = &rp->json,
		.duration_ms = &rp->duration_ms, .stack = &rp->stack, .usage = report_usage,
		.longopts = opts, .option = option, .seen = seen, .ctx = rp,
	};
	int err;

	attach_opts__init(&rp->ao);
	err = cli__parse(&c, argc, argv);
	return err ? err : operands(rp, argc, argv);
}

static void on_ustack(void *ctx, const struct umt_ustack_rec *r)
{
	struct report *rp = ctx;

	callstack__ustack(&rp->cs, r);
}

static void on_call(void *ctx, const struct umt_call_rec *r)
{
	struct report *rp = ctx;
	struct sym_frame frames[UMT_STACK_MAX];
	size_t n;

	n = callstack__resolve(&rp->cs, r, frames);
	replay_view__add_call(&rp->view, r, frames, n);
}

static void on_exit_rec(void *ctx, const struct umt_proc_exit_rec *r)
{
	struct report *rp = ctx;

	replay_view__exit(&rp->view, r);
	callstack__forget(&rp->cs, r->pid);
}

static void on_torch(void *ctx, const struct torch_sample *s)
{
	struct report *rp = ctx;

	replay_view__add_torch(&rp->view, s);
}

static const struct session_ops report_ops = {
	.on_call = on_call,
	.on_exit = on_exit_rec,
	.on_ustack = on_ustack,
	.on_torch = on_torch,
};

static double per_hour(uint64_t bytes, uint64_t span_ns)
{
	if (span_ns < 1000000)
		return 0;
	return (double)bytes * 3600e9 / (double)span_ns;
}

/* A site ends in one entry point, so its allocations are of one class. */
static uint64_t site_holds(const struct report *rp, const struct callsite *c)
{
	const struct cuda_api *api = cuda_api__get(c->api);

	if (!api || api->is_free)
		return 0;
	return platform__holds(&rp->view.summary.platform, api->class, c->held_size, c->held_host);
}

static void print_site_text(const struct report *rp, const struct callsite *c,
			    size_t rank, uint64_t span_ns)
{
	char b[6][16], comm[ESC_TERM_LEN(TASK_COMM_LEN)], frame[ESC_TERM_LEN(1024)];
	size_t i;

	printf("#%zu %s: %llu calls, %s requested, %s host taken, %s host still held "
	       "(%s by the cost model, %llu allocations), +%s/h",
	       rank, cuda_api__name(c->api), (unsigned long long)c->calls,
	       fmt_bytes(c->size_bytes, b[0], sizeof(b[0])),
	       fmt_bytes(c->host_taken, b[1], sizeof(b[1])),
	       fmt_bytes(c->held_host, b[2], sizeof(b[2])),
	       fmt_bytes(site_holds(rp, c), b[5], sizeof(b[5])),
	       (unsigned long long)c->held_count,
	       fmt_bytes((uint64_t)per_hour(c->held_host, span_ns), b[3], sizeof(b[3])));
	if (c->exit_count)
		printf(", %s never freed until exit (%llu allocations)",
		       fmt_bytes(c->exit_host, b[4], sizeof(b[4])),
		       (unsigned long long)c->exit_count);
	if (c->device_taken)
		printf(", %s from device nodes (not host RAM)",
		       fmt_bytes(c->device_taken, b[4], sizeof(b[4])));
	printf("  [%s, pid %u%s]\n", esc__term(c->comm, comm, sizeof(comm)), c->pids[0],
	       c->n_pids > 1 ? " and others" : "");
	for (i = 0; i < c->n_frames; i++)
		printf("    %s\n", esc__term(c->frames[i], frame, sizeof(frame)));
}

static void print_site_json(const struct report *rp, const struct callsite *c,
			    size_t rank, uint64_t span_ns)
{
	struct jsonw w;
	size_t i;

	jsonw__open(&w, stdout);
	jsonw__str(&w, "event", "callsite");
	jsonw__u64(&w, "rank", rank);
	jsonw__str(&w, "api", cuda_api__name(c->api));
	jsonw__str(&w, "comm", c->comm);
	jsonw__array(&w, "pids");
	for (i = 0; i < c->n_pids; i++)
		jsonw__u64(&w, NULL, c->pids[i]);
	jsonw__array_end(&w);
	jsonw__u64(&w, "calls", c->calls);
	jsonw__u64(&w, "failed", c->failed);
	jsonw__u64(&w, "size", c->size_bytes);
	jsonw__u64(&w, "host_bytes", c->host_taken);
	jsonw__u64(&w, "held", c->held_count);
	jsonw__u64(&w, "held_host_bytes", c->held_host);
	jsonw__u64(&w, "holds_host_bytes", site_holds(rp, c));
	jsonw__u64(&w, "freed_at_exit", c->exit_count);
	jsonw__u64(&w, "freed_at_exit_host_bytes", c->exit_host);
	jsonw__float(&w, "growth_bytes_per_hour", 0, per_hour(c->held_host, span_ns));
	jsonw__u64(&w, "device_node_bytes", c->device_taken);
	jsonw__array(&w, "stack");
	for (i = 0; i < c->n_frames; i++)
		jsonw__str(&w, NULL, c->frames[i]);
	jsonw__array_end(&w);
	jsonw__close(&w);
}

static void print_stop_json(const struct rec_stop *s)
{
	struct jsonw w;

	jsonw__open(&w, stdout);
	jsonw__str(&w, "event", "stop");
	jsonw__u64(&w, "ts_ns", s->ts_ns);
	jsonw__u64(&w, "pid", s->pid);
	jsonw__str(&w, "comm", s->comm);
	jsonw__u64(&w, "reason", s->reason);
	jsonw__str(&w, "reason_text", s->reason_text);
	jsonw__u64(&w, "mem_available", s->mem_available);
	jsonw__u64(&w, "gpu_host_bytes", s->gpu_host_bytes);
	jsonw__str(&w, "site", s->site);
	jsonw__close(&w);
}

/* A recording's own lines: where and when it was made, what else it holds. */
static void print_recording_json(const struct report *rp)
{
	const struct rec_seen *rs = &rp->rec;
	const struct recfile_info *h = &rp->view.hdr.file;
	const struct recfile_rstats *f = &rp->view.st.file;
	struct jsonw w;
	size_t i;

	jsonw__open(&w, stdout);
	jsonw__str(&w, "event", "recording");
	jsonw__str(&w, "file", rp->file);
	jsonw__u64(&w, "version", h->version);
	jsonw__str(&w, "hostname", h->hostname);
	jsonw__str(&w, "kernel", h->release);
	jsonw__u64(&w, "page_size", h->page_size);
	jsonw__u64(&w, "start_realtime_ns", h->start_realtime_ns);
	jsonw__u64(&w, "start_mono_ns", h->start_mono_ns);
	jsonw__u64(&w, "chunks", f->chunks);
	jsonw__u64(&w, "bytes", f->good_bytes);
	jsonw__u64(&w, "file_bytes", f->file_bytes);
	jsonw__u64(&w, "lost_bytes", f->lost_bytes);
	jsonw__u64(&w, "lost_chunks", f->lost_chunks);
	jsonw__bool(&w, "complete", f->complete);
	jsonw__u64(&w, "calls", rp->view.st.calls);
	jsonw__u64(&w, "exits", rp->view.st.exits);
	jsonw__u64(&w, "samples", rp->view.st.samples);
	jsonw__u64(&w, "stops", rp->view.st.stops);
	jsonw__u64(&w, "last_ns", rp->view.last_ns);
	jsonw__u64(&w, "min_mem_available", rs->min_available);
	jsonw__float(&w, "max_psi_some_avg10", 2, rs->max_psi_some / 100.0);
	jsonw__close(&w);
	for (i = 0; i < rs->n_stops; i++)
		print_stop_json(&rs->stops[i]);
}

static void print_stop_text(const struct rec_stop *s)
{
	char b[16], comm[ESC_TERM_LEN(TASK_COMM_LEN)];
	char why[ESC_TERM_LEN(REC_STOP_REASON_MAX)], site[ESC_TERM_LEN(REC_STOP_SITE_MAX)];

	printf("stopped pid %u (%s): %s; MemAvailable %s, its GPU allocations held ", s->pid,
	       esc__term(s->comm, comm, sizeof(comm)),
	       esc__term(s->reason_text, why, sizeof(why)),
	       fmt_bytes(s->mem_available, b, sizeof(b)));
	printf("%s; top call site %s\n", fmt_bytes(s->gpu_host_bytes, b, sizeof(b)),
	       s->site[0] ? esc__term(s->site, site, sizeof(site)) : "unknown");
}

static void print_recording_text(const struct report *rp)
{
	const struct rec_seen *rs = &rp->rec;
	const struct recfile_info *h = &rp->view.hdr.file;
	uint64_t last_ns = rp->view.last_ns;
	time_t t = (time_t)(h->start_realtime_ns / 1000000000ULL);
	uint64_t span = last_ns > h->start_mono_ns ? last_ns - h->start_mono_ns : 0;
	char when[32] = "?", b[16];
	char host[ESC_TERM_LEN(RECFILE_NAME_MAX)], rel[ESC_TERM_LEN(RECFILE_NAME_MAX)];
	struct tm tm;
	size_t i;

	if (localtime_r(&t, &tm))
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	printf("recording %s: host %s (Linux %s), started %s, %.1f s, %llu samples",
	       rp->file, esc__term(h->hostname, host, sizeof(host)),
	       esc__term(h->release, rel, sizeof(rel)), when, span / 1e9,
	       (unsigned long long)rs->samples);
	if (rs->samples)
		printf(" (MemAvailable down to %s, memory pressure up to %.2f%%)",
		       fmt_bytes(rs->min_available, b, sizeof(b)), rs->max_psi_some / 100.0);
	printf(", %zu stops\n", rs->n_stops);
	for (i = 0; i < rs->n_stops; i++)
		print_stop_text(&rs->stops[i]);
}

static void print_totals_json(const struct report *rp)
{
	struct jsonw w;

	jsonw__open(&w, stdout);
	jsonw__str(&w, "event", "totals");
	jsonw__u64(&w, "records", rp->view.summary.records);
	jsonw__u64(&w, "dropped", rp->view.dropped);
	jsonw__u64(&w, "callsites", rp->view.sites.n);
	jsonw__u64(&w, "held_host_bytes", rp->view.summary.table.host_bytes);
	jsonw__u64(&w, "overflowed", rp->view.sites.overflowed);
	jsonw__close(&w);
}

static void print_totals_text(const struct report *rp)
{
	const struct summary *sm = &rp->view.summary;
	char b[16];

	printf("%zu call sites, %llu GPU calls, %s of host memory still held, "
	       "%llu records lost\n", rp->view.sites.n, (unsigned long long)sm->records,
	       fmt_bytes(sm->table.host_bytes, b, sizeof(b)),
	       (unsigned long long)rp->view.dropped);
	export_torch_text(&rp->view.torch, &rp->view.sites, stdout);
	if (!rp->file)
		export_torch_unseen(&rp->session, stdout);
}

/* MemAvailable the floor is measured from: now, or a recording's last sample. */
static bool floor_available(const struct report *rp, uint64_t *avail)
{
	struct meminfo m;

	if (rp->file) {
		*avail = rp->rec.last_available;
		return rp->rec.samples;
	}
	/* Host RAM only, as the guard counts it: device nodes are not headroom. */
	if (meminfo__read_host(&m, &rp->session.nodes))
		return false;
	*avail = m.available;
	return true;
}

static void print_eta_json(const struct summary_proc *p, uint64_t floor, uint64_t avail,
			   double per_h, double eta_s)
{
	struct jsonw w;

	jsonw__open(&w, stdout);
	jsonw__str(&w, "event", "time_to_floor");
	jsonw__u64(&w, "pid", p->pid);
	jsonw__str(&w, "comm", p->comm);
	jsonw__u64(&w, "floor", floor);
	jsonw__u64(&w, "mem_available", avail);
	jsonw__float(&w, "bytes_per_hour", 0, per_h);
	jsonw__float(&w, "seconds", 0, eta_s);
	jsonw__close(&w);
}

/*
 * --floor: each process whose allocations hold host memory at the end,
 * at the pace that hold grew over the report (from nothing at its first
 * call), alone: when MemAvailable reaches the floor.
 */
static void print_floor(const struct report *rp, uint64_t span_ns)
{
	const struct summary *sm = &rp->view.summary;
	char a[16], b[16], comm[ESC_TERM_LEN(TASK_COMM_LEN)];
	struct summary_proc *v;
	uint64_t avail;
	double per_h, eta;
	size_t i, n;

	if (!rp->floor)
		return;
	if (!floor_available(rp, &avail)) {
		if (!rp->json)
			printf("floor %s: no MemAvailable to measure it from\n",
			       fmt_bytes(rp->floor, a, sizeof(a)));
		return;
	}
	v = summary__procs(sm, &n);
	if (!v)
		return;
	if (!rp->json)
		printf("floor %s (--floor): MemAvailable %s %s\n", fmt_bytes(rp->floor, a, sizeof(a)),
		       fmt_bytes(avail, b, sizeof(b)), rp->file ? "at the recording's end" : "now");
	for (i = 0; i < n; i++) {
		per_h = per_hour(summary__proc_holds(sm, &v[i]), span_ns);
		if (v[i].exited || per_h <= 0)
			continue;
		eta = avail > rp->floor ? (double)(avail - rp->floor) / per_h * 3600 : 0;
		if (rp->json) {
			print_eta_json(&v[i], rp->floor, avail, per_h, eta);
			continue;
		}
		printf("  pid %u (%s): the floor in about %s at +%s/h\n", v[i].pid,
		       esc__term(v[i].comm, comm, sizeof(comm)),
		       fmt_seconds((uint64_t)eta, a, sizeof(a)),
		       fmt_bytes((uint64_t)per_h, b, sizeof(b)));
	}
	free(v);
}

static void print_report(struct report *rp)
{
	struct callsite **v = callsites__sorted(&rp->view.sites);
	uint64_t span = rp->view.last_call_ns - rp->view.first_call_ns;
	size_t i;

	if (!v)
		return;
	if (rp->file && rp->json)
		print_recording_json(rp);
	else if (rp->file)
		print_recording_text(rp);
	for (i = 0; i < rp->view.sites.n; i++) {
		if (rp->json)
			print_site_json(rp, v[i], i + 1, span);
		else
			print_site_text(rp, v[i], i + 1, span);
	}
	if (rp->json) {
		export_torch_json(&rp->view.torch, &rp->view.sites, stdout);
		print_floor(rp, span);
		print_totals_json(rp);
	} else {
		print_totals_text(rp);
		print_floor(rp, span);
	}
	/* Live, it comes after the kernel threads, the shrinker's figure read last. */
	if (rp->file && rp->json)
		export_pool_json(&rp->view.summary, stdout);
	else if (rp->file)
		export_pool_text(&rp->view.summary, stdout);
	fflush(stdout);
	free(v);
}

/* ---- from a recording ---- */

/* The tables are filled by the view (user/rec/replay.c); these are the report's own lines. */
static void file_sample(void *ctx, struct replay_view *v, const struct rec_sample *s)
{
	struct report *rp = ctx;

	(void)v;
	if (!rp->rec.samples || s->mem_available < rp->rec.min_available)
		rp->rec.min_available = s->mem_available;
	if (s->psi_some_avg10 > rp->rec.max_psi_some)
		rp->rec.max_psi_some = s->psi_some_avg10;
	rp->rec.last_available = s->mem_available;
	rp->rec.last_total = s->mem_total;
	rp->rec.samples++;
}

static void file_stop(void *ctx, struct replay_view *v, const struct rec_stop *s)
{
	struct report *rp = ctx;
	struct rec_stop *stops;

	(void)v;
	if (rp->rec.n_stops >= MAX_STOPS)
		return;
	stops = realloc(rp->rec.stops, (rp->rec.n_stops + 1) * sizeof(*stops));
	if (!stops)
		return;
	rp->rec.stops = stops;
	stops[rp->rec.n_stops++] = *s;
}

static const struct replay_hooks file_hooks = {
	.on_sample = file_sample,
	.on_stop = file_stop,
};

static int report_file(struct report *rp)
{
	const struct replay_opts o = cli__replay_opts(&rp->ao, rp->platform_given,
						      &file_hooks, rp);

	if (replay_view__load(&rp->view, rp->file, &o))
		return 1;
	/* A percentage is of the recorded host's RAM. */
	if (rp->floor_arg && rp->rec.samples &&
	    cli__floor_of(rp->floor_arg, rp->rec.last_total, &rp->floor))
		return 2;
	print_report(rp);
	return 0;
}

/* ---- live ---- */

/* Host pages kernel threads took while the report ran. */
static void print_kthreads(struct report *rp)
{
	struct kthread_row *rows;
	size_t n;
	int err;

	rows = kthreads__read(&rp->session.probes, rp->view.summary.page_size, &n, &err);
	if (err)
		wlog("cannot read the kernel threads' pages: %s", strerror(-err));
	if (rp->json)
		export_kthreads_json(rows, n, stdout);
	else
		export_kthreads_text(rows, n, SIZE_MAX, stdout);
	fflush(stdout);
	free(rows);
}

/* The driver's page pool as the report's calls and the kernel saw it. */
static void print_pool(struct report *rp)
{
	struct summary *sm = &rp->view.summary;
	uint64_t shrunk;

	if (probes__driver_shrunk(&rp->session.probes, &shrunk))
		driver_pool__shrunk(&sm->pool, shrunk * sm->page_size);
	if (rp->json)
		export_pool_json(sm, stdout);
	else
		export_pool_text(sm, stdout);
	fflush(stdout);
}

static int report_live(struct report *rp)
{
	struct probe_stats st;
	int err, code;

	err = callstack__init(&rp->cs, rp->stack);
	if (err) {
		elog("cannot set up call stacks: %s", strerror(-err));
		return 1;
	}
	platform__init(&rp->view.summary.platform, rp->ao.platform);
	session__init(&rp->session, &rp->ao, rp->cmd, &report_ops, rp);
	rp->session.duration_ms = rp->duration_ms;
	rp->session.count_kthreads = true;
	rp->session.driver_pool = true;
	rp->session.torch = true;
	rp->session.ustack_bytes = callstack__ustack_bytes(&rp->cs);
	err = session__start(&rp->session);
	if (!err && rp->floor_arg)
		err = cli__floor(rp->floor_arg, &rp->session.nodes, &rp->floor);
	if (!err) {
		err = session__run(&rp->session);
		session__stats(&rp->session, &st);
		rp->view.dropped = st.rec_dropped;
		if (!err) {
			print_report(rp);
			print_kthreads(rp);
			print_pool(rp);
		}
	}
	code = session__exit_code(&rp->session, err);
	callstack__log_stats(&rp->cs);
	session__close(&rp->session);
	callstack__free(&rp->cs);
	return code;
}

int cmd_report(int argc, char **argv)
{
	struct report rp;
	int err, code;

	memset(&rp, 0, sizeof(rp));
	err = parse_args(&rp, argc, argv);
	if (err)
		return cli__exit(&rp.ao, err);
	replay_view__init(&rp.view, page__size());
	code = rp.file ? report_file(&rp) : report_live(&rp);
	replay_view__free(&rp.view);
	free(rp.rec.stops);
	attach_opts__free(&rp.ao);
	return code;
}
