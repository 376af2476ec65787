// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * umtrace report: trace for a while, then say which call sites took the
 * host's memory and which still hold it.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "attach_opts.h"
#include "callsites.h"
#include "commands.h"
#include "cuda_api.h"
#include "log.h"
#include "output.h"
#include "session.h"
#include "summary.h"
#include "symbolize.h"
#include "units.h"
#include "unwind.h"

#define MAX_SITES 65536
/* Calls in flight at once whose DWARF stack waits for their record. */
#define PENDING_STACKS 1024

enum {
	OPT_STACK = OPT_ATTACH__LAST,
};

struct report {
	struct attach_opts ao;
	bool json;
	uint64_t duration_ms;
	char **cmd;
	struct session session;
	struct summary summary;
	struct callsites sites;
	struct symbolizer *sym;
	enum stack_mode stack;
	struct unwinder *uw;
	struct ustack_table pending;
	uint64_t dwarf_used;		/* calls reported with their DWARF stack */
	uint64_t page_size;
	uint64_t first_ns, last_ns;
};

void report_usage(FILE *f)
{
	fprintf(f,
"usage: umtrace report [OPTIONS] [-- COMMAND [ARGS...]]\n"
"\n"
"Trace GPU allocation calls for --duration, until COMMAND ends, or until\n"
"Ctrl-C, then print one entry per call site (its symbolized stack, one\n"
"frame per line, innermost first), most host memory first: calls, bytes\n"
"requested, host memory taken, host memory still held at the end, and the\n"
"growth of what it holds per hour.\n"
"\n"
"Options:\n"
"  -d, --duration INTERVAL  stop after this long (e.g. 30s, 5m)\n"
"  -j, --json               one JSON object per call site\n"
"      --stack MODE         how call stacks are walked: fp (frame pointers\n"
"                           only), dwarf (unwind 8 KiB of stack copied at\n"
"                           each call with the binaries' call frame\n"
"                           information: also through code built without\n"
"                           frame pointers; fp where that finds nothing), or\n"
"                           auto (default: dwarf where it finds more frames)\n");
	attach_opts__usage(f);
	fprintf(f, "  -h, --help               show this help\n");
}

static int parse_args(struct report *rp, int argc, char **argv)
{
	static const struct option opts[] = {
		ATTACH_LONG_OPTS,
		{ "duration", required_argument, NULL, 'd' },
		{ "json", no_argument, NULL, 'j' },
		{ "stack", required_argument, NULL, OPT_STACK },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	int opt, r;

	attach_opts__init(&rp->ao);
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+:" ATTACH_SHORT_OPTS "d:jh", opts, NULL)) != -1) {
		r = attach_opts__parse(&rp->ao, opt, optarg);
		if (r < 0)
			return -EINVAL;
		if (r)
			continue;
		switch (opt) {
		case 'd':
			if (parse_duration_ms(optarg, &rp->duration_ms) || !rp->duration_ms) {
				elog("invalid --duration '%s': expected e.g. 30s, 5m, 1h", optarg);
				return -EINVAL;
			}
			break;
		case 'j':
			rp->json = true;
			break;
		case OPT_STACK:
			if (stack_mode__parse(optarg, &rp->stack)) {
				elog("invalid --stack '%s': expected fp, dwarf or auto", optarg);
				return -EINVAL;
			}
			break;
		case 'h':
			report_usage(stdout);
			return 1;
		default:
			return attach_opts__bad_option("report", opt, argv);
		}
	}
	if (optind < argc)
		rp->cmd = &argv[optind];
	if (rp->cmd && rp->ao.n_pids) {
		elog("give either -p PID or a COMMAND, not both");
		return -EINVAL;
	}
	return 0;
}

/*
 * Return addresses point after the call: look up the byte before, or a
 * call that ends its function would be named after the next one. The
 * first frame is the probed entry point itself.
 */
static void lookup_addrs(const uint64_t *stack, size_t n, uint64_t *addrs)
{
	size_t i;

	for (i = 0; i < n; i++)
		addrs[i] = i && stack[i] ? stack[i] - 1 : stack[i];
}

