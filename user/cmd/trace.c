// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * umtrace trace: one line per GPU allocation call with the host memory the
 * calling thread took inside it, then a summary per process and entry point.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "attach/opts.h"
#include "attach/proc_pages.h"
#include "attach/session.h"
#include "cmd/cli.h"
#include "cmd/commands.h"
#include "cmd/json.h"
#include "export/output.h"
#include "export/proc_pages_out.h"
#include "export/summary_out.h"
#include "lib/log.h"
#include "model/summary.h"

struct trace {
	struct attach_opts ao;
	bool json;
	char **cmd;		/* argv of COMMAND, or NULL */
	struct session session;
	struct summary summary;
	struct output_clock clock;
	struct proc_pages_view pages;
	bool header_done;
};

void trace_usage(FILE *f)
{
	fprintf(f,
"usage: umtrace trace [OPTIONS] [-- COMMAND [ARGS...]]\n"
"\n"
"Print every GPU allocation and free call made through libcuda, with the\n"
"host memory the calling thread allocated and freed inside the call. With\n"
"COMMAND, run it (held until the probes are attached), trace it, its threads\n"
"and its children, and exit with its exit status. Ends on Ctrl-C or SIGTERM\n"
"otherwise, and prints a summary per process and entry point.\n"
"\n"
"Options:\n"
"  -j, --json               one JSON object per line instead of text\n");
	attach_opts__usage(f);
	fprintf(f, "  -h, --help               show this help\n");
}

static int parse_args(struct trace *t, int argc, char **argv)
{
	const struct cli c = {
		.name = "trace", .in_order = true, .ao = &t->ao, .json = &t->json,
		.usage = trace_usage,
	};
	int err;

	attach_opts__init(&t->ao);
	err = cli__parse(&c, argc, argv);
	if (err)
		return err;
	if (optind < argc)
		t->cmd = &argv[optind];
	if (cli__pids_or_command(&t->ao, t->cmd))
		return -EINVAL;
	if (t->ao.n_libc10) {
		elog("trace: --libc10: trace does not read PyTorch's allocator "
		     "(top, report, record and guard do)");
		return -EINVAL;
	}
	return 0;
}

static void on_proc_exit(void *ctx, const struct umt_proc_exit_rec *r)
{
	struct trace *t = ctx;

	struct jsonw w;

	if (t->json) {
		jsonw__open(&w, stdout);
		jsonw__u64(&w, "ts_ns", r->ts_ns);
		jsonw__str(&w, "event", "exit");
		jsonw__u64(&w, "pid", r->pid);
		jsonw__str(&w, "comm", r->comm);
		jsonw__close(&w);
	}
	summary__proc_exit(&t->summary, r);
}

static void on_call(void *ctx, const struct umt_call_rec *r)
{
	struct trace *t = ctx;

	if (t->json) {
		output__call_json(stdout, &t->clock, r);
	} else {
		if (!t->header_done)
			output__call_header(stdout);
		t->header_done = true;
		output__call_text(stdout, &t->clock, r);
	}
	summary__consume(&t->summary, r);
}

/*
 * Without libcuda: the processes whose page counts moved since the last
 * tick (by change), or that took the most pages since the start (by total).
 */
static void print_pages(struct trace *t, enum proc_pages_order by)
{
	const struct proc_pages_row *rows;
	size_t n;

	if (proc_pages__refresh(&t->pages, by))
		return;
	rows = proc_pages__rows(&t->pages, &n);
	if (by == PROC_PAGES_BY_TOTAL) {
		export_proc_pages_totals(rows, n, &t->clock, t->json, stdout);
		return;
	}
	export_proc_pages_changes(rows, n, &t->clock, t->json, stdout);
	proc_pages__mark(&t->pages);
}

static void on_tick(void *ctx)
{
	struct trace *t = ctx;

	if (t->session.pages_mode)
		print_pages(t, PROC_PAGES_BY_CHANGE);
	fflush(stdout);
}

static const struct session_ops trace_ops = {
	.on_call = on_call,
	.on_exit = on_proc_exit,
	.on_tick = on_tick,
};

static void print_totals_json(const struct trace *t, const struct probe_stats *st)
{
	const struct summary *sm = &t->summary;
	struct jsonw w;

	jsonw__open(&w, stdout);
	jsonw__str(&w, "event", "totals");
	jsonw__u64(&w, "records", sm->records);
	jsonw__u64(&w, "dropped", st->rec_dropped);
	jsonw__u64(&w, "unmatched_frees", sm->unmatched_frees);
	jsonw__u64(&w, "unfreed", sm->table.count);
	jsonw__u64(&w, "unfreed_host_bytes", sm->table.host_bytes);
	jsonw__u64(&w, "exits", sm->exits);
	jsonw__u64(&w, "freed_at_exit", sm->exit_freed);
	jsonw__u64(&w, "freed_at_exit_host_bytes", sm->exit_freed_host);
	jsonw__u64(&w, "storage_failed", st->storage_failed);
	jsonw__u64(&w, "untracked", sm->table.refused + sm->rows_refused + sm->procs_refused);
	jsonw__close(&w);
}

static void print_summary(struct trace *t)
{
	struct probe_stats st;
	uint64_t shrunk;

	session__stats(&t->session, &st);
	if (t->session.pages_mode)
		print_pages(t, PROC_PAGES_BY_TOTAL);
	if (probes__driver_shrunk(&t->session.probes, &shrunk))
		driver_pool__shrunk(&t->summary.pool, shrunk * t->summary.page_size);
	if (t->json) {
		export_summary_json(&t->summary, stdout);
		export_pool_json(&t->summary, stdout);
		print_totals_json(t, &st);
	} else if (!t->session.pages_mode || t->summary.records) {
		export_summary_text(&t->summary, stdout);
		export_pool_text(&t->summary, stdout);
		printf("%llu GPU calls traced, %llu records lost to a full ring buffer\n",
		       (unsigned long long)t->summary.records,
		       (unsigned long long)st.rec_dropped);
	}
	if (st.rec_dropped)
		wlog("%llu records were lost in all (raise --ringbuf-size)",
		     (unsigned long long)st.rec_dropped);
	if (t->session.bad_records)
		wlog("%llu malformed records ignored",
		     (unsigned long long)t->session.bad_records);
	fflush(stdout);
}

int cmd_trace(int argc, char **argv)
{
	struct trace t;
	int err, code;

	memset(&t, 0, sizeof(t));
	err = parse_args(&t, argc, argv);
	if (err)
		return cli__exit(&t.ao, err);
	output__clock_init(&t.clock);
	summary__init(&t.summary, t.clock.page_size);
	platform__init(&t.summary.platform, t.ao.platform);
	session__init(&t.session, &t.ao, t.cmd, &trace_ops, &t);
	t.session.driver_pool = true;
	t.session.batch_wakeups = true;
	/* COMMAND writes to the same stdout: never leave half a line. */
	if (t.cmd)
		setvbuf(stdout, NULL, _IOLBF, 0);
	err = session__start(&t.session);
	if (!err) {
		if (t.session.pages_mode)
			proc_pages__init(&t.pages, probes__proc_pages_fd(&t.session.probes));
		if (!t.json && !t.session.pages_mode) {
			output__call_header(stdout);
			t.header_done = true;
		}
		err = session__run(&t.session);
		print_summary(&t);
	}
	code = session__exit_code(&t.session, err);
	if (t.session.pages_mode)
		proc_pages__free(&t.pages);
	session__close(&t.session);
	summary__free(&t.summary);
	attach_opts__free(&t.ao);
	return code;
}
