// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * umtrace trace: one line per GPU allocation call with the host memory the
 * calling thread took inside it, then a summary per process and entry point.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "attach/opts.h"
#include "attach/proc_pages.h"
#include "attach/session.h"
#include "cmd/commands.h"
#include "export/output.h"
#include "export/proc_pages_out.h"
#include "export/summary_out.h"
#include "lib/escape.h"
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
	static const struct option opts[] = {
		ATTACH_LONG_OPTS,
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	int opt, r;

	attach_opts__init(&t->ao);
	optind = 1;
	opterr = 0;	/* one line of our own instead of getopt's two */
	while ((opt = getopt_long(argc, argv, "+:" ATTACH_SHORT_OPTS "jh", opts, NULL)) != -1) {
		r = attach_opts__parse(&t->ao, opt, optarg);
		if (r < 0)
			return -EINVAL;
		if (r)
			continue;
		switch (opt) {
		case 'j':
			t->json = true;
			break;
		case 'h':
			trace_usage(stdout);
			return 1;
		default:
			return attach_opts__bad_option("trace", opt, argv);
		}
	}
	if (optind < argc)
		t->cmd = &argv[optind];
	if (t->cmd && t->ao.n_pids) {
		elog("give either -p PID or a COMMAND, not both");
		return -EINVAL;
	}
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

	if (t->json) {
		printf("{\"ts_ns\":%llu,\"event\":\"exit\",\"pid\":%u,\"comm\":",
		       (unsigned long long)r->ts_ns, r->pid);
		json__string(stdout, r->comm);
		fputs("}\n", stdout);
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

/* Without libcuda: the processes whose page counts moved since the last tick. */
static void pages_changes(struct trace *t)
{
	const struct proc_pages_row *rows;
	size_t n;

	if (proc_pages__refresh(&t->pages, PROC_PAGES_BY_CHANGE))
		return;
	rows = proc_pages__rows(&t->pages, &n);
	export_proc_pages_changes(rows, n, &t->clock, t->json, stdout);
	proc_pages__mark(&t->pages);
}

static void on_tick(void *ctx)
{
	struct trace *t = ctx;

	if (t->session.pages_mode)
		pages_changes(t);
	fflush(stdout);
}

static const struct session_ops trace_ops = {
	.on_call = on_call,
	.on_exit = on_proc_exit,
	.on_tick = on_tick,
};

/* Without libcuda: the processes that took the most pages since the start. */
static void pages_totals(struct trace *t)
{
	const struct proc_pages_row *rows;
	size_t n;

	if (proc_pages__refresh(&t->pages, PROC_PAGES_BY_TOTAL))
		return;
	rows = proc_pages__rows(&t->pages, &n);
	export_proc_pages_totals(rows, n, &t->clock, t->json, stdout);
}

static void print_summary(struct trace *t)
{
	struct probe_stats st;

	session__stats(&t->session, &st);
	if (t->session.pages_mode)
		pages_totals(t);
	if (t->json) {
		export_summary_json(&t->summary, stdout);
		printf("{\"event\":\"totals\",\"records\":%llu,\"dropped\":%llu,"
		       "\"unmatched_frees\":%llu,\"unfreed\":%zu,"
		       "\"unfreed_host_bytes\":%llu,\"exits\":%llu,"
		       "\"freed_at_exit\":%llu,\"freed_at_exit_host_bytes\":%llu,"
		       "\"storage_failed\":%llu,\"untracked\":%llu}\n",
		       (unsigned long long)t->summary.records,
		       (unsigned long long)st.rec_dropped,
		       (unsigned long long)t->summary.unmatched_frees,
		       t->summary.table.count,
		       (unsigned long long)t->summary.table.host_bytes,
		       (unsigned long long)t->summary.exits,
		       (unsigned long long)t->summary.exit_freed,
		       (unsigned long long)t->summary.exit_freed_host,
		       (unsigned long long)st.storage_failed,
		       (unsigned long long)(t->summary.table.refused + t->summary.rows_refused +
					    t->summary.procs_refused));
	} else if (!t->session.pages_mode || t->summary.records) {
		export_summary_text(&t->summary, stdout);
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
	if (err) {
		attach_opts__free(&t.ao);
		return err > 0 ? 0 : 2;
	}
	output__clock_init(&t.clock);
	summary__init(&t.summary, t.clock.page_size);
	platform__init(&t.summary.platform, t.ao.platform);
	session__init(&t.session, &t.ao, t.cmd, &trace_ops, &t);
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
