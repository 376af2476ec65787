/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The guard's kernel side: keep a fresh headroom figure and stop the
 * process whose allocation would take the host below the floor, in the
 * allocating task itself, before it gets another page.
 *
 * Headroom. Where the kernel's own free-page counters could be found
 * (meter.bpf.h), every decision reads them: the metric as user space last
 * sampled it, moved by what the counters moved since (guard_exact_room).
 * Only the metric's offset from the counters (the kernel's reserves,
 * which hardly move) comes from the sample, so the figure is current to
 * the kernel's own vmstat lag whatever the CPU count, and a kernel side
 * whose daemon died is as exact as a live one.
 *
 * Where they could not be found, the figure is anchored: user space
 * writes the sample as an anchor, in pages, with the net page count it
 * read at the same moment, and every page allocated or freed since moves
 * a net counter, so
 *
 *	headroom = min(anchor + net_at_anchor - net_now, ceiling)
 *		   - reserved - floor
 *
 * The ceiling is the sample itself: pages freed since mostly sit on the
 * per-CPU free lists, out of MemFree and so out of the metric, until the
 * lists drain. The anchor is the sample less what the lists may still
 * take from MemFree (user space's margin), so this figure reaches the
 * floor early. It is blind to what leaves MemFree with no page handed out
 * (lists refilled, a VM's free page reporting), and to freed pages that
 * stay on another CPU's list, so it is right only a sample after.
 *
 * Either way the decision is made when a CPU has counted its share of the
 * headroom (at most GUARD_BATCH pages, folded into the shared net count):
 * near the floor the share is 0 and every page decides, and far from it
 * a page costs no shared cache line.
 *
 * Admission. At a GPU allocation's entry its host cost (its size, for the
 * APIs user space says cost host memory on this platform) is reserved up
 * front: if that takes the headroom below zero the reservation is undone
 * and the caller is stopped before the call runs. An admitted call's pages
 * are drawn from its reservation as they arrive, so they are not counted
 * twice; what is left is returned when the call ends.
 *
 * Backstop. Any other page taken with no headroom left stops the task
 * that took it, and direct reclaim entered under LOW stops it too. Only a
 * task allocating for itself is stopped: a kernel thread or an interrupt
 * (which runs on an innocent task) never is.
 */
#ifndef UMTRACE_GUARD_BPF_H
#define UMTRACE_GUARD_BPF_H

#include "shared.bpf.h"
#include "meter.bpf.h"

#define GUARD_SIGSTOP		19
/* Pages a CPU may count before folding them into the shared counter. */
#define GUARD_BATCH		64
/* An admitted call's slack: 1/GUARD_SLACK_DIV of its size, + GUARD_BATCH. */
#define GUARD_SLACK_DIV		32
/*
 * One stop a process per this long. A stop already on its way sends none
 * (guard_stop_pending); this covers the rest: a dry run sends nothing, so
 * nothing is pending, and a signal sent with interrupts off is queued a
 * moment later, so each page until then would send another record, each
 * taken by user space for a stop of its own.
 */
#define GUARD_RESEND_NS		(100 * 1000 * 1000ULL)

/*
 * The guard's globals, their fields described in umtrace.h: its settings,
 * set by user space before load, and its figures in the mmap'ed .bss.
 */
extern const volatile struct umt_guard_conf guard_conf;
extern struct umt_guard_state guard_state;

/*
 * The page programs' arming (user/guardd/arm.c): far from the floor
 * they are detached and a helper process (guard_state.helper) looks at
 * the headroom every few milliseconds instead. Its tgid is never
 * stopped, as the daemon's is not.
 *
 * Per CPU (guard_state.cpus): pages counted here and not yet folded into
 * guard_state.net, and how many more this CPU may count before it must
 * look at the shared figures again. The limit is set at each fold to a
 * share of the headroom left, so that all CPUs together cannot spend
 * more than there is; far from the floor a page costs an add and a
 * compare, near it (limit 0) every page folds and checks.
 *
 * A cache line a CPU in .bss, indexed by CPU number, rather than a
 * per-CPU map: that map's lookup reads the map's own struct first, and in
 * a page-fault storm each extra line a page touches is a likely cache
 * miss. A CPU numbered past the array folds every page.
 */
#define GUARD_MAX_CPUS		UMT_GUARD_MAX_CPUS

/*
 * Who is never stopped (user/guardd/protect.c fills these; guard.bpf.c's
 * guard_protected_id decides): names, executables and uids in one map,
 * cgroups in a list (guard_state.protect_cgroups), each a test of the
 * current task's ancestry. A key is there or not: its value is unused.
 */
UMT_MAP_TYPE(guard_protect, BPF_MAP_TYPE_HASH, UMT_GUARD_MAX_PROTECT, struct umt_protect_key,
	     __u8);
extern struct guard_protect_map guard_protect SEC(".maps");

/*
 * The current task is protected by who it is (guard.bpf.c): a global
 * function, verified once rather than in every program that may stop.
 */
extern int guard_protected_id(void);

/* Last stop sent per process (tgid -> ktime). */
UMT_MAP_TYPE(guard_sent, BPF_MAP_TYPE_LRU_HASH, 4096, __u32, __u64);
extern struct guard_sent_map guard_sent SEC(".maps");

/* --scope pid:/comm: (user space keeps the list). */
UMT_MAP_TYPE(guard_scope_pids, BPF_MAP_TYPE_HASH, 8192, __u32, __u8);
extern struct guard_scope_pids_map guard_scope_pids SEC(".maps");

/*
 * --scope comm: a verdict per process name. LRU: a name evicted is only
 * asked about again.
 */
UMT_MAP_TYPE(guard_scope_comms, BPF_MAP_TYPE_LRU_HASH, 4096, struct umt_comm_key, __u8);
extern struct guard_scope_comms_map guard_scope_comms SEC(".maps");

/* --scope cgroup: slot 0 holds the cgroup. */
struct guard_cgroup_map {
	__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
};
extern struct guard_cgroup_map guard_cgroup SEC(".maps");

/* The anchored figure: the sample moved by the pages counted since. */
static __always_inline __s64 guard_headroom(__s64 threshold)
{
	__s64 pages = READ_ONCE(guard_state.anchor) - READ_ONCE(guard_state.net);
	__s64 ceiling = READ_ONCE(guard_state.ceiling);

	if (pages > ceiling)
		pages = ceiling;
	return pages - READ_ONCE(guard_state.reserved) - threshold;
}

/*
 * The headroom above threshold from the kernel's counters: the sample
 * moved by what the counters moved since. They need no sample to stay
 * current, only the metric's offset from them (the reserves), which
 * hardly moves. False: no such figure here.
 */
static __always_inline bool guard_exact_room(__s64 threshold, __s64 *room)
{
	__u64 sample = READ_ONCE(guard_state.sample_pages);
	__s64 now;

	if (!READ_ONCE(guard_state.exact) || !sample || !meter_now(&now))
		return false;
	*room = (__s64)(sample >> 32) + now - (__s64)(sample & 0xffffffff) -
		READ_ONCE(guard_state.reserved) - threshold;
	return true;
}

/* The headroom left: the counters', or the anchored figure without them. */
static __always_inline __s64 guard_room(__s64 threshold)
{
	__s64 exact;

	if (guard_exact_room(threshold, &exact))
		return exact;
	return guard_headroom(threshold);
}

_Static_assert((GUARD_MAX_CPUS & (GUARD_MAX_CPUS - 1)) == 0,
	       "GUARD_MAX_CPUS must be a power of two");

/*
 * The slot of a CPU already tested to be below GUARD_MAX_CPUS. The mask
 * makes the index one every verifier can bound on its own. Without it
 * clang may compute a pointer or NULL from the test and branch on the
 * test again; 6.1's verifier follows the impossible pairing of the two
 * and refuses a NULL slot. barrier_var keeps clang from folding the mask
 * into the test.
 */
static __always_inline struct umt_guard_cpu *guard_slot(__u32 cpu)
{
	barrier_var(cpu);
	return &guard_state.cpus[cpu & (GUARD_MAX_CPUS - 1)];
}

/*
 * Fold d pages into the shared count; the headroom left after, or 1
 * (some) before the first anchor, when there is nothing to compare with:
 * pages counted before it are in the net figure the anchor is taken
 * against, so none is lost.
 */
static __always_inline __s64 guard_fold(__s64 d)
{
	__sync_fetch_and_add(&guard_state.net, d);
	if (!READ_ONCE(guard_state.armed))
		return 1;
	return guard_room(READ_ONCE(guard_state.floor));
}

/* Fold this CPU's pages and set its next limit from what is left. */
static __always_inline __s64 guard_fold_cpu(struct umt_guard_cpu *c, __s64 d)
{
	__s64 room = guard_fold(d), share;

	c->delta = 0;
	/*
	 * Half of an even share, so that other CPUs' older limits stay
	 * covered (unsigned: BPF has no signed division before v4).
	 */
	share = room <= 0 ? 0 : (__s64)((__u64)room / (2 * guard_conf.nr_cpus));
	c->limit = share > GUARD_BATCH ? GUARD_BATCH : share;
	return room;
}

/*
 * Count pages taken; returns the headroom above the floor when it had to
 * be looked at, 1 (some) when this CPU's limit says there is room.
 */
static __always_inline __s64 guard_count(__s64 pages)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct umt_guard_cpu *c;
	__s64 d;

	if (cpu >= GUARD_MAX_CPUS)
		return guard_fold(pages);
	c = guard_slot(cpu);
	d = c->delta + pages;
	if (d < c->limit) {
		c->delta = d;
		return 1;
	}
	return guard_fold_cpu(c, d);
}

