// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * umtrace trace: one line per GPU allocation call with the host memory the
 * calling thread took inside it, then a summary per process and entry point.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "attach_opts.h"
#include "commands.h"
#include "launch.h"
#include "libcuda.h"
#include "log.h"
#include "output.h"
#include "probes.h"
#include "proc_pages.h"
#include "summary.h"

#define TICK_MS 1000

struct trace {
	struct attach_opts ao;
	int pidfds[ATTACH_MAX_PIDS];	/* readable once the process is gone */
	bool json;
	char **cmd;		/* argv of COMMAND, or NULL */
	struct probes probes;
	struct ring_buffer *rb;
	struct libcuda_set libs;
	size_t n_probed;
	struct launched launched;
	bool have_cmd;
	struct summary summary;
	struct output_clock clock;
	struct proc_pages_view pages;
	bool pages_mode;
	bool header_done;
	uint64_t drops_reported;
	uint64_t bad_records;
};

static volatile sig_atomic_t exiting;
static volatile sig_atomic_t exit_signal;

static void on_signal(int sig)
{
	exiting = 1;
	exit_signal = sig;
}

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
		case ':':
			elog("trace: option '%s' needs a value", argv[optind - 1]);
			return -EINVAL;
		default:
			if (optopt)
				elog("trace: unknown option '-%c'; see 'umtrace trace --help'", optopt);
			else
				elog("trace: unknown option '%s'; see 'umtrace trace --help'",
				     argv[optind - 1]);
			return -EINVAL;
		}
	}
	if (optind < argc)
		t->cmd = &argv[optind];
	if (t->cmd && t->ao.n_pids) {
		elog("give either -p PID or a COMMAND, not both");
		return -EINVAL;
	}
	return 0;
}

/*
 * A pidfd tells when a traced process is gone, zombie included (kill(pid,
 * 0) still succeeds on a zombie); where the kernel has none, kill() it is.
 */
static int check_pids(struct trace *t)
{
	size_t i;

	for (i = 0; i < t->ao.n_pids; i++) {
		t->pidfds[i] = (int)syscall(SYS_pidfd_open, t->ao.pids[i], 0);
		if (t->pidfds[i] >= 0 || errno == ENOSYS)
			continue;
		if (errno == ESRCH) {
			elog("no process with pid %d", t->ao.pids[i]);
			return -ESRCH;
		}
		elog("pid %d: %s", t->ao.pids[i], strerror(errno));
		return -errno;
	}
	return 0;
}

static bool pid_gone(const struct trace *t, size_t i)
{
	struct pollfd pfd = { .fd = t->pidfds[i], .events = POLLIN };

	if (pfd.fd < 0)
		return kill(t->ao.pids[i], 0) && errno == ESRCH;
	return poll(&pfd, 1, 0) > 0;
}

/* Explicit --libcuda paths must all work; a bad one is an error. */
static int find_libs(struct trace *t)
{
	size_t i;
	int err;

	for (i = 0; i < t->ao.n_libcuda; i++) {
		err = libcuda_set__add(&t->libs, t->ao.libcuda[i]);
		if (err == -EISDIR) {
			elog("--libcuda %s: is not a regular file", t->ao.libcuda[i]);
			return err;
		}
		if (err < 0) {
			elog("--libcuda %s: %s", t->ao.libcuda[i], strerror(-err));
			return err;
		}
	}
	if (t->ao.n_libcuda)
		return 0;
	libcuda_set__add_default(&t->libs);
	libcuda_set__scan_proc(&t->libs);
	return 0;
}

/* Attach to the libraries not yet probed; errors are fatal when explicit. */
static int attach_new_libs(struct trace *t)
{
	size_t i;
	int n;

	for (i = 0; i < t->libs.n; i++) {
		struct libcuda *lib = &t->libs.libs[i];

		if (lib->probed)
			continue;
		lib->probed = true;
		n = probes__attach_lib(&t->probes, lib->path);
		if (n == 0) {
			if (t->ao.n_libcuda) {
				elog("%s: defines none of the CUDA allocation entry points", lib->path);
				return -ENOENT;
			}
			wlog("%s: defines none of the CUDA allocation entry points", lib->path);
			continue;
		}
		if (n < 0) {
			if (t->ao.n_libcuda)
				return n;
			continue;
		}
		t->n_probed++;
		fprintf(stderr, "umtrace: probing %d entry points in %s\n", n, lib->path);
	}
	return 0;
}

