// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * umtrace top: who holds the host's memory through GPU allocations, live,
 * one row per process, refreshed every interval.
 */
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "attach/kthreads.h"
#include "attach/opts.h"
#include "attach/session.h"
#include "cmd/cli.h"
#include "cmd/commands.h"
#include "export/kthreads_out.h"
#include "export/summary_out.h"
#include "export/torch_out.h"
#include "guard/state.h"
#include "lib/escape.h"
#include "lib/sys.h"
#include "lib/log.h"
#include "lib/meminfo.h"
#include "lib/pid_table.h"
#include "lib/units.h"
#include "model/summary.h"
#include "model/torch.h"

#define GROWTH_SAMPLES 61	/* one minute of 1 s samples, both ends */
#define MAX_ROWS 200
#define MAX_KTHREAD_ROWS 5

enum top_sort { SORT_HOST, SORT_GPU, SORT_GROWTH, SORT_PID };

/* held_host of one process over the last samples, for its growth rate. */
struct growth {
	uint32_t pid;		/* first: the row's key in the pid_table */
	uint64_t t_ms[GROWTH_SAMPLES];
	uint64_t held[GROWTH_SAMPLES];
	unsigned int n, head;
};
_Static_assert(offsetof(struct growth, pid) == 0, "a pid_table row starts with its pid");

struct top {
	struct attach_opts ao;
	uint64_t interval_ms;
	enum top_sort sort;
	bool once, batch;
	struct session session;
	struct summary summary;
	struct torch_model torch;	/* PyTorch's caching allocator per process */
	struct pid_table growth;	/* of struct growth */
	struct termios saved_tty;
	bool tty_raw;
	unsigned int ticks;
	const char *state_file;		/* the guard's, for its column */
	struct guard_status *guard;	/* read each refresh */
	bool guard_alive;
	const char *floor_arg;		/* --floor, as written (SIZE or N% of host RAM) */
	uint64_t floor;			/* resolved; 0: the running guard's, if any */
	uint64_t available;		/* host MemAvailable at this refresh; 0: unread */
};

struct top_row {
	struct summary_proc p;
	uint64_t holds;		/* host bytes by the platform's cost model */
	int64_t outside;	/* host bytes taken outside GPU calls, net */
	uint64_t managed;	/* pages faulted into live managed allocations */
	bool outside_known;
	double growth_per_h;	/* host bytes per hour, NAN-free: 0 if unknown */
	bool growth_known;
	char guard;		/* 'T' stopped, 'F' frozen by the guard, '-' */
	bool torch;		/* its PyTorch allocator reported */
	struct torch_verdict tv;
};

void top_usage(FILE *f)
{
	fprintf(f,
"usage: umtrace top [OPTIONS]\n"
"\n"
"Live view of the host memory held by GPU allocations, one row per process:\n"
"GPU memory still allocated, the host memory those allocations hold by the\n"
"platform's cost model (see --platform) and the host pages seen taken in\n"
"their calls, the host memory the process took outside GPU calls since\n"
"top started (net of frees), and how fast what the allocations hold grows.\n"
"Only allocations made while top runs are seen. Processes whose PyTorch\n"
"caching allocator reports through libc10 (--libc10) get ALLOCATED,\n"
"RESERVED and CACHED (reserved less allocated) and its VERDICT: warm-up,\n"
"ok, or the root cause of its life so far, fragmentation, leak or cache-held,\n"
"with how long ago it began (umtrace report gives the episodes and advice).\n"
"Quit with q or Ctrl-C.\n"
"\n"
"Options:\n"
"  -i, --interval INTERVAL  refresh every INTERVAL (default 1s)\n"
"  -s, --sort KEY           host (default), gpu, growth or pid\n"
"      --once               print one snapshot after one interval and exit\n"
"  -b, --batch              plain snapshots, no screen control (default when\n"
"                           stdout is not a terminal)\n"
"      --state-file PATH    the running guard's state file (default\n"
"                           " GUARD_STATE_DEFAULT "): when a guard runs, a\n"
"                           header line for it and a G column, T for a\n"
"                           process it stopped, F for one it froze\n"
"      --floor SIZE         when each process growing over the last minute\n"
"                           would take MemAvailable down to SIZE (1536M, 2G,\n"
"                           or 5%% of host RAM: MemTotal less the device\n"
"                           nodes', as the guard's) at its pace, alone;\n"
"                           without it, the running guard's floor\n");
	attach_opts__usage(f);
	fprintf(f, "  -h, --help               show this help\n");
}