/*
 * Never stopped: pid 1, kernel threads, the guard's own processes (by
 * pid, never by name), and whoever guard_protected_id says.
 */
static __always_inline bool guard_protected(struct task_struct *task, __u32 tgid)
{
	if (tgid <= 1 || tgid == guard_conf.self || tgid == READ_ONCE(guard_state.helper) ||
	    (task->flags & UMT_PF_KTHREAD))
		return true;
	return guard_protected_id() != 0;
}

/*
 * Ask user space for a name's verdict, once: the ASKED entry keeps other
 * decisions from asking again; a question the ring buffer had no room
 * for is forgotten, so that the next decision asks it anew.
 */
static __always_inline void guard_ask_scope(__u32 tgid, const struct umt_comm_key *name)
{
	struct umt_scope_ask_rec *r;
	__u8 asked = UMT_COMM_ASKED;

	if (bpf_map_update_elem(&guard_scope_comms, name, &asked, BPF_NOEXIST))
		return;
	r = rec_reserve(sizeof(*r));
	if (!r) {
		bpf_map_delete_elem(&guard_scope_comms, name);
		return;
	}
	r->type = UMT_REC_SCOPE_ASK;
	r->pid = tgid;
	__builtin_memcpy(&r->name, name, sizeof(r->name));
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
}

