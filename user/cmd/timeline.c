// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * umtrace timeline: a recording drawn over time (export_timeline(),
 * user/export/export.h). The recording is replayed into the same tables as
 * `umtrace report FILE` (user/rec/replay.h); at each host memory sample the
 * tables hold exactly what the calls before it left, so what each process
 * holds is read from them there.
 *
 * Bursts: the host memory one process's allocation calls took between two
 * samples, drawn when it reaches --burst-min (64 MiB): one such call alone
 * is a burst, and so is a storm of small ones; steady trickles are not.
 * Reclaim: the direct reclaim stalls (/proc/vmstat allocstall) between two
 * samples, where the host made an allocating task free memory itself.
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
#include "lib/log.h"
#include "model/platform.h"
#include "lib/out_file.h"
#include "lib/sys.h"
#include "rec/replay.h"
#include "export/timeline.h"
#include "lib/units.h"

#define DEFAULT_BURST_MIN (64ULL << 20)

enum {
	OPT_BURST_MIN = OPT_CLI__LAST,
};

/* One process's allocations since the last sample. */
struct burst_acc {
	uint32_t pid;
	uint64_t first_ns;	/* of its first call since the last sample */
	uint64_t bytes;
};

struct tl_cmd {
	struct attach_opts ao;
	bool platform_given;
	const char *file;
	const char *out_path;
	bool force;
	uint64_t burst_min;
	struct replay_view rv;
	struct timeline t;
	void *accs;		/* tsearch(3) tree of struct burst_acc */
	struct burst_acc *last;	/* consecutive calls are often one process's */
	struct timeline_burst *flush;	/* the bursts of one interval, to sort */
	size_t n_flush, cap_flush;
	bool have_prev;
	struct rec_sample prev;
	uint64_t bad_samples;	/* out of time order: left out */
	int err;		/* the first error of a builder (-ENOMEM) */
};

void timeline_usage(FILE *f)
{
	fprintf(f,
"usage: umtrace timeline [OPTIONS] FILE -o OUT.svg\n"
"\n"
"Draw a recording made by 'umtrace record' over time, as an SVG: the\n"
"host's available, free and total memory at each sample; under them,\n"
"stacked per process, the host memory its GPU allocations held at that\n"
"moment (by the platform's cost model, as report's \"holds\"); a lane of\n"
"GPU allocation bursts (the host memory one process's allocations took\n"
"between two samples, when at least --burst-min); a lane of direct\n"
"reclaim (allocstall between samples); and a line at each guard stop.\n"
"A damaged recording is read up to its last good chunk, with a warning.\n"
"\n"
"Options:\n"
"  -o, --output OUT         the SVG file to create ('-': standard output)\n"
"      --force              replace OUT if it exists (atomically)\n"
"      --burst-min SIZE     the smallest burst drawn (default 64M)\n"
"  -p, --pid PID[,PID...]   only these processes' calls and stops (memory\n"
"                           samples are the host's)\n"
"      --platform MODEL     the host cost model: unified, discrete or auto\n"
"                           (default: the recording host's)\n"
"  -h, --help               show this help\n");
}

static int option(void *ctx, int opt, const char *arg)
{
	struct tl_cmd *c = ctx;

	switch (opt) {
	case OPT_BURST_MIN:
		if (parse_size(arg, &c->burst_min) || !c->burst_min) {
			elog("invalid --burst-min '%s': expected a size, e.g. 64M", arg);
			return -EINVAL;
		}
		return 0;
	case 'p':
	case OPT_PLATFORM:
		if (attach_opts__parse(&c->ao, opt, arg) < 0)
			return -EINVAL;
		c->platform_given |= opt == OPT_PLATFORM;
		return 0;
	}
	return 0;
}

static int parse_args(struct tl_cmd *c, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "burst-min", required_argument, NULL, OPT_BURST_MIN },
		{ "pid", required_argument, NULL, 'p' },
		{ "platform", required_argument, NULL, OPT_PLATFORM },
		{}
	};
	const struct cli cl = {
		.name = "timeline", .shortopts = "p:", .longopts = opts,
		.output = &c->out_path, .force = &c->force, .usage = timeline_usage,
		.option = option, .ctx = c,
	};
	int err;

	err = cli__parse(&cl, argc, argv);
	if (err)
		return err;
	return cli__one_recording("timeline", argc, argv, &c->file, c->out_path, "OUT.svg");
}