static int parse_sort(const char *s, enum top_sort *out)
{
	static const char *const names[] = { "host", "gpu", "growth", "pid" };
	unsigned int i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!strcmp(s, names[i])) {
			*out = (enum top_sort)i;
			return 0;
		}
	}
	elog("invalid --sort '%s': expected host, gpu, growth or pid", s);
	return -EINVAL;
}

enum { OPT_ONCE = OPT_CLI__LAST, OPT_FLOOR };

static int option(void *ctx, int opt, const char *arg)
{
	struct top *t = ctx;

	switch (opt) {
	case 's':
		return parse_sort(arg, &t->sort);
	case OPT_ONCE:
		t->once = true;
		return 0;
	case 'b':
		t->batch = true;
		return 0;
	case OPT_STATE_FILE:
		if (!*arg) {
			elog("--state-file needs a path");
			return -EINVAL;
		}
		t->state_file = arg;
		return 0;
	case OPT_FLOOR:
		t->floor_arg = arg;
		return 0;
	}
	return 0;
}

/*
 * --floor against host RAM, as the guard reads its own: checked against
 * MemTotal as the options are read (nodes NULL), taken once the session
 * knows the device nodes.
 */
static int resolve_floor(struct top *t, const struct numa_nodes *nodes)
{
	return t->floor_arg ? cli__floor(t->floor_arg, nodes, &t->floor) : 0;
}

static int parse_args(struct top *t, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "sort", required_argument, NULL, 's' },
		{ "once", no_argument, NULL, OPT_ONCE },
		{ "batch", no_argument, NULL, 'b' },
		{ "state-file", required_argument, NULL, OPT_STATE_FILE },
		{ "floor", required_argument, NULL, OPT_FLOOR },
		{}
	};
	const struct cli c = {
		.name = "top", .shortopts = "s:b", .longopts = opts, .ao = &t->ao,
		.interval_ms = &t->interval_ms, .usage = top_usage, .option = option, .ctx = t,
	};
	int err;

	attach_opts__init(&t->ao);
	t->interval_ms = 1000;
	t->state_file = GUARD_STATE_DEFAULT;
	err = cli__parse(&c, argc, argv);
	if (err)
		return err;
	if (cli__no_operands("top", argc, argv) || resolve_floor(t, NULL))
		return -EINVAL;
	if (t->once || !isatty(STDOUT_FILENO))
		t->batch = true;
	return 0;
}

/* Record held_host now; return the rate over the samples kept. */
static bool sample_growth(struct growth *g, uint64_t t_ms, uint64_t held, double *per_h)
{
	unsigned int oldest;
	uint64_t dt;

	g->t_ms[g->head] = t_ms;
	g->held[g->head] = held;
	g->head = (g->head + 1) % GROWTH_SAMPLES;
	if (g->n < GROWTH_SAMPLES)
		g->n++;
	if (g->n < 2)
		return false;
	oldest = (g->head + GROWTH_SAMPLES - g->n) % GROWTH_SAMPLES;
	dt = t_ms - g->t_ms[oldest];
	if (!dt)
		return false;
	*per_h = ((double)held - (double)g->held[oldest]) * 3600000.0 / (double)dt;
	return true;
}

static int row_cmp_sort;

static int row_cmp(const void *a, const void *b)
{
	const struct top_row *x = a, *y = b;
	double dx, dy;

	switch (row_cmp_sort) {
	case SORT_GPU:
		dx = (double)x->p.held_gpu, dy = (double)y->p.held_gpu;
		break;
	case SORT_GROWTH:
		dx = x->growth_per_h, dy = y->growth_per_h;
		break;
	case SORT_PID:
		return cmp__u64(x->p.pid, y->p.pid);
	default:
		dx = (double)x->holds, dy = (double)y->holds;
	}
	if (dx != dy)
		return dx < dy ? 1 : -1;
	return x->p.pid < y->p.pid ? -1 : x->p.pid > y->p.pid;
}

static const char *fmt_rate(double per_h, bool known, char *buf, size_t len)
{
	return known ? fmt_bytes_signed((int64_t)per_h, true, buf, len) : "-";
}