/* Unwound now, while the process surely lives; used when its call ends. */
static void on_ustack(void *ctx, const struct umt_ustack_rec *r)
{
	struct report *rp = ctx;
	uint64_t pcs[UMT_STACK_MAX];
	int n;

	n = unwinder__unwind(rp->uw, r, pcs, UMT_STACK_MAX);
	if (n > 0)
		ustack_table__put(&rp->pending, r->tid, r->ts_ns, pcs, n);
}

static void on_call(void *ctx, const struct umt_call_rec *r)
{
	struct report *rp = ctx;
	struct sym_frame frames[UMT_STACK_MAX];
	uint64_t addrs[UMT_STACK_MAX], fp[UMT_STACK_MAX], dwarf[UMT_STACK_MAX];
	size_t i, n = r->stack_len / sizeof(r->stack[0]), ndw = 0;
	uint32_t site;

	if (n > UMT_STACK_MAX)
		n = UMT_STACK_MAX;
	for (i = 0; i < n; i++)
		fp[i] = r->stack[i];
	if (rp->stack != STACK_FP)
		ndw = ustack_table__take(&rp->pending, r->tid, r->ts_ns, dwarf,
					 UMT_STACK_MAX);
	if (unwind__use_dwarf(rp->stack, fp, n, ndw)) {
		lookup_addrs(dwarf, ndw, addrs);
		n = ndw;
		rp->dwarf_used++;
	} else {
		lookup_addrs(fp, n, addrs);
	}
	symbolizer__resolve(rp->sym, r->pid, addrs, n, frames);
	site = callsites__add(&rp->sites, r, frames, n, rp->page_size);
	summary__consume_site(&rp->summary, r, site);
	if (!rp->first_ns)
		rp->first_ns = r->ts_ns;
	rp->last_ns = r->ts_ns;
}

static void on_exit_rec(void *ctx, const struct umt_proc_exit_rec *r)
{
	struct report *rp = ctx;

	summary__proc_exit(&rp->summary, r);
	symbolizer__forget(rp->sym, r->pid);
}

static void on_release(const struct alloc_entry *e, bool at_exit, void *ctx)
{
	callsites__release(ctx, e->site, e->host_bytes, e->size, at_exit);
}

static const struct session_ops report_ops = {
	.on_call = on_call,
	.on_exit = on_exit_rec,
	.on_ustack = on_ustack,
};

/* What the DWARF path cost, for -v. */
static void log_unwind_stats(const struct report *rp)
{
	struct unwind_stats st;

	if (!rp->uw)
		return;
	unwinder__stats(rp->uw, &st);
	vlog("stacks: %llu unwound with DWARF (%llu gave nothing), %.1f frames and "
	     "%.1f us each, %zu bytes per call in the ring buffer; %llu calls "
	     "reported with them, %llu lost their slot",
	     (unsigned long long)st.stacks, (unsigned long long)st.failed,
	     st.stacks ? (double)st.frames / st.stacks : 0.0,
	     st.stacks ? st.ns / 1e3 / st.stacks : 0.0,
	     sizeof(struct umt_ustack_rec), (unsigned long long)rp->dwarf_used,
	     (unsigned long long)rp->pending.replaced);
}

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
	return platform__holds(&rp->summary.platform, api->class, c->held_size, c->held_host);
}

static void print_site_text(const struct report *rp, const struct callsite *c,
			    size_t rank, uint64_t span_ns)
{
	char b[6][16];
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
	printf("  [%s, pid %u%s]\n", c->comm, c->pids[0], c->n_pids > 1 ? " and others" : "");
	for (i = 0; i < c->n_frames; i++)
		printf("    %s\n", c->frames[i]);
}

