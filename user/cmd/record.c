// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * umtrace record: every GPU call with its stack named while the process
 * lives, process exits and host memory samples, into a file that survives
 * the recorder and the host (user/rec/recording.h), for 'umtrace report FILE'
 * later, anywhere.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "lib/sys.h"
#include "attach/opts.h"
#include "stacks/callstack.h"
#include "cmd/cli.h"
#include "cmd/commands.h"
#include "lib/log.h"
#include "model/platform.h"
#include "rec/recording.h"
#include "attach/session.h"
#include "lib/units.h"

#define DEFAULT_INTERVAL_MS	1000
/* The loop's tick: flushes and samples are checked this often. */
#define TICK_MS			100
/* Under a stream of calls the loop may not tick: look at the clock every so many. */
#define CALLS_PER_CLOCK		256

struct record {
	struct attach_opts ao;
	const char *path;
	bool force;
	uint64_t duration_ms;
	uint64_t interval_ms;
	enum stack_mode stack;
	char **cmd;
	struct session session;
	struct callstack cs;
	struct recording_writer *w;
	struct rec_info info;
	uint64_t next_sample_ns;
	uint64_t calls;
	int write_err;		/* the first, said once */
};

void record_usage(FILE *f)
{
	fprintf(f,
"usage: umtrace record -o FILE [OPTIONS] [-- COMMAND [ARGS...]]\n"
"\n"
"Record every GPU allocation call with its stack (named now, while the\n"
"process lives), process exits, host memory samples (MemAvailable,\n"
"MemFree, MemTotal, memory pressure, direct reclaim) and PyTorch's caching\n"
"allocator's figures (allocated and reserved, per process and device, at\n"
"most every 100 ms while they move; see --libc10) into FILE, for\n"
"'umtrace report FILE' later, on this machine or another. Ends like\n"
"report: after --duration, when COMMAND or the -p processes end, or on\n"
"Ctrl-C.\n"
"\n"
"FILE is written a chunk at a time, at least every second, and synced to\n"
"disk: if the recorder or the host dies, it reads up to its last second.\n"
"It is created 0600 and never overwritten unless --force, which writes a\n"
"new file beside it and renames it over FILE when recording starts. If\n"
"the disk fills up, recording stops (the file stays readable) and the exit\n"
"status is 1.\n"
"\n"
"Options:\n"
"  -o, --output FILE        the recording to create\n"
"      --force              replace FILE if it exists\n"
"  -d, --duration INTERVAL  stop after this long (e.g. 30s, 5m)\n"
"  -i, --interval INTERVAL  host memory sample interval (default 1s, at\n"
"                           least 100ms)\n"
"      --stack MODE         how call stacks are walked: fp, dwarf or auto\n"
"                           (default), as for report\n");
	attach_opts__usage(f);
	fprintf(f, "  -h, --help               show this help\n");
}

static int parse_args(struct record *rc, int argc, char **argv)
{
	const struct cli c = {
		.name = "record", .in_order = true, .ao = &rc->ao, .output = &rc->path,
		.force = &rc->force, .duration_ms = &rc->duration_ms,
		.interval_ms = &rc->interval_ms, .stack = &rc->stack, .usage = record_usage,
	};
	int err;

	attach_opts__init(&rc->ao);
	rc->interval_ms = DEFAULT_INTERVAL_MS;
	err = cli__parse(&c, argc, argv);
	if (err)
		return err;
	if (optind < argc && strcmp(argv[optind - 1], "--")) {
		elog("record: unexpected argument '%s'; a command goes after --", argv[optind]);
		return -EINVAL;
	}
	if (optind < argc)
		rc->cmd = &argv[optind];
	if (!rc->path) {
		elog("record: -o FILE is required");
		return -EINVAL;
	}
	return cli__pids_or_command(&rc->ao, rc->cmd);
}

/* A full disk or a dead one: say it once, and keep the file as it is. */
static void check(struct record *rc, int err)
{
	if (!err || rc->write_err)
		return;
	rc->write_err = err;
	wlog("%s: %s: recording stopped; the file reads up to its last flushed chunk",
	     rc->path, strerror(-err));
}

static void sample(struct record *rc)
{
	struct rec_sample s;

	uint64_t shrunk;

	if (rc->write_err || rec_sample__read(&s, &rc->session.nodes))
		return;
	if (probes__driver_shrunk(&rc->session.probes, &shrunk)) {
		s.has_shrunk = true;
		s.driver_shrunk = shrunk * page__size();
	}
	check(rc, recording_writer__add_sample(rc->w, &s));
}

static void maybe_sample(struct record *rc)
{
	uint64_t now = clock__mono_ns();

	if (now < rc->next_sample_ns)
		return;
	/* Steady: the next one is due an interval after this one was. */
	rc->next_sample_ns += rc->interval_ms * 1000000;
	if (rc->next_sample_ns <= now)
		rc->next_sample_ns = now + rc->interval_ms * 1000000;
	sample(rc);
}