static void print_header(struct top *t, FILE *f)
{
	char b[4][16], when[16], why[160];
	struct meminfo m = {};
	time_t now = time(NULL);
	struct tm tm;
	uint64_t used;

	localtime_r(&now, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	t->available = 0;
	if (meminfo__read_host(&m, &t->session.nodes)) {
		fprintf(f, "umtrace top %s  host memory: unreadable\n", when);
		return;
	}
	t->available = m.available;
	used = m.total - m.available;
	fprintf(f, "umtrace top %s  host %s, available %s, free %s\n", when,
		fmt_bytes(m.total, b[0], sizeof(b[0])),
		fmt_bytes(m.available, b[1], sizeof(b[1])),
		fmt_bytes(m.free, b[2], sizeof(b[2])));
	fprintf(f, "held by GPU allocations: %s observed (%.0f%% of used)\n",
		fmt_bytes(t->summary.table.host_bytes, b[3], sizeof(b[3])),
		used ? 100.0 * (double)t->summary.table.host_bytes / (double)used : 0.0);
	fprintf(f, "platform %.70s\n", platform__describe(&t->summary.platform, why, sizeof(why)));
	if (t->session.nodes.n_device)
		fprintf(f, "not host RAM: node(s) %.20s; GPU calls took %s there\n",
			numa__format(&t->session.nodes, why, sizeof(why)),
			fmt_bytes(t->summary.device_taken, b[3], sizeof(b[3])));
}

static void outside_of(struct top *t, struct top_row *row)
{
	uint64_t taken, freed;

	if (probes__outside_pages(&t->session.probes, row->p.pid, &taken, &freed))
		return;
	row->outside = ((int64_t)taken - (int64_t)freed) * (int64_t)t->summary.page_size;
	row->outside_known = true;
}

static const char *fmt_signed(int64_t v, bool known, char *buf, size_t len)
{
	return known ? fmt_bytes_signed(v, false, buf, len) : "-";
}

/*
 * Managed pages CPU faults brought in since the calls, while their
 * allocations live (--managed-faults): the summary hears of them only at
 * the free.
 */
static void add_managed(struct top *t, struct top_row *rows, size_t n)
{
	int fd = probes__managed_fd(&t->session.probes);
	struct umt_managed_key key, next, *prev = NULL;
	struct umt_managed_alloc a;
	size_t i;

	if (fd < 0)
		return;
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &a) || !a.pages)
			continue;
		for (i = 0; i < n; i++) {
			if (rows[i].p.pid != key.tgid)
				continue;
			rows[i].managed += a.pages * t->summary.page_size;
			break;
		}
	}
}

/* Processes whose allocator reported but that made no GPU call top saw. */
static size_t add_torch_only(struct top *t, struct top_row *rows, size_t k)
{
	const struct torch_dev *d;
	size_t i, j;

	for (i = 0; i < t->torch.n; i++) {
		d = torch_model__dev(&t->torch, i);
		for (j = 0; j < k && rows[j].p.pid != d->pid; j++)
			;
		if (j < k || d->exited)
			continue;
		rows[k].p.pid = d->pid;
		memcpy(rows[k].p.comm, d->last.comm, sizeof(rows[k].p.comm));
		outside_of(t, &rows[k]);
		k++;
	}
	return k;
}

static struct top_row *collect_rows(struct top *t, size_t *n)
{
	struct summary_proc *procs;
	struct top_row *rows;
	size_t i, np, k = 0;
	uint64_t ms = clock__mono_ms();

	procs = summary__procs(&t->summary, &np);
	if (!procs)
		return NULL;
	rows = calloc(np + t->torch.n + 1, sizeof(*rows));
	for (i = 0; rows && i < np; i++) {
		/* -p's children are in scope too: the kernel side chose already. */
		if (procs[i].exited)
			continue;
		rows[k].p = procs[i];
		rows[k].holds = summary__proc_holds(&t->summary, &procs[i]);
		outside_of(t, &rows[k]);
		k++;
	}
	free(procs);
	if (rows)
		k = add_torch_only(t, rows, k);
	add_managed(t, rows, k);
	for (i = 0; rows && i < k; i++) {
		struct growth *g = pid_table__get(&t->growth, rows[i].p.pid);

		/* Managed memory holds what it was seen to take (platform.c). */
		rows[i].holds += rows[i].managed;
		rows[i].p.held_host += rows[i].managed;
		if (g)
			rows[i].growth_known = sample_growth(g, ms, rows[i].holds,
							     &rows[i].growth_per_h);
		rows[i].torch = torch_model__judge_pid(&t->torch, rows[i].p.pid, &rows[i].tv);
	}
	*n = k;
	return rows;
}

