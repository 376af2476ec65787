// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * umtrace flamegraph: a recording's GPU allocation call stacks, weighted
 * by host bytes, GPU bytes or calls, in one of the flamegraph formats
 * (user/export/export.h). The recording is replayed into the same tables as
 * `umtrace report FILE` (user/rec/replay.h), so both tell one story.
 *
 * Calls are summed per (process, call site) while replaying, and only
 * those sums become stacks: a million calls from a few sites cost a few
 * stackset insertions, not a million.
 */
#include <errno.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include "attach/opts.h"
#include "cmd/cli.h"
#include "cmd/commands.h"
#include "model/cuda_api.h"
#include "export/export.h"
#include "export/flame_build.h"
#include "lib/log.h"
#include "lib/out_file.h"
#include "lib/sys.h"
#include "rec/replay.h"
#include "stacks/stackset.h"

enum fg_format {
	FG_FOLDED,
	FG_SVG,
	FG_PPROF,
	FG_SPEEDSCOPE,
};

enum fg_view {
	FG_TOTAL,	/* every successful allocation call of the recording */
	FG_HELD,	/* the allocations still outstanding at its end */
};

enum {
	OPT_VIEW = OPT_CLI__LAST,
};

/* What one process's calls from one call site add up to. */
struct site_sum {
	uint32_t pid;
	uint32_t site;
	uint64_t values[STACK_VAL__COUNT];
};

struct flamegraph {
	struct attach_opts ao;
	const char *file;
	const char *out_path;
	bool force;
	bool format_given;
	enum fg_format format;
	enum stack_metric metric;
	enum fg_view view;
	struct replay_view rv;
	void *sums;		/* tsearch(3) tree of struct site_sum */
	struct site_sum *last;	/* consecutive calls often share a site */
	uint64_t lost;		/* calls or allocations not summed: no memory, no site */
	struct stackset *set;
};

/* A format's name, or the end of a file name that asks for it. */
struct fg_name {
	const char *s;
	enum fg_format format;
};

static const struct fg_name formats[] = {
	{ "folded", FG_FOLDED },
	{ "svg", FG_SVG },
	{ "pprof", FG_PPROF },
	{ "speedscope", FG_SPEEDSCOPE },
};

/* Longest suffix first: ".speedscope.json" before ".json". */
static const struct fg_name suffixes[] = {
	{ ".speedscope.json", FG_SPEEDSCOPE },
	{ ".json", FG_SPEEDSCOPE },
	{ ".pb.gz", FG_PPROF },
	{ ".pprof", FG_PPROF },
	{ ".svg", FG_SVG },
	{ ".folded", FG_FOLDED },
	{ ".txt", FG_FOLDED },
};

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

void flamegraph_usage(FILE *f)
{
	fprintf(f,
"usage: umtrace flamegraph [OPTIONS] FILE -o OUT\n"
"\n"
"Draw the GPU allocation call stacks of a recording made by 'umtrace\n"
"record' as a flamegraph. The root of every stack is the process\n"
"(\"comm (pid)\"), its leaf the GPU entry point (cuMemAlloc_v2, ...); each\n"
"frame is as wide as the memory or calls under it.\n"
"\n"
"The total view sums every allocation call that succeeded (frees and\n"
"failed calls are not samples); the held view shows the allocations\n"
"still outstanding when the recording ends (freed ones, and those of\n"
"processes that exited, are gone): what a crash left behind. A damaged\n"
"recording is read up to its last good chunk, with a warning (exit 0).\n"
"\n"
"Options:\n"
"  -o, --output OUT         the file to create ('-': standard output)\n"
"      --force              replace OUT if it exists (atomically)\n"
"  -f, --format FORMAT      folded, svg, pprof or speedscope; default from\n"
"                           OUT's name: .folded .txt, .svg, .pb.gz .pprof,\n"
"                           .json .speedscope.json; else folded\n"
"  -m, --metric METRIC      host: host bytes taken inside the calls (default);\n"
"                           gpu: GPU bytes requested (address reservations\n"
"                           and mappings are not memory: 0); calls: count\n"
"                           (pprof carries all three; this one is its default)\n"
"      --view VIEW          total (default) or held\n"
"  -p, --pid PID[,PID...]   only these processes\n"
"  -h, --help               show this help\n");
}

static int parse_format(const char *s, enum fg_format *out)
{
	size_t i;

	for (i = 0; i < ARRAY_LEN(formats); i++) {
		if (!strcmp(s, formats[i].s)) {
			*out = formats[i].format;
			return 0;
		}
	}
	return -EINVAL;
}

static enum fg_format format_of_name(const char *path)
{
	size_t len = strlen(path), n, i;

