// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "lib/parse.h"
#include "lib/numa.h"
#include "lib/sys.h"
#include "guardd/kernel.h"
#include "guard/pin.h"
#include "umtrace.skel.h"

/* How far the counters' sum may be from MemFree read just after. */
#define ZONES_SLACK_BYTES (32ULL << 20)
#define ZONES_SLACK_DIV 100
/* Tries before the counters are not used: a busy host moves MemFree between reads. */
#define ZONES_TRIES 3

#define READ_ONCE(x) (*(const volatile typeof(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile typeof(x) *)&(x) = (v))

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

int guard_kernel__anchor(struct probes *p, int (*sample)(void *ctx, uint64_t *bytes),
			 void *ctx, int64_t *error)
{
	struct umtrace_bpf__bss *bss = p->skel->bss;
	int64_t before, after, estimate;
	uint64_t bytes;
	int err;

	before = READ_ONCE(bss->guard_state.net);
	err = sample(ctx, &bytes);
	if (err)
		return err;
	after = READ_ONCE(bss->guard_state.net);
	estimate = min64(READ_ONCE(bss->guard_state.anchor) - before - (after - before) / 2,
			 READ_ONCE(bss->guard_state.ceiling)) * (int64_t)page__size();
	*error = READ_ONCE(bss->guard_state.armed) ? estimate - (int64_t)bytes : 0;
	/*
	 * One 64-bit store: the kernel never sees an anchor from one sample
	 * and a net count from another. A ceiling from the other sample
	 * beside it is a figure of a moment ago: the lower one counts.
	 */
	WRITE_ONCE(bss->guard_state.ceiling, (int64_t)(bytes / page__size()));
	WRITE_ONCE(bss->guard_state.anchor,
		   (int64_t)(bytes / page__size()) + before + (after - before) / 2);
	/* arm64 may reorder stores: the figures first, then armed. */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	WRITE_ONCE(bss->guard_state.armed, true);
	return 0;
}

void guard_kernel__set_thresholds(struct probes *p, uint64_t floor, uint64_t low)
{
	WRITE_ONCE(p->skel->bss->guard_state.floor, (int64_t)(floor / page__size()));
	WRITE_ONCE(p->skel->bss->guard_state.low, (int64_t)(low / page__size()));
}

/* v less min(v / 2, low), as the kernel's si_mem_available() does. */
static uint64_t half_above(uint64_t v, uint64_t low)
{
	return v - (v / 2 < low ? v / 2 : low);
}

/*
 * The two reads are a moment apart: a host busy allocating moves MemFree
 * meanwhile. Counters from the wrong zones miss a node or a zone, gigabytes.
 */
static bool close_enough(int64_t a, uint64_t b)
{
	uint64_t d = a > (int64_t)b ? (uint64_t)a - b : b - (uint64_t)a;

	return d <= ZONES_SLACK_BYTES || d <= b / ZONES_SLACK_DIV;
}

uint64_t guard_kernel__meter(const struct meminfo *m, uint64_t low, bool free_only)
{
	if (free_only)
		return m->free;
	return m->free + half_above(m->file, low) + half_above(m->kreclaim, low);
}

/* One search and one read of /proc, compared: 0, -ERANGE, or -errno. */
static int measure_zones(struct bpf_program *prog, struct umtrace_bpf__bss *bss,
			 int (*meter)(void *ctx, uint64_t *bytes), void *ctx,
			 struct guard_zones *z, char *why, size_t len)
{
	LIBBPF_OPTS(bpf_test_run_opts, run);
	int err;

	if (bpf_prog_test_run_opts(bpf_program__fd(prog), &run)) {
		err = -errno;
		errbuf__set(why, len, "cannot run the search: %s", strerror(-err));
		return err;
	}
	z->zones = READ_ONCE(bss->meter.n_zones);
	z->nodes = READ_ONCE(bss->meter.n_nodes);
	z->kernel = READ_ONCE(bss->meter.seen) * (int64_t)page__size();
	err = meter(ctx, &z->proc);
	if (err) {
		errbuf__set(why, len, "cannot read /proc/meminfo or /proc/zoneinfo: %s",
			    strerror(-err));
		return err;
	}
	if (!z->zones) {
		errbuf__set(why, len, "no host zone found from the memory cgroups");
		return -ENOENT;
	}
	if (!close_enough(z->kernel, z->proc)) {
		errbuf__set(why, len, "they do not add up to /proc/meminfo's figures");
		return -ERANGE;
	}
	return 0;
}