/* "fragmentation 12m": the longest a VERDICT cell gets. */
#define VERDICT_COLS 17

/*
 * The verdict that matters: its root cause and how long ago it began
 * ("12s", "5m", "3h", "2d"), else the window's (warm-up, ok).
 */
static const char *verdict_cell(const struct torch_verdict *v, uint64_t now_ns, char *buf,
				size_t len)
{
	unsigned long long s;
	const char *kind;

	if (!v->has_cause)
		return torch_out__verdict(v);
	kind = torch_kind__name(v->cause.kind);
	s = now_ns > v->cause.start_ns ? (now_ns - v->cause.start_ns) / 1000000000ULL : 0;
	if (s < 60)
		snprintf(buf, len, "%s %llus", kind, s);
	else if (s < 3600)
		snprintf(buf, len, "%s %llum", kind, s / 60);
	else if (s < 86400)
		snprintf(buf, len, "%s %lluh", kind, s / 3600);
	else
		snprintf(buf, len, "%s %llud", kind, s / 86400 > 99 ? 99 : s / 86400);
	return buf;
}

/*
 * The allocator's columns, blank for a process without the hook; with the
 * old 3-argument hook reserved is unknown ("?").
 */
static void torch_cols(const struct top_row *r, uint64_t now_ns, bool last, FILE *f)
{
	char b[3][16], cell[32];

	if (!r->torch) {
		if (!last)
			fprintf(f, " %9s %9s %9s %-*s", "", "", "", VERDICT_COLS, "");
		return;
	}
	fprintf(f, " %9s %9s %9s %-*s", fmt_bytes(r->tv.allocated, b[0], sizeof(b[0])),
		r->tv.reserved_known ? fmt_bytes(r->tv.reserved, b[1], sizeof(b[1])) : "?",
		r->tv.reserved_known ? fmt_bytes(r->tv.cached, b[2], sizeof(b[2])) : "?",
		last ? 0 : VERDICT_COLS, verdict_cell(&r->tv, now_ns, cell, sizeof(cell)));
}

/* Pages the driver's bottom halves and other kernel threads took. */
/* The driver's page pool: host memory no process holds. */
static void pool_row(struct top *t, FILE *f)
{
	uint64_t shrunk;

	if (probes__driver_shrunk(&t->session.probes, &shrunk))
		driver_pool__shrunk(&t->summary.pool, shrunk * t->summary.page_size);
	export_pool_text(&t->summary, f);
}

static void kthread_rows(struct top *t, FILE *f)
{
	struct kthread_row *rows;
	size_t n;
	int err;

	rows = kthreads__read(&t->session.probes, t->summary.page_size, &n, &err);
	export_kthreads_text(rows, n, MAX_KTHREAD_ROWS, f);
	free(rows);
}

/* The running guard, if any: a header line, and its mark for each row. */
static void guard_header(struct top *t, FILE *f)
{
	char b[3][16];
	size_t i, held = 0;

	t->guard_alive = false;
	if (!t->guard)
		t->guard = calloc(1, sizeof(*t->guard));
	if (!t->guard || guard_state__read(t->state_file, t->guard) ||
	    !guard_state__daemon_alive(t->guard->pid))
		return;
	t->guard_alive = true;
	for (i = 0; i < t->guard->n_stopped; i++)
		held += guard_state__still_held(&t->guard->stopped[i]);
	fprintf(f, "guard %u: floor %s, headroom %s, %zu held (G: T stopped, F frozen)\n",
		t->guard->pid, fmt_bytes(t->guard->floor, b[0], sizeof(b[0])),
		fmt_signed(t->guard->headroom, true, b[1], sizeof(b[1])), held);
	if (t->guard->slide_horizon)
		fprintf(f, "guard %u: the floor in about %s, falling %s/h over the last %s\n",
			t->guard->pid, fmt_seconds(t->guard->seconds_to_floor, b[0], sizeof(b[0])),
			fmt_bytes(t->guard->slide_per_hour, b[1], sizeof(b[1])),
			fmt_seconds(t->guard->slide_horizon, b[2], sizeof(b[2])));
}