	for (i = 0; i < ARRAY_LEN(suffixes); i++) {
		n = strlen(suffixes[i].s);
		if (len > n && !strcmp(path + len - n, suffixes[i].s))
			return suffixes[i].format;
	}
	return FG_FOLDED;
}

static int parse_view(const char *arg, enum fg_view *view)
{
	if (!strcmp(arg, "total")) {
		*view = FG_TOTAL;
	} else if (!strcmp(arg, "held")) {
		*view = FG_HELD;
	} else {
		elog("invalid --view '%s': expected total or held", arg);
		return -EINVAL;
	}
	return 0;
}

static int option(void *ctx, int opt, const char *arg)
{
	struct flamegraph *fg = ctx;

	switch (opt) {
	case 'f':
		if (parse_format(arg, &fg->format)) {
			elog("invalid --format '%s': expected folded, svg, pprof or speedscope", arg);
			return -EINVAL;
		}
		fg->format_given = true;
		return 0;
	case 'm':
		if (stack_metric__parse(arg, &fg->metric)) {
			elog("invalid --metric '%s': expected host, gpu or calls", arg);
			return -EINVAL;
		}
		return 0;
	case OPT_VIEW:
		return parse_view(arg, &fg->view);
	case 'p':
		return attach_opts__parse(&fg->ao, opt, arg) < 0 ? -EINVAL : 0;
	}
	return 0;
}

static int parse_args(struct flamegraph *fg, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "metric", required_argument, NULL, 'm' },
		{ "view", required_argument, NULL, OPT_VIEW },
		{ "pid", required_argument, NULL, 'p' },
		{}
	};
	const struct cli c = {
		.name = "flamegraph", .shortopts = "f:m:p:", .longopts = opts,
		.output = &fg->out_path, .force = &fg->force, .usage = flamegraph_usage,
		.option = option, .ctx = fg,
	};
	int err;

	err = cli__parse(&c, argc, argv);
	if (!err)
		err = cli__one_recording("flamegraph", argc, argv, &fg->file, fg->out_path, "OUT");
	if (err)
		return err;
	if (!fg->format_given)
		fg->format = strcmp(fg->out_path, "-") ? format_of_name(fg->out_path) : FG_FOLDED;
	return 0;
}

/* ---- sums per (process, call site) ---- */

static int sum_cmp(const void *a, const void *b)
{
	const struct site_sum *x = a, *y = b;

	return cmp__u64(x->pid, y->pid) ?: cmp__u64(x->site, y->site);
}

static struct site_sum *sum_get(struct flamegraph *fg, uint32_t pid, uint32_t site)
{
	struct site_sum key = { .pid = pid, .site = site }, *n, **slot;

	if (fg->last && fg->last->pid == pid && fg->last->site == site)
		return fg->last;
	slot = tfind(&key, &fg->sums, sum_cmp);
	if (slot)
		return fg->last = *slot;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	*n = key;
	slot = tsearch(n, &fg->sums, sum_cmp);
	if (!slot) {
		free(n);
		return NULL;
	}
	return fg->last = n;
}

/*
 * GPU bytes: an address reservation is no memory, and a mapping is a
 * second view of memory a cuMemCreate already counted.
 */
static uint64_t gpu_bytes(uint32_t api, uint64_t size)
{
	const struct cuda_api *a = cuda_api__get(api);

	if (!a || a->class == UMT_CLASS_VA || a->class == UMT_CLASS_VMM_MAP)
		return 0;
	return size;
}

static void sum_add(struct flamegraph *fg, uint32_t pid, uint32_t site, uint32_t api,
		    uint64_t size, uint64_t host_bytes)
{
	struct site_sum *s = site ? sum_get(fg, pid, site) : NULL;

	if (!s) {
		fg->lost++;
		return;
	}
	s->values[STACK_VAL__CALLS]++;
	s->values[STACK_VAL__HOST_BYTES] += host_bytes;
	s->values[STACK_VAL__GPU_BYTES] += gpu_bytes(api, size);
}

/* The total view: allocation calls that succeeded, as the summary counts success. */
static void total_call(void *ctx, struct replay_view *v, const struct umt_call_rec *r,
		       uint32_t site)
{
	struct flamegraph *fg = ctx;

	if (r->is_free || r->ret)
		return;
	if (r->end != UMT_END_RETURNED && r->end != UMT_END_LOST_RETURN)
		return;
	sum_add(fg, r->pid, site, r->api, r->size, r->pages_taken * v->page_size);
}

static void held_alloc(const struct alloc_entry *e, void *ctx)
{
	sum_add(ctx, e->key.pid, e->site, e->api, e->size, e->host_bytes);
}