static void update_info(struct record *rc)
{
	struct probe_stats st;

	if (rc->write_err)
		return;
	if (rc->session.probes.skel) {
		session__stats(&rc->session, &st);
		rc->info.dropped = st.rec_dropped;
	}
	check(rc, recording_writer__set_info(rc->w, &rc->info));
}

static void on_ustack(void *ctx, const struct umt_ustack_rec *r)
{
	struct record *rc = ctx;

	callstack__ustack(&rc->cs, r);
}

static void on_call(void *ctx, const struct umt_call_rec *r)
{
	struct record *rc = ctx;
	struct sym_frame frames[UMT_STACK_MAX];
	size_t n;

	if (rc->write_err)
		return;
	n = callstack__resolve(&rc->cs, r, frames);
	check(rc, recording_writer__add_call(rc->w, r, frames, n));
	if (++rc->calls % CALLS_PER_CLOCK == 0)
		maybe_sample(rc);
}

static void on_exit_rec(void *ctx, const struct umt_proc_exit_rec *r)
{
	struct record *rc = ctx;

	callstack__forget(&rc->cs, r->pid);
	if (!rc->write_err)
		check(rc, recording_writer__add_exit(rc->w, r));
}

static void on_torch(void *ctx, const struct torch_sample *s)
{
	struct record *rc = ctx;

	if (!rc->write_err)
		check(rc, recording_writer__add_torch(rc->w, s));
}

static void on_tick(void *ctx)
{
	struct record *rc = ctx;

	maybe_sample(rc);
	update_info(rc);
	if (!rc->write_err)
		check(rc, recording_writer__tick(rc->w));
}

static const struct session_ops record_ops = {
	.on_call = on_call,
	.on_exit = on_exit_rec,
	.on_tick = on_tick,
	.on_ustack = on_ustack,
	.on_torch = on_torch,
};

static int open_output(struct record *rc)
{
	struct platform_model pm;

	rc->w = recording_writer__open(rc->path, RECORDING_SYNC |
				       (rc->force ? RECORDING_FORCE : 0));
	if (!rc->w) {
		if (errno == EEXIST)
			elog("%s: file exists (use --force to replace it)", rc->path);
		else
			elog("cannot create %s: %s", rc->path, strerror(errno));
		return -errno;
	}
	/* What this host's driver says, for a report made elsewhere. */
	platform__init(&pm, rc->ao.platform);
	rc->info.platform_forced = rc->ao.platform;
	rc->info.platform_driver = pm.decided;
	rc->info.sample_interval_ms = (uint32_t)rc->interval_ms;
	check(rc, recording_writer__set_info(rc->w, &rc->info));
	rc->next_sample_ns = clock__mono_ns();
	maybe_sample(rc);
	return 0;
}

static void say_done(const struct record *rc)
{
	struct recording_wstats st;
	char b[16];

	recording_writer__stats(rc->w, &st);
	elog("recorded %llu calls, %llu exits, %llu samples and %llu PyTorch allocator "
		"samples in %s (%s, %.1f bytes per call)", (unsigned long long)st.calls,
		(unsigned long long)st.exits, (unsigned long long)st.samples,
		(unsigned long long)st.torch, rc->path,
		fmt_bytes(st.file_bytes, b, sizeof(b)),
		st.calls ? (double)st.file_bytes / (double)st.calls : 0.0);
}

int cmd_record(int argc, char **argv)
{
	struct record rc;
	int err, code;

	memset(&rc, 0, sizeof(rc));
	err = parse_args(&rc, argc, argv);
	if (err)
		return cli__exit(&rc.ao, err);
	err = callstack__init(&rc.cs, rc.stack);
	if (err) {
		elog("cannot set up call stacks: %s", strerror(-err));
		attach_opts__free(&rc.ao);
		return 1;
	}
	if (open_output(&rc)) {
		callstack__free(&rc.cs);
		attach_opts__free(&rc.ao);
		return 1;
	}
	session__init(&rc.session, &rc.ao, rc.cmd, &record_ops, &rc);
	rc.session.driver_pool = true;
	rc.session.duration_ms = rc.duration_ms;
	rc.session.tick_ms = TICK_MS;
	rc.session.torch = true;
	rc.session.ustack_bytes = callstack__ustack_bytes(&rc.cs);
	err = session__start(&rc.session);
	/* Tracing: only now may --force replace the old recording. */
	if (!err && (err = recording_writer__commit(rc.w)))
		elog("cannot replace %s: %s", rc.path, strerror(-err));
	if (!err)
		err = session__run(&rc.session);
	code = session__exit_code(&rc.session, err);
	if (rc.session.rb) {
		update_info(&rc);
		sample(&rc);
		check(&rc, recording_writer__flush(rc.w));
		say_done(&rc);
		check(&rc, recording_writer__close(rc.w));
	} else {
		/* Nothing was traced: leave no empty recording behind. */
		recording_writer__discard(rc.w);
	}
	if (rc.write_err && !code)
		code = 1;
	callstack__log_stats(&rc.cs);
	session__close(&rc.session);
	callstack__free(&rc.cs);
	attach_opts__free(&rc.ao);
	return code;
}