static char guard_mark(const struct top *t, uint32_t pid)
{
	const struct guard_stopped *s;
	size_t i;

	for (i = 0; t->guard_alive && i < t->guard->n_stopped; i++) {
		s = &t->guard->stopped[i];
		if (s->pid != pid || !guard_state__still_held(s))
			continue;
		return strcmp(s->action, "freeze") ? 'T' : 'F';
	}
	return '-';
}

#define COMM_COLS 12

/*
 * The name in the COMM column: escaped first, then cut at a whole escape
 * or character, then padded by characters, not bytes, so that the columns
 * after it stay in place.
 */
static void put_comm(FILE *f, const char *comm)
{
	char e[COMM_COLS + 1];
	const unsigned char *s;
	int cols = 0;

	esc__term(comm, e, sizeof(e));
	/* The terminal form is valid UTF-8: utf8__len() is never 0 here. */
	for (s = (const unsigned char *)e; *s; s += utf8__len(s))
		cols++;
	fprintf(f, "%s%*s", e, COMM_COLS - cols, "");
}

/*
 * Each shown process whose host hold grew over the last minute: when, at
 * that pace and alone, MemAvailable reaches the floor (--floor, or the
 * running guard's). Nothing for a process that does not grow.
 */
static void floor_rows(const struct top *t, const struct top_row *rows, size_t n, FILE *f)
{
	uint64_t floor = t->floor ? t->floor : t->guard_alive ? t->guard->floor : 0;
	char a[16], b[16], c[16];
	double left;
	size_t i;
	bool said = false;

	/* The header's host figure: device nodes are not headroom. */
	if (!floor || !t->available)
		return;
	left = (double)t->available - (double)floor;
	for (i = 0; i < n && i < MAX_ROWS; i++) {
		if (!rows[i].growth_known || rows[i].growth_per_h <= 0)
			continue;
		if (!said)
			fprintf(f, "\nfloor %s (%s): MemAvailable %s\n", fmt_bytes(floor, a, sizeof(a)),
				t->floor ? "--floor" : "the guard's",
				fmt_bytes(t->available, b, sizeof(b)));
		said = true;
		fprintf(f, "%-7u ", rows[i].p.pid);
		put_comm(f, rows[i].p.comm);
		fprintf(f, " the floor in about %s at +%s/h\n",
			fmt_seconds(left > 0 ? (uint64_t)(left / rows[i].growth_per_h * 3600) : 0,
				    a, sizeof(a)),
			fmt_bytes((uint64_t)rows[i].growth_per_h, c, sizeof(c)));
	}
}

static void render(struct top *t, FILE *f)
{
	char b[5][16];
	struct top_row *rows;
	size_t i, n = 0;
	bool torch = false;
	uint64_t now_ns = clock__mono_ns();

	if (!t->batch)
		fputs("\033[H\033[2J", f);
	print_header(t, f);
	guard_header(t, f);
	rows = collect_rows(t, &n);
	if (!rows)
		return;
	row_cmp_sort = t->sort;
	qsort(rows, n, sizeof(*rows), row_cmp);
	for (i = 0; i < n && !torch; i++)
		torch = rows[i].torch;
	fprintf(f, "\n%-7s %-*s %9s %9s %9s %9s %9s %6s", "PID", COMM_COLS, "COMM",
		"GPU HELD", "HOST HOLD", "OBSERVED", "OUTSIDE", "GROWTH/h", "ALLOCS");
	/* Past 80 columns: only while a process reports through the hook. */
	if (torch)
		fprintf(f, " %9s %9s %9s %-*s", "ALLOCATED", "RESERVED", "CACHED",
			t->guard_alive ? VERDICT_COLS : 0, "VERDICT");
	fprintf(f, "%s\n", t->guard_alive ? " G" : "");
	for (i = 0; i < n && i < MAX_ROWS; i++) {
		fprintf(f, "%-7u ", rows[i].p.pid);
		put_comm(f, rows[i].p.comm);
		fprintf(f, " %9s %9s %9s %9s %9s %6llu",
			fmt_bytes(rows[i].p.held_gpu, b[0], sizeof(b[0])),
			fmt_bytes(rows[i].holds, b[1], sizeof(b[1])),
			fmt_bytes(rows[i].p.held_host, b[3], sizeof(b[3])),
			fmt_signed(rows[i].outside, rows[i].outside_known, b[4], sizeof(b[4])),
			fmt_rate(rows[i].growth_per_h, rows[i].growth_known, b[2], sizeof(b[2])),
			(unsigned long long)rows[i].p.held_count);
		if (torch)
			torch_cols(&rows[i], now_ns, !t->guard_alive, f);
		if (t->guard_alive)
			fprintf(f, " %c", guard_mark(t, rows[i].p.pid));
		fputc('\n', f);
	}
	floor_rows(t, rows, n, f);
	kthread_rows(t, f);
	pool_row(t, f);
	export_torch_unseen(&t->session, f);
	if (t->batch)
		fputc('\n', f);
	fflush(f);
	free(rows);
}