static void on_proc_exit(struct trace *t, const struct umt_proc_exit_rec *r)
{
	if (t->json) {
		printf("{\"ts_ns\":%llu,\"event\":\"exit\",\"pid\":%u,\"comm\":",
		       (unsigned long long)r->ts_ns, r->pid);
		output__json_string(stdout, r->comm);
		fputs("}\n", stdout);
	}
	summary__proc_exit(&t->summary, r);
}

static int on_record(void *ctx, void *data, size_t size)
{
	struct trace *t = ctx;
	const struct umt_call_rec *r = data;

	if (size >= sizeof(struct umt_proc_exit_rec) && r->type == UMT_REC_PROC_EXIT) {
		on_proc_exit(t, data);
		return 0;
	}
	if (size < sizeof(*r) || r->type != UMT_REC_CALL) {
		t->bad_records++;
		return 0;
	}
	if (t->json) {
		output__call_json(stdout, &t->clock, r);
	} else {
		if (!t->header_done)
			output__call_header(stdout);
		t->header_done = true;
		output__call_text(stdout, &t->clock, r);
	}
	summary__consume(&t->summary, r);
	return 0;
}

static int setup(struct trace *t)
{
	struct probe_cfg cfg = {
		.ringbuf_bytes = t->ao.ringbuf_bytes,
		.filter_pids = t->ao.n_pids || t->cmd,
	};
	size_t i;
	int err;

	t->pages_mode = !t->libs.n;
	cfg.proc_pages = t->pages_mode;
	if (t->pages_mode)
		wlog("no libcuda found (linker cache, LD_LIBRARY_PATH, driver directories, running processes); "
		     "counting host pages per process instead; use --libcuda PATH to name one");
	if (t->cmd) {
		err = launch__start(&t->launched, t->cmd);
		if (err) {
			elog("cannot start %s: %s", t->cmd[0], strerror(-err));
			return err;
		}
		t->have_cmd = true;
	}
	err = probes__load(&t->probes, &cfg);
	if (err)
		return err;
	for (i = 0; i < t->ao.n_pids; i++)
		if ((err = probes__add_pid(&t->probes, t->ao.pids[i])))
			return err;
	if (t->have_cmd && (err = probes__add_pid(&t->probes, t->launched.pid)))
		return err;
	err = probes__attach_kernel(&t->probes);
	if (!err)
		err = attach_new_libs(t);
	if (err)
		return err;
	t->rb = ring_buffer__new(probes__events_fd(&t->probes), on_record, t, NULL);
	if (!t->rb) {
		err = -errno;
		elog("cannot open the ring buffer: %s", strerror(errno));
		return err;
	}
	if (t->pages_mode)
		proc_pages__init(&t->pages, probes__proc_pages_fd(&t->probes));
	return 0;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void report_drops(struct trace *t)
{
	struct probe_stats st;

	probes__stats(&t->probes, &st);
	if (st.rec_dropped == t->drops_reported)
		return;
	wlog("%llu GPU call records lost: the ring buffer was full (raise --ringbuf-size)",
	     (unsigned long long)(st.rec_dropped - t->drops_reported));
	t->drops_reported = st.rec_dropped;
}

static bool pids_gone(const struct trace *t)
{
	size_t i;

	if (!t->ao.n_pids)
		return false;
	for (i = 0; i < t->ao.n_pids; i++)
		if (!pid_gone(t, i))
			return false;
	return true;
}

static void rescan(struct trace *t)
{
	if (libcuda_set__scan_proc(&t->libs) > 0)
		attach_new_libs(t);
}

static int run_loop(struct trace *t)
{
	uint64_t now, next_tick = mono_ms() + TICK_MS, next_scan;
	int err = 0;

	next_scan = t->ao.rescan_ms ? mono_ms() + t->ao.rescan_ms : UINT64_MAX;
	while (!exiting) {
		err = ring_buffer__poll(t->rb, 100);
		if (err == -EINTR) {
			err = 0;
			continue;
		}
		if (err < 0) {
			elog("reading the ring buffer: %s", strerror(-err));
			return err;
		}
		now = mono_ms();
		if (now >= next_tick) {
			report_drops(t);
			if (t->pages_mode)
				proc_pages__report(&t->pages, stdout, t->json, &t->clock);
			fflush(stdout);
			next_tick = now + TICK_MS;
		}
		if (!t->ao.n_libcuda && now >= next_scan) {
			rescan(t);
			next_scan = now + t->ao.rescan_ms;
		}
		if (t->have_cmd && launch__done(&t->launched))
			break;
		if (pids_gone(t))
			break;
	}
	/* Whatever the command sent before it exited is still queued. */
	err = ring_buffer__consume(t->rb);
	return err < 0 ? err : 0;
}

static void print_summary(struct trace *t)
{
	struct probe_stats st;

	probes__stats(&t->probes, &st);
	if (t->pages_mode)
		proc_pages__summary(&t->pages, stdout, t->json, &t->clock);
	if (t->json) {
		summary__print_json(&t->summary, stdout);
		printf("{\"event\":\"totals\",\"records\":%llu,\"dropped\":%llu,"
		       "\"unmatched_frees\":%llu,\"unfreed\":%zu,"
		       "\"unfreed_host_bytes\":%llu,\"exits\":%llu,"
		       "\"freed_at_exit\":%llu,\"freed_at_exit_host_bytes\":%llu,"
		       "\"storage_failed\":%llu}\n",
		       (unsigned long long)t->summary.records,
		       (unsigned long long)st.rec_dropped,
		       (unsigned long long)t->summary.unmatched_frees,
		       t->summary.table.count,
		       (unsigned long long)t->summary.table.host_bytes,
		       (unsigned long long)t->summary.exits,
		       (unsigned long long)t->summary.exit_freed,
		       (unsigned long long)t->summary.exit_freed_host,
		       (unsigned long long)st.storage_failed);
	} else if (!t->pages_mode) {
		summary__print_text(&t->summary, stdout);
		printf("%llu GPU calls traced, %llu records lost to a full ring buffer\n",
		       (unsigned long long)t->summary.records,
		       (unsigned long long)st.rec_dropped);
	}
	if (st.rec_dropped)
		wlog("%llu GPU call records were lost in all (raise --ringbuf-size)",
		     (unsigned long long)st.rec_dropped);
	if (t->bad_records)
		wlog("%llu malformed records ignored", (unsigned long long)t->bad_records);
	fflush(stdout);
}

static void install_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

static int exit_code(struct trace *t, int err)
{
	if (err)
		return 1;
	if (!t->have_cmd)
		return 0;
	if (launch__done(&t->launched))
		return launch__exit_code(&t->launched);
	return 128 + (exit_signal ? exit_signal : SIGTERM);
}

int cmd_trace(int argc, char **argv)
{
	struct trace t;
	int err, code;

	memset(&t, 0, sizeof(t));
	memset(t.pidfds, -1, sizeof(t.pidfds));
	err = parse_args(&t, argc, argv);
	if (err) {
		attach_opts__free(&t.ao);
		return err > 0 ? 0 : 2;
	}
	install_signals();
	output__clock_init(&t.clock);
	summary__init(&t.summary, t.clock.page_size);
	err = probes__check_env();
	if (!err)
		err = check_pids(&t);
	if (!err)
		err = find_libs(&t);
	if (!err)
		err = setup(&t);
	/* COMMAND writes to the same stdout: never leave half a line. */
	if (!err && t.have_cmd)
		setvbuf(stdout, NULL, _IOLBF, 0);
	if (!err && t.have_cmd)
		err = launch__release(&t.launched);
	if (!err) {
		if (!t.json && !t.pages_mode) {
			output__call_header(stdout);
			t.header_done = true;
		}
		err = run_loop(&t);
		print_summary(&t);
	}
	if (err && t.have_cmd)
		launch__abort(&t.launched);
	code = exit_code(&t, err);
	ring_buffer__free(t.rb);
	if (t.pages_mode)
		proc_pages__free(&t.pages);
	if (t.probes.skel)
		probes__destroy(&t.probes);
	summary__free(&t.summary);
	libcuda_set__free(&t.libs);
	for (size_t i = 0; i < t.ao.n_pids; i++)
		if (t.pidfds[i] >= 0)
			close(t.pidfds[i]);
	attach_opts__free(&t.ao);
	return code;
}