/* A process that has just taken a name: have its verdict ready early. */
static __always_inline void guard_note_name(__u32 tgid, const char *comm)
{
	struct umt_comm_key name = {};

	if (!guard_conf.on || guard_conf.scope != UMT_SCOPE_COMM)
		return;
	bpf_probe_read_kernel_str(name.comm, sizeof(name.comm), comm);
	if (!bpf_map_lookup_elem(&guard_scope_comms, &name))
		guard_ask_scope(tgid, &name);
}

/* The daemon sampled within this: a verdict asked of it will come. */
#define GUARD_DAEMON_ALIVE_NS	(5 * 1000 * 1000 * 1000ULL)

/*
 * In scope. A name whose verdict has not come yet (asked at exec, or
 * now) counts as in scope while the daemon lives, *pending said: held at
 * its first call if that call would cross, and let go by the daemon if
 * the answer is out. A kernel side whose daemon died stops no name it
 * has no verdict for.
 */
static __always_inline bool guard_in_scope(__u32 tgid, const struct umt_comm_key *name,
					   __u64 now, bool *pending)
{
	__u8 *verdict;

	switch (guard_conf.scope) {
	case UMT_SCOPE_ALL:
		return true;
	case UMT_SCOPE_PIDS:
		return bpf_map_lookup_elem(&guard_scope_pids, &tgid) != NULL;
	case UMT_SCOPE_CGROUP:
		return bpf_current_task_under_cgroup(&guard_cgroup, 0) == 1;
	case UMT_SCOPE_COMM:
		verdict = bpf_map_lookup_elem(&guard_scope_comms, name);
		if (!verdict)
			guard_ask_scope(tgid, name);
		if (verdict && *verdict != UMT_COMM_ASKED)
			return *verdict == UMT_COMM_IN;
		*pending = now - READ_ONCE(guard_state.daemon_ns) < GUARD_DAEMON_ALIVE_NS;
		return *pending;
	default:
		return bpf_map_lookup_elem(&gpu_procs, &tgid) != NULL;
	}
}