static void on_call(void *ctx, const struct umt_call_rec *r)
{
	struct top *t = ctx;

	summary__consume(&t->summary, r);
	torch_model__call(&t->torch, r, 0);	/* top keeps no stacks */
}

static void on_exit_rec(void *ctx, const struct umt_proc_exit_rec *r)
{
	struct top *t = ctx;

	summary__proc_exit(&t->summary, r);
	torch_model__exit(&t->torch, r->pid);
}

static void on_torch(void *ctx, const struct torch_sample *s)
{
	struct top *t = ctx;

	if (torch_model__add(&t->torch, s))
		wlog("out of memory: PyTorch allocator samples are lost");
}

static bool quit_pressed(struct top *t)
{
	struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
	char c;

	if (!t->tty_raw)
		return false;
	while (poll(&pfd, 1, 0) > 0 && read(STDIN_FILENO, &c, 1) == 1)
		if (c == 'q' || c == 'Q')
			return true;
	return false;
}

static void on_tick(void *ctx)
{
	struct top *t = ctx;

	if (quit_pressed(t)) {
		session__stop();
		return;
	}
	render(t, stdout);
	t->ticks++;
	if (t->once)
		session__stop();
}

static const struct session_ops top_ops = {
	.on_call = on_call,
	.on_exit = on_exit_rec,
	.on_tick = on_tick,
	.on_torch = on_torch,
};

/* Keys without Enter, no echo; restored on every way out. */
static void tty_raw(struct top *t)
{
	struct termios raw;

	if (t->batch || !isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &t->saved_tty))
		return;
	raw = t->saved_tty;
	raw.c_lflag &= ~(ICANON | ECHO);
	raw.c_cc[VMIN] = 0;
	raw.c_cc[VTIME] = 0;
	if (!tcsetattr(STDIN_FILENO, TCSANOW, &raw))
		t->tty_raw = true;
}

static void tty_restore(struct top *t)
{
	if (t->tty_raw)
		tcsetattr(STDIN_FILENO, TCSANOW, &t->saved_tty);
	t->tty_raw = false;
}

int cmd_top(int argc, char **argv)
{
	struct top t;
	int err, code;

	memset(&t, 0, sizeof(t));
	pid_table__init(&t.growth, sizeof(struct growth));
	err = parse_args(&t, argc, argv);
	if (err)
		return cli__exit(&t.ao, err);
	summary__init(&t.summary, page__size());
	t.summary.forget_exited = true;	/* runs for days: jobs come and go */
	torch_model__init(&t.torch, NULL);
	t.torch.forget_exited = true;
	platform__init(&t.summary.platform, t.ao.platform);
	session__init(&t.session, &t.ao, NULL, &top_ops, &t);
	t.session.batch_wakeups = true;
	t.session.count_outside = true;
	t.session.count_kthreads = true;
	t.session.driver_pool = true;
	t.session.torch = true;
	t.session.tick_ms = t.interval_ms;
	err = session__start(&t.session);
	if (!err)
		err = resolve_floor(&t, &t.session.nodes);
	if (!err) {
		tty_raw(&t);
		err = session__run(&t.session);
		tty_restore(&t);
		if (!err && !t.ticks)
			render(&t, stdout);	/* stopped before the first refresh */
	}
	code = session__exit_code(&t.session, err);
	session__close(&t.session);
	summary__free(&t.summary);
	torch_model__free(&t.torch);
	pid_table__free(&t.growth);
	free(t.guard);
	attach_opts__free(&t.ao);
	return code;
}