/* A builder's error: -ENOSPC is counted by the timeline itself; keep the first other. */
static void note(struct tl_cmd *c, int err)
{
	if (err && err != -ENOSPC && !c->err)
		c->err = err;
}

/* ---- bursts ---- */

static int acc_cmp(const void *a, const void *b)
{
	const struct burst_acc *x = a, *y = b;

	return cmp__u64(x->pid, y->pid);
}

static struct burst_acc *acc_get(struct tl_cmd *c, uint32_t pid)
{
	struct burst_acc key = { .pid = pid }, *n, **slot;

	if (c->last && c->last->pid == pid)
		return c->last;
	slot = tfind(&key, &c->accs, acc_cmp);
	if (slot)
		return c->last = *slot;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->pid = pid;
	slot = tsearch(n, &c->accs, acc_cmp);
	if (!slot) {
		free(n);
		return NULL;
	}
	return c->last = n;
}

static void on_call(void *ctx, struct replay_view *v, const struct umt_call_rec *r,
		    uint32_t site)
{
	const struct cuda_api *api = cuda_api__get(r->api);
	struct tl_cmd *c = ctx;
	struct burst_acc *a;
	uint64_t bytes;

	(void)site;
	if (!api || api->is_free || r->ret)
		return;
	if (r->end != UMT_END_RETURNED && r->end != UMT_END_LOST_RETURN)
		return;
	/* What the call costs the host, as the plot above the lane counts it. */
	bytes = platform__holds(&v->summary.platform, api->class, r->size,
				r->pages_taken * v->page_size);
	if (!bytes)
		return;
	a = acc_get(c, r->pid);
	if (!a) {
		note(c, -ENOMEM);
		return;
	}
	if (!a->bytes)
		a->first_ns = r->ts_ns;
	a->bytes += bytes;
}

static void collect_burst(const void *node, VISIT which, void *arg)
{
	struct burst_acc *a = *(struct burst_acc *const *)node;
	struct tl_cmd *c = arg;
	struct timeline_burst *v;

	if (which != postorder && which != leaf)
		return;
	if (a->bytes >= c->burst_min) {
		if (c->n_flush == c->cap_flush) {
			size_t cap = c->cap_flush ? 2 * c->cap_flush : 16;

			v = realloc(c->flush, cap * sizeof(*v));
			if (!v) {
				note(c, -ENOMEM);
				return;
			}
			c->flush = v;
			c->cap_flush = cap;
		}
		c->flush[c->n_flush++] = (struct timeline_burst){ a->first_ns, a->pid, a->bytes };
	}
	a->bytes = 0;
}

