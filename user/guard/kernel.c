// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "lib/sys.h"
#include "guard/kernel.h"
#include "umtrace.skel.h"

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

	before = READ_ONCE(bss->guard_net);
	err = sample(ctx, &bytes);
	if (err)
		return err;
	after = READ_ONCE(bss->guard_net);
	estimate = min64(READ_ONCE(bss->guard_anchor) - before - (after - before) / 2,
			 READ_ONCE(bss->guard_ceiling)) * (int64_t)page__size();
	*error = READ_ONCE(bss->guard_armed) ? estimate - (int64_t)bytes : 0;
	/*
	 * One 64-bit store: the kernel never sees an anchor from one sample
	 * and a net count from another. A ceiling from the other sample
	 * beside it is a figure of a moment ago: the lower one counts.
	 */
	WRITE_ONCE(bss->guard_ceiling, (int64_t)(bytes / page__size()));
	WRITE_ONCE(bss->guard_anchor,
		   (int64_t)(bytes / page__size()) + before + (after - before) / 2);
	/* arm64 may reorder stores: the figures first, then armed. */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	WRITE_ONCE(bss->guard_armed, true);
	return 0;
}

void guard_kernel__set_thresholds(struct probes *p, uint64_t floor, uint64_t low)
{
	WRITE_ONCE(p->skel->bss->guard_floor, (int64_t)(floor / page__size()));
	WRITE_ONCE(p->skel->bss->guard_low, (int64_t)(low / page__size()));
}

void guard_kernel__stats(const struct probes *p, struct guard_kstats *st)
{
	const struct umtrace_bpf__bss *bss = p->skel->bss;
	int64_t ps = (int64_t)page__size();

	st->reserved = READ_ONCE(bss->guard_reserved) * ps;
	st->headroom = (min64(READ_ONCE(bss->guard_anchor) - READ_ONCE(bss->guard_net),
			      READ_ONCE(bss->guard_ceiling)) -
			READ_ONCE(bss->guard_reserved) - READ_ONCE(bss->guard_floor)) * ps;
	st->checks = READ_ONCE(bss->guard_checks);
	st->stops = READ_ONCE(bss->guard_stops);
	st->send_failed = READ_ONCE(bss->guard_send_failed);
	st->reclaims = READ_ONCE(bss->guard_reclaims);
	st->kswapd_wakes = READ_ONCE(bss->guard_kswapd_wakes);
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