int guard_kernel__find_zones(struct probes *p, const uint64_t *device_nodes,
			     int (*meter)(void *ctx, uint64_t *bytes), void *ctx,
			     struct guard_zones *z, char *why, size_t len)
{
	struct umtrace_bpf__bss *bss = p->skel->bss;
	struct bpf_program *prog = p->skel->progs.guard_find_zones;
	unsigned int i, nodes = numa__possible();
	int err;

	memset(z, 0, sizeof(*z));
	WRITE_ONCE(bss->guard_state.exact, false);
	if (!bpf_program__autoload(prog)) {
		errbuf__set(why, len, "not loaded");
		return -ENOENT;
	}
	for (i = UMT_GUARD_MAX_NODES; i < nodes && i < UMT_MAX_NODES; i++) {
		if (!numa__has(device_nodes, i)) {
			errbuf__set(why, len, "host node %u is past the %u nodes searched", i,
				    UMT_GUARD_MAX_NODES);
			return -ERANGE;
		}
	}
	bss->meter.n_possible = nodes < UMT_GUARD_MAX_NODES ? nodes : UMT_GUARD_MAX_NODES;
	bss->meter.device_nodes = device_nodes[0];
	/*
	 * Counters from the wrong zones are off every time; a busy host only
	 * now and then, between the two reads: a few tries tell them apart.
	 */
	for (i = 0; i < ZONES_TRIES; i++) {
		err = measure_zones(prog, bss, meter, ctx, z, why, len);
		if (err != -ERANGE)
			break;
	}
	if (err)
		return err;
	WRITE_ONCE(bss->guard_state.exact, true);
	return 0;
}

void guard_kernel__set_sample(struct probes *p, uint64_t metric, uint64_t meter)
{
	uint64_t m = metric / page__size(), f = meter / page__size();

	/* Past 16 TiB of 4 KiB pages: no figure (0), the anchored one decides. */
	if (m > UINT32_MAX || f > UINT32_MAX)
		m = f = 0;
	WRITE_ONCE(p->skel->bss->guard_state.sample_pages, m << 32 | f);
	/* The daemon lives: a verdict asked of it will come. */
	WRITE_ONCE(p->skel->bss->guard_state.daemon_ns, clock__mono_ns());
}

/*
 * The metric in pages as the kernel side decides by it: where it reads the
 * counters, the last sample (the counters' figure then); else its
 * anchored figure now.
 */
static int64_t kernel_metric(const struct umtrace_bpf__bss *bss)
{
	uint64_t sample = READ_ONCE(bss->guard_state.sample_pages);

	if (READ_ONCE(bss->guard_state.exact) && sample)
		return (int64_t)(sample >> 32);
	return min64(READ_ONCE(bss->guard_state.anchor) - READ_ONCE(bss->guard_state.net),
		     READ_ONCE(bss->guard_state.ceiling));
}

void guard_kernel__stats(const struct probes *p, struct guard_kstats *st)
{
	const struct umtrace_bpf__bss *bss = p->skel->bss;
	int64_t ps = (int64_t)page__size();

	st->reserved = READ_ONCE(bss->guard_state.reserved) * ps;
	st->headroom = (kernel_metric(bss) - READ_ONCE(bss->guard_state.reserved) -
			READ_ONCE(bss->guard_state.floor)) * ps;
	st->checks = READ_ONCE(bss->guard_state.checks);
	st->stops = READ_ONCE(bss->guard_state.stops);
	st->send_failed = READ_ONCE(bss->guard_state.send_failed);
	st->reclaims = READ_ONCE(bss->guard_state.reclaims);
	st->kswapd_wakes = READ_ONCE(bss->guard_state.kswapd_wakes);
}

bool guard_kernel__exact(const struct probes *p)
{
	return READ_ONCE(p->skel->bss->guard_state.exact);
}

void guard_kernel__set_helper(struct probes *p, uint32_t pid)
{
	WRITE_ONCE(p->skel->bss->guard_state.helper, pid);
}

int guard_kernel__look(struct probes *p, int64_t *room)
{
	LIBBPF_OPTS(bpf_test_run_opts, run);
	struct bpf_program *prog = p->skel->progs.guard_look;

	if (bpf_prog_test_run_opts(bpf_program__fd(prog), &run))
		return -errno;
	if (run.retval)
		return -ENODATA;
	*room = READ_ONCE(p->skel->bss->guard_state.look_room) * (int64_t)page__size();
	return 0;
}