static int by_time(const void *a, const void *b)
{
	const struct timeline_burst *x = a, *y = b;

	if (x->t_ns != y->t_ns)
		return x->t_ns < y->t_ns ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* The interval ends: its bursts go to the timeline in time order. */
static void flush_bursts(struct tl_cmd *c)
{
	size_t i;

	c->n_flush = 0;
	twalk_r(c->accs, collect_burst, c);
	if (!c->n_flush)
		return;	/* qsort may not be given a NULL array, even empty */
	qsort(c->flush, c->n_flush, sizeof(*c->flush), by_time);
	for (i = 0; i < c->n_flush; i++)
		note(c, timeline__add_burst(&c->t, c->flush[i].t_ns, c->flush[i].pid,
					    c->flush[i].bytes));
}

/* ---- samples and stops ---- */

static uint64_t delta(uint64_t now, uint64_t before)
{
	/* Counters only grow; one that went back was reset: no activity known. */
	return now > before ? now - before : 0;
}

static void set_procs(struct tl_cmd *c, const struct summary *s)
{
	struct summary_proc *v;
	uint64_t holds;
	size_t i, n;

	v = summary__procs(s, &n);
	if (!v) {
		note(c, -ENOMEM);
		return;
	}
	/* A process absent at a sample holds 0 there: only holders are set. */
	for (i = 0; i < n; i++) {
		holds = summary__proc_holds(s, &v[i]);
		if (holds)
			note(c, timeline__set_proc_value(&c->t, v[i].pid, v[i].comm, holds));
	}
	free(v);
}

static void on_sample(void *ctx, struct replay_view *v, const struct rec_sample *s)
{
	struct tl_cmd *c = ctx;
	uint64_t stalls, scans;
	int err;

	flush_bursts(c);
	err = timeline__add_sample(&c->t, s->ts_ns, s->mem_total, s->mem_available,
				   s->mem_free);
	if (err == -EINVAL) {
		c->bad_samples++;
		return;
	}
	note(c, err);
	if (err)
		return;
	set_procs(c, &v->summary);
	note(c, timeline__set_pool(&c->t, summary__pool_holds(&v->summary, NULL)));
	if (c->have_prev) {
		stalls = delta(s->allocstall, c->prev.allocstall);
		scans = delta(s->pgscan_direct, c->prev.pgscan_direct);
		/* The counters are read one after the other: scans alone still mark. */
		if (stalls || scans)
			note(c, timeline__add_reclaim(&c->t, s->ts_ns, stalls ? stalls : 1));
	}
	c->prev = *s;
	c->have_prev = true;
}

static void on_stop(void *ctx, struct replay_view *v, const struct rec_stop *s)
{
	struct tl_cmd *c = ctx;

	(void)v;
	note(c, timeline__add_stop(&c->t, s->ts_ns, s->pid, s->comm, s->reason_text,
				   s->mem_available));
}

/* PyTorch's allocator: drawn as it reported, beside the host's samples. */
static void on_torch(void *ctx, struct replay_view *v, const struct torch_sample *s)
{
	struct tl_cmd *c = ctx;

	(void)v;
	note(c, timeline__add_torch(&c->t, s->ts_ns, s->pid, s->device, s->comm, s->reserved,
				    s->flags & TORCH_S_TOTALS, s->alloc_low, s->alloc_high));
}

/* The allocator's episodes, as the replay's model kept them: shaded bands. */
static void torch_bands(struct tl_cmd *c)
{
	const struct torch_episode *e;
	const struct torch_dev *d;
	size_t i, j, n;

	for (i = 0; (d = torch_model__dev(&c->rv.torch, i)); i++) {
		n = torch_dev__episodes(d, &e);
		for (j = 0; j < n && j < TIMELINE_TORCH_BANDS; j++)
			timeline__add_torch_band(&c->t, d->pid, d->device,
						 torch_kind__name(e[j].kind), e[j].start_ns,
						 e[j].end_ns);
	}
}

static const struct replay_hooks hooks = {
	.on_call = on_call,
	.on_sample = on_sample,
	.on_stop = on_stop,
	.on_torch = on_torch,
};

static int run(struct tl_cmd *c)
{
	const struct replay_opts o = cli__replay_opts(&c->ao, c->platform_given, &hooks, c);
	struct out_file out;

	/* Before the replay, which can take a while: a bad -o fails at once. */
	if (cli__out_open(&out, c->out_path, c->force))
		return 1;
	if (replay_view__load(&c->rv, c->file, &o))
		goto err_discard;
	flush_bursts(c);	/* the calls after the last sample */
	torch_bands(c);
	if (c->err) {
		elog("cannot build the timeline: %s", strerror(-c->err));
		goto err_discard;
	}
	if (!c->t.n_samples) {
		elog("%s: no host memory samples in the recording: nothing to draw", c->file);
		goto err_discard;
	}
	if (cli__out_commit(&out, export_timeline(&c->t, out.f)))
		return 1;
	if (c->bad_samples)
		wlog("%s: %llu samples out of time order left out", c->file,
		     (unsigned long long)c->bad_samples);
	if (c->t.refused)
		wlog("%s: %llu timeline entries left out: more than the timeline holds",
		     c->file, (unsigned long long)c->t.refused);
	return 0;

err_discard:
	out_file__discard(&out);
	return 1;
}

int cmd_timeline(int argc, char **argv)
{
	struct tl_cmd c;
	int err, code;

	memset(&c, 0, sizeof(c));
	attach_opts__init(&c.ao);
	c.burst_min = DEFAULT_BURST_MIN;
	err = parse_args(&c, argc, argv);
	if (err)
		return cli__exit(&c.ao, err);
	replay_view__init(&c.rv, page__size());
	timeline__init(&c.t);
	code = run(&c);
	timeline__free(&c.t);
	tdestroy(c.accs, free);
	free(c.flush);
	replay_view__free(&c.rv);
	attach_opts__free(&c.ao);
	return code;
}