struct emit_ctx {
	struct flamegraph *fg;
	int err;
};

static void emit_sum(const void *node, VISIT which, void *arg)
{
	const struct site_sum *s = *(const struct site_sum *const *)node;
	struct emit_ctx *ec = arg;
	struct flamegraph *fg = ec->fg;
	const struct summary_proc *p;
	const struct callsite *c;
	int err;

	if ((which != postorder && which != leaf) || ec->err)
		return;
	c = callsites__get(&fg->rv.sites, s->site);
	if (!c) {
		fg->lost += s->values[STACK_VAL__CALLS];
		return;
	}
	/* One root per process: named as it was last seen, as report names it. */
	p = summary__proc(&fg->rv.summary, s->pid);
	err = flame__add_site(fg->set, s->pid, p && p->comm[0] ? p->comm : c->comm, c,
			      s->values);
	if (err == -ENOMEM)
		ec->err = err;
	else if (err && err != -ENOSPC)	/* -ENOSPC: counted in stackset__refused() */
		fg->lost += s->values[STACK_VAL__CALLS];
}

static int build_stacks(struct flamegraph *fg)
{
	struct emit_ctx ec = { .fg = fg };

	if (fg->view == FG_HELD)
		alloc_table__for_each(&fg->rv.summary.table, held_alloc, fg);
	fg->set = stackset__new(0);
	if (!fg->set)
		return -errno;
	twalk_r(fg->sums, emit_sum, &ec);
	return ec.err;
}

static int write_format(struct flamegraph *fg, FILE *out)
{
	struct svg_opts so = { 0 };
	char title[128];

	switch (fg->format) {
	case FG_SVG:
		if (fg->view == FG_HELD) {
			snprintf(title, sizeof(title), "GPU allocations still held at the end "
				 "of the recording, by %s", stack_metric__label(fg->metric));
			so.title = title;
		}
		return export_svg(fg->set, fg->metric, &so, out);
	case FG_PPROF:
		return export_pprof(fg->set, fg->metric, out);
	case FG_SPEEDSCOPE:
		return export_speedscope(fg->set, fg->metric, out);
	case FG_FOLDED:
	default:
		return export_folded(fg->set, fg->metric, out);
	}
}

static void warn_left_out(const struct flamegraph *fg)
{
	uint64_t refused = stackset__refused(fg->set);

	if (refused)
		wlog("%s: %llu call sites left out: more than %d unique stacks", fg->file,
		     (unsigned long long)refused, STACKSET_MAX_STACKS);
	if (fg->lost)
		wlog("%s: %llu calls left out: no call site for them (out of memory)",
		     fg->file, (unsigned long long)fg->lost);
	if (!stackset__total(fg->set, fg->metric))
		wlog("%s: nothing to draw: no %s in %s%s", fg->file,
		     stack_metric__label(fg->metric),
		     fg->view == FG_HELD ? "allocations still held at the end" :
		     "successful allocation calls",
		     fg->rv.summary.records ? "" : " (the recording holds no GPU calls)");
}

static const struct replay_hooks total_hooks = {
	.on_call = total_call,
};

static int run(struct flamegraph *fg)
{
	const struct replay_opts o = cli__replay_opts(&fg->ao, false,
		fg->view == FG_TOTAL ? &total_hooks : NULL, fg);
	struct out_file out;
	int err;

	/* Before the replay, which can take a while: a bad -o fails at once. */
	if (cli__out_open(&out, fg->out_path, fg->force))
		return 1;
	if (replay_view__load(&fg->rv, fg->file, &o))
		goto err_discard;
	err = build_stacks(fg);
	if (err) {
		elog("cannot build the flamegraph: %s", strerror(-err));
		goto err_discard;
	}
	if (cli__out_commit(&out, write_format(fg, out.f)))
		return 1;
	warn_left_out(fg);
	return 0;

err_discard:
	out_file__discard(&out);
	return 1;
}

int cmd_flamegraph(int argc, char **argv)
{
	struct flamegraph fg;
	int err, code;

	memset(&fg, 0, sizeof(fg));
	attach_opts__init(&fg.ao);
	fg.metric = STACK_VAL__HOST_BYTES;
	fg.view = FG_TOTAL;
	err = parse_args(&fg, argc, argv);
	if (err)
		return cli__exit(&fg.ao, err);
	replay_view__init(&fg.rv, page__size());
	code = run(&fg);
	stackset__free(fg.set);
	tdestroy(fg.sums, free);
	replay_view__free(&fg.rv);
	attach_opts__free(&fg.ao);
	return code;
}