/* At most one stop per process per GUARD_RESEND_NS. */
static __always_inline bool guard_claim(__u32 tgid, __u64 now)
{
	__u64 *last = bpf_map_lookup_elem(&guard_sent, &tgid);

	if (last && now - *last < GUARD_RESEND_NS)
		return false;
	bpf_map_update_elem(&guard_sent, &tgid, &now, BPF_ANY);
	return true;
}

/* include/linux/sched/jobctl.h: a #define, not in BTF; bit 17 since 3.1. */
#define GUARD_JOBCTL_STOP_PENDING	(1UL << 17)

/*
 * A stop is on its way to the current task: SIGSTOP waits in its
 * process's queue, or a thread took it and the group stop waits for this
 * one. A thread still allocating then is one that has not reached user
 * space yet (inside a long driver call), not a process resumed since.
 */
static __always_inline bool guard_stop_pending(struct task_struct *task)
{
	if (task->jobctl & GUARD_JOBCTL_STOP_PENDING)
		return true;
	return task->signal->shared_pending.signal.sig[0] & (1UL << (GUARD_SIGSTOP - 1));
}

/*
 * Stop the current process (the whole thread group: SIGSTOP is a
 * process-wide signal) and tell user space why. Returns whether a stop
 * was decided or is on its way. A stop sent is always a new one: a
 * process the guard stopped that allocates again was resumed, however
 * soon, and user space learns it from this record.
 */
static __always_inline bool guard_stop(__u32 reason, __s64 room, __u64 cost, __u32 api)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 id = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns();
	struct umt_comm_key name = {};
	struct umt_guard_rec *r;
	__u32 tgid = id >> 32;
	bool pending = false;
	long ret = 0;

	bpf_probe_read_kernel_str(name.comm, sizeof(name.comm), task->group_leader->comm);
	if (guard_protected(task, tgid) || !guard_in_scope(tgid, &name, now, &pending))
		return false;
	if (!guard_conf.dry_run && guard_stop_pending(task))
		return true;
	if (!guard_claim(tgid, now))
		return false;
	if (!guard_conf.dry_run)
		ret = bpf_send_signal(GUARD_SIGSTOP);
	if (ret)
		__sync_fetch_and_add(&guard_state.send_failed, 1);
	__sync_fetch_and_add(&guard_state.stops, 1);
	r = rec_reserve(sizeof(*r));
	if (!r)
		return true;
	r->type = UMT_REC_GUARD;
	r->reason = reason;
	r->ts_ns = now;
	r->pid = tgid;
	r->tid = (__u32)id;
	r->sig_ret = ret;
	r->api = api;
	r->headroom_pages = room;
	r->cost_bytes = cost;
	r->dry_run = guard_conf.dry_run;
	r->flags = pending ? UMT_GUARD_SCOPE_PENDING : 0;
	bpf_get_current_comm(r->comm, sizeof(r->comm));
	__builtin_memcpy(r->pcomm, name.comm, sizeof(r->pcomm));
	/* The stop must reach user space now, not at the next batch. */
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
	return true;
}

/*
 * Admission at a GPU allocation's entry: reserve its host cost, or stop
 * the caller before the call runs. Returns the pages reserved.
 */
static __always_inline __s64 guard_admit(__u64 ck, __u64 size)
{
	__u32 api = UMT_CK_API(ck);
	__s64 cost, room;

	if (!guard_conf.on || !READ_ONCE(guard_state.armed) || (ck & UMT_CK_FREE))
		return 0;
	if (api >= 64 || !(guard_conf.cost_apis & (1ULL << api)))
		return 0;
	cost = (size + (1ULL << guard_conf.page_shift) - 1) >> guard_conf.page_shift;
	if (cost <= 0)
		return 0;
	__sync_fetch_and_add(&guard_state.checks, 1);
	__sync_fetch_and_add(&guard_state.reserved, cost);
	room = guard_room(READ_ONCE(guard_state.floor));
	if (room >= 0)
		return cost;
	/*
	 * A caller stopped here gives its reservation back: its call runs, if
	 * ever, after an operator's resume. One left running (out of scope,
	 * protected, a dry run, stopped a moment ago) keeps it: its pages are
	 * coming all the same, and other callers must see them coming.
	 */
	if (!guard_stop(UMT_GUARD_ADMISSION, room + cost, size, api) || guard_conf.dry_run)
		return cost;
	__sync_fetch_and_add(&guard_state.reserved, -cost);
	return 0;
}