/* Those loaded: where the kernel lacks a tracepoint, its program is not. */
static size_t page_progs(const struct probes *p, struct bpf_program **out)
{
	struct umtrace_bpf *skel = p->skel;
	struct bpf_program *all[] = {
		skel->progs.page_alloc, skel->progs.page_free, skel->progs.direct_reclaim,
		skel->progs.kswapd_wake, skel->progs.compaction_begin,
		skel->progs.compaction_end, skel->progs.compaction_isolate,
		skel->progs.compaction_fast_isolate,
	};
	size_t i, n = 0;

	_Static_assert(sizeof(all) / sizeof(all[0]) <= GUARD_PAGE_PROGS, "too many");
	for (i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (bpf_program__autoload(all[i]))
			out[n++] = all[i];
	return n;
}

bool guard_kernel__page_prog(const struct probes *p, const struct bpf_program *prog)
{
	struct bpf_program *progs[GUARD_PAGE_PROGS];
	size_t i, n = page_progs(p, progs);

	for (i = 0; i < n; i++)
		if (progs[i] == prog)
			return true;
	return false;
}

static void pin_name(const struct bpf_program *prog, char *buf, size_t len)
{
	snprintf(buf, len, "pages-%s", bpf_program__name(prog));
}

int guard_kernel__attach_pages(struct probes *p, struct guard_page_links *l,
			       const char *pin_dir)
{
	struct bpf_program *progs[GUARD_PAGE_PROGS];
	size_t i, n = page_progs(p, progs);
	char name[64];
	int err = 0;

	for (i = 0; i < n && !err; i++) {
		l->link[i] = bpf_program__attach(progs[i]);
		if (!l->link[i]) {
			err = -errno;
			break;
		}
		pin_name(progs[i], name, sizeof(name));
		if (pin_dir)
			err = guard_pins__pin_fd(pin_dir, name, bpf_link__fd(l->link[i]));
	}
	if (err)
		guard_kernel__detach_pages(p, l, pin_dir);
	return err;
}

void guard_kernel__detach_pages(struct probes *p, struct guard_page_links *l,
				const char *pin_dir)
{
	struct bpf_program *progs[GUARD_PAGE_PROGS];
	size_t i, n = page_progs(p, progs);
	char name[64];

	for (i = 0; i < n && pin_dir; i++) {
		pin_name(progs[i], name, sizeof(name));
		guard_pins__unpin(pin_dir, name);
	}
	guard_kernel__drop_pages(l);
}

void guard_kernel__drop_pages(struct guard_page_links *l)
{
	size_t i;

	for (i = 0; i < GUARD_PAGE_PROGS; i++) {
		bpf_link__destroy(l->link[i]);
		l->link[i] = NULL;
	}
}

bool guard_kernel__pages_pinned(const struct probes *p, const char *pin_dir)
{
	struct bpf_program *progs[GUARD_PAGE_PROGS];
	size_t i, n = page_progs(p, progs);
	char name[64];

	if (!pin_dir)
		return false;
	for (i = 0; i < n; i++) {
		pin_name(progs[i], name, sizeof(name));
		if (!guard_pins__has(pin_dir, name))
			return false;
	}
	return true;
}

void guard_kernel__forget_stop(struct probes *p, uint32_t pid)
{
	bpf_map_delete_elem(bpf_map__fd(p->skel->maps.guard_sent), &pid);
}

int guard_kernel__scope_pid(struct probes *p, uint32_t pid, bool in)
{
	int fd = bpf_map__fd(p->skel->maps.guard_scope_pids);
	uint8_t one = 1;
	int err;

	if (in)
		err = bpf_map_update_elem(fd, &pid, &one, BPF_ANY);
	else
		err = bpf_map_delete_elem(fd, &pid);
	if (err && !(errno == ENOENT && !in))
		return -errno;
	return 0;
}

int guard_kernel__scope_comm(struct probes *p, const char *comm, bool in)
{
	struct umt_comm_key key = {};
	uint8_t verdict = in ? UMT_COMM_IN : UMT_COMM_OUT;

	strncpy(key.comm, comm, sizeof(key.comm) - 1);
	if (bpf_map_update_elem(bpf_map__fd(p->skel->maps.guard_scope_comms), &key,
				&verdict, BPF_ANY))
		return -errno;
	return 0;
}

int guard_kernel__scope_cgroup(struct probes *p, int cgroup_fd)
{
	uint32_t zero = 0;

	if (bpf_map_update_elem(bpf_map__fd(p->skel->maps.guard_cgroup), &zero,
				&cgroup_fd, BPF_ANY))
		return -errno;
	return 0;
}