static void print_site_json(const struct report *rp, const struct callsite *c,
			    size_t rank, uint64_t span_ns)
{
	size_t i;

	printf("{\"event\":\"callsite\",\"rank\":%zu,\"api\":\"%s\",\"comm\":", rank,
	       cuda_api__name(c->api));
	output__json_string(stdout, c->comm);
	printf(",\"pids\":[");
	for (i = 0; i < c->n_pids; i++)
		printf("%s%u", i ? "," : "", c->pids[i]);
	printf("],\"calls\":%llu,\"failed\":%llu,\"size\":%llu,\"host_bytes\":%llu,"
	       "\"held\":%llu,\"held_host_bytes\":%llu,\"holds_host_bytes\":%llu,"
	       "\"freed_at_exit\":%llu,"
	       "\"freed_at_exit_host_bytes\":%llu,\"growth_bytes_per_hour\":%.0f,"
	       "\"stack\":[",
	       (unsigned long long)c->calls, (unsigned long long)c->failed,
	       (unsigned long long)c->size_bytes, (unsigned long long)c->host_taken,
	       (unsigned long long)c->held_count, (unsigned long long)c->held_host,
	       (unsigned long long)site_holds(rp, c),
	       (unsigned long long)c->exit_count, (unsigned long long)c->exit_host,
	       per_hour(c->held_host, span_ns));
	for (i = 0; i < c->n_frames; i++) {
		if (i)
			putchar(',');
		output__json_string(stdout, c->frames[i]);
	}
	puts("]}");
}

static void print_report(struct report *rp)
{
	struct callsite **v = callsites__sorted(&rp->sites);
	uint64_t span = rp->last_ns - rp->first_ns;
	struct probe_stats st;
	size_t i;

	if (!v)
		return;
	session__stats(&rp->session, &st);
	for (i = 0; i < rp->sites.n; i++) {
		if (rp->json)
			print_site_json(rp, v[i], i + 1, span);
		else
			print_site_text(rp, v[i], i + 1, span);
	}
	if (rp->json) {
		printf("{\"event\":\"totals\",\"records\":%llu,\"dropped\":%llu,"
		       "\"callsites\":%zu,\"held_host_bytes\":%llu,\"overflowed\":%llu}\n",
		       (unsigned long long)rp->summary.records,
		       (unsigned long long)st.rec_dropped, rp->sites.n,
		       (unsigned long long)rp->summary.table.host_bytes,
		       (unsigned long long)rp->sites.overflowed);
	} else {
		char b[16];

		printf("%zu call sites, %llu GPU calls, %s of host memory still held, "
		       "%llu records lost\n", rp->sites.n,
		       (unsigned long long)rp->summary.records,
		       fmt_bytes(rp->summary.table.host_bytes, b, sizeof(b)),
		       (unsigned long long)st.rec_dropped);
	}
	fflush(stdout);
	free(v);
}

int cmd_report(int argc, char **argv)
{
	struct report rp;
	int err, code;

	memset(&rp, 0, sizeof(rp));
	err = parse_args(&rp, argc, argv);
	if (err) {
		attach_opts__free(&rp.ao);
		return err > 0 ? 0 : 2;
	}
	rp.page_size = (uint64_t)sysconf(_SC_PAGESIZE);
	rp.sym = symbolizer__new();
	if (!rp.sym) {
		elog("cannot create the symbolizer: %s", strerror(errno));
		attach_opts__free(&rp.ao);
		return 1;
	}
	if (rp.stack != STACK_FP) {
		rp.uw = unwinder__new(rp.sym);
		if (!rp.uw || ustack_table__init(&rp.pending, PENDING_STACKS)) {
			elog("cannot set up DWARF unwinding: %s", strerror(ENOMEM));
			unwinder__free(rp.uw);
			symbolizer__free(rp.sym);
			attach_opts__free(&rp.ao);
			return 1;
		}
	}
	summary__init(&rp.summary, rp.page_size);
	platform__init(&rp.summary.platform, rp.ao.platform);
	callsites__init(&rp.sites, MAX_SITES);
	rp.summary.on_release = on_release;
	rp.summary.release_ctx = &rp.sites;
	session__init(&rp.session, &rp.ao, rp.cmd, &report_ops, &rp);
	rp.session.duration_ms = rp.duration_ms;
	rp.session.ustack_bytes = rp.uw ? UMT_USTACK_MAX : 0;
	err = session__start(&rp.session);
	if (!err) {
		err = session__run(&rp.session);
		if (!err)
			print_report(&rp);
	}
	code = session__exit_code(&rp.session, err);
	log_unwind_stats(&rp);
	session__close(&rp.session);
	summary__free(&rp.summary);
	callsites__free(&rp.sites);
	ustack_table__free(&rp.pending);
	unwinder__free(rp.uw);
	symbolizer__free(rp.sym);
	attach_opts__free(&rp.ao);
	return code;
}