/*
 * An admitted call may take a little more than its size (page tables,
 * the driver's bookkeeping) before the backstop looks at its pages: a
 * stop decided inside the call lands only when the driver returns, so it
 * would come no sooner than the stop the next call's admission makes
 * before that call runs. Past the slack, a call that takes far more than
 * it was admitted for is stopped like any other allocator.
 */
static __always_inline __s64 guard_slack(__s64 reserved)
{
	return reserved > 0 ? reserved / GUARD_SLACK_DIV + GUARD_BATCH : 0;
}

/*
 * Pages of an admitted call come out of its reservation first, then out
 * of its slack; returns those left for the backstop to decide on.
 */
static __always_inline __u64 guard_draw(__s64 *reserved, __s64 *slack, __u64 pages)
{
	__s64 take = *reserved, rest;

	if (take > 0) {
		if (take > (__s64)pages)
			take = pages;
		*reserved -= take;
		__sync_fetch_and_add(&guard_state.reserved, -take);
	} else {
		take = 0;
	}
	rest = (__s64)pages - take;
	take = *slack < rest ? *slack : rest;
	if (take > 0) {
		*slack -= take;
		rest -= take;
	}
	return rest;
}

static __always_inline void guard_release(__s64 *reserved)
{
	if (*reserved > 0)
		__sync_fetch_and_add(&guard_state.reserved, -*reserved);
	*reserved = 0;
}

/*
 * A page was allocated; unreserved says how many of its pages no
 * admitted call had reserved. Stop the task if they cross the floor.
 */
static __always_inline void guard_page_alloc(__u64 pages, __u64 unreserved,
					     unsigned int gfp)
{
	__s64 room;

	if (!guard_conf.on)
		return;
	/*
	 * All pages go into net; those drawn from a reservation left it
	 * already (guard_draw), so the headroom moved only by the rest.
	 */
	room = guard_count(pages);
	if (room >= 0 || !unreserved)
		return;
	if (!umt_gfp_from_task(gfp))
		return;
	guard_stop(UMT_GUARD_FLOOR, room, unreserved << guard_conf.page_shift, 0);
}

/*
 * Free pages taken off the free lists with no mm_page_alloc (compaction's
 * isolation): counted as allocated, nothing decided.
 */
static __always_inline void guard_page_isolated(__u64 pages)
{
	if (guard_conf.on && pages)
		guard_count((__s64)pages);
}

/* Frees need no decision: fold them only to keep guard_state.net current. */
static __always_inline void guard_page_free(__u64 pages)
{
	struct umt_guard_cpu *c;
	__u32 cpu;
	__s64 d;

	if (!guard_conf.on)
		return;
	cpu = bpf_get_smp_processor_id();
	if (cpu >= GUARD_MAX_CPUS) {
		guard_fold(-(__s64)pages);
		return;
	}
	c = guard_slot(cpu);
	d = c->delta - (__s64)pages;
	if (d > -GUARD_BATCH) {
		c->delta = d;
		return;
	}
	guard_fold_cpu(c, d);
}

/* Direct reclaim entered by a task in scope while under LOW. */
static __always_inline void guard_reclaim(unsigned int gfp)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct umt_gpu_proc *p;
	__s64 room;

	__sync_fetch_and_add(&guard_state.reclaims, 1);
	p = bpf_map_lookup_elem(&gpu_procs, &tgid);
	if (p)
		__sync_fetch_and_add(&p->reclaims, 1);
	if (!guard_conf.on || !READ_ONCE(guard_state.armed) || !umt_gfp_from_task(gfp))
		return;
	room = guard_room(READ_ONCE(guard_state.low));
	if (room >= 0)
		return;
	guard_stop(UMT_GUARD_RECLAIM, room, 0, 0);
}

#endif /* UMTRACE_GUARD_BPF_H */
