/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Host pages taken by kernel threads. A driver's bottom half (NVIDIA's
 * "UVM GPU0 BH") or khugepaged allocates for a process without being it,
 * so no window and no per-process count sees those pages. Each page is
 * charged when it is taken, to the job the kernel would charge it to:
 *
 * - a thread that adopted a process's mm (kthread_use_mm: task->mm set on
 *   a kernel thread) works in that process's address space: its pages are
 *   that process's (mm->owner);
 * - a thread with a memory cgroup active (set_active_memcg, as UVM's
 *   uvm_memcg_context_start does around what it takes for a job) charges
 *   its __GFP_ACCOUNT pages there: its pages are that cgroup's, kept by
 *   the cgroup's id, and user space names the GPU processes in it (their
 *   memory cgroups are noted at their first GPU call, gpu_memcgs);
 * - else they are the thread's own, until the kernel changes the
 *   resident-set counters of a process's mm from that thread
 *   (kmem:rss_stat: it mapped pages there without adopting the mm, as
 *   khugepaged and remote faults do): the pages it took since its last
 *   such change move to a row for that process.
 */
#ifndef UMTRACE_KTHREADS_BPF_H
#define UMTRACE_KTHREADS_BPF_H

#include "shared.bpf.h"

/* Set by user space before load (top, report). */
extern const volatile bool count_kthreads;

extern __u64 kthread_rows_full;	/* pages not counted: the map was full */

UMT_MAP_TYPE(kthread_pages, BPF_MAP_TYPE_HASH, 4096, struct umt_kthread_key,
	     struct umt_kthread_pages);
extern struct kthread_pages_map kthread_pages SEC(".maps");

/*
 * The memory cgroup and name of each process that made a GPU call, kept
 * past its exit (an LRU: a report names the job after it ended).
 */
UMT_MAP_TYPE(gpu_memcgs, BPF_MAP_TYPE_LRU_HASH, 4096, __u32, struct umt_gpu_memcg);
extern struct gpu_memcgs_map gpu_memcgs SEC(".maps");

/* Pages the thread took since it last named a process. */
struct kthread_pending_map {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
};
extern struct kthread_pending_map kthread_pending SEC(".maps");

static __always_inline bool is_kthread(struct task_struct *task)
{
	return task->flags & UMT_PF_KTHREAD;
}

static __always_inline struct umt_kthread_pages *kthread_row(struct task_struct *task,
							     const struct umt_kthread_key *k)
{
	struct umt_kthread_pages zero = {}, *v;

	v = bpf_map_lookup_elem(&kthread_pages, k);
	if (v)
		return v;
	bpf_probe_read_kernel_str(zero.comm, sizeof(zero.comm), task->comm);
	bpf_map_update_elem(&kthread_pages, k, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&kthread_pages, k);
}

/* The process an mm belongs to (CONFIG_MEMCG keeps mm->owner), or 0. */
static __always_inline __u32 mm_tgid(struct mm_struct *mm)
{
	struct task_struct *owner;

	if (!bpf_core_field_exists(mm->owner))
		return 0;
	owner = BPF_CORE_READ(mm, owner);
	return owner ? BPF_CORE_READ(owner, tgid) : 0;
}

/*
 * The id of a memory cgroup's cgroup (its kernfs node: the inode of its
 * cgroup v2 directory), 0 for none or the root, which charges no job.
 */
static __always_inline __u64 memcg_cgroup_id(struct mem_cgroup *memcg)
{
	if (!memcg || !BPF_CORE_READ(memcg, css.parent))
		return 0;
	return BPF_CORE_READ(memcg, css.cgroup, kn, id);
}

/* The memory cgroup a kernel thread charges (set_active_memcg), or 0. */
static __always_inline __u64 active_cgroup(struct task_struct *task)
{
	if (!bpf_core_field_exists(task->active_memcg))
		return 0;	/* no CONFIG_MEMCG */
	return memcg_cgroup_id(BPF_CORE_READ(task, active_memcg));
}

/* Who a kernel thread's page is for, in k (the thread's pid already there). */
static __always_inline void kthread_for(struct task_struct *task, struct umt_kthread_key *k)
{
	struct mm_struct *mm = BPF_CORE_READ(task, mm);

	/* A kernel thread's mm is a process's only while it adopted it. */
	k->tgid = mm ? mm_tgid(mm) : 0;
	if (k->tgid) {
		k->by = UMT_KTHREAD_BY_MM;
		return;
	}
	k->cgroup = active_cgroup(task);
	if (k->cgroup)
		k->by = UMT_KTHREAD_BY_MEMCG;
}

static __always_inline void kthread_took(struct task_struct *task, __u64 pages)
{
	struct umt_kthread_key k = { .pid = task->pid };
	struct umt_kthread_pages *v;
	__u64 *pending;

	kthread_for(task, &k);
	v = kthread_row(task, &k);
	if (!v) {
		__sync_fetch_and_add(&kthread_rows_full, pages);
		return;
	}
	__sync_fetch_and_add(&v->pages, pages);
	if (k.by)
		return;
	/* the thread's own for now: rss_stat may name their process later */
	pending = bpf_task_storage_get(&kthread_pending, task, 0,
				       BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (pending)
		*pending += pages;
}

/* A page the current task took: counted here if it is a kernel thread. */
static __always_inline bool kthread_page(__u64 pages)
{
	struct task_struct *task = bpf_get_current_task_btf();

	if (!is_kthread(task))
		return false;
	kthread_took(task, pages);
	return true;
}

/* A kernel thread changed mm's counters: its pending pages were for it. */
static __always_inline void kthread_named(struct task_struct *task, struct mm_struct *mm)
{
	struct umt_kthread_key own = { .pid = task->pid };
	struct umt_kthread_key to_k = { .pid = task->pid, .by = UMT_KTHREAD_BY_RSS };
	struct umt_kthread_pages *from, *to;
	__u64 *pending, n;

	pending = bpf_task_storage_get(&kthread_pending, task, 0, 0);
	if (!pending || !*pending)
		return;
	to_k.tgid = mm_tgid(mm);
	if (!to_k.tgid) {
		/* No owner to name (no CONFIG_MEMCG): they stay the thread's. */
		*pending = 0;
		return;
	}
	from = kthread_row(task, &own);
	to = kthread_row(task, &to_k);
	if (!from || !to)
		return;
	n = *pending;
	*pending = 0;
	__sync_fetch_and_add(&from->pages, -n);
	__sync_fetch_and_add(&to->pages, n);
}

/*
 * A process's memory cgroup's id (what set_active_memcg(get_mem_cgroup_
 * from_mm(its mm)) makes active), 0 without the memory controller.
 */
static __always_inline __u64 task_memcg_cgroup(struct task_struct *task)
{
	struct cgroup_subsys_state *css = NULL;
	struct css_set *set;
	int id;

	if (!bpf_core_enum_value_exists(enum cgroup_subsys_id, memory_cgrp_id))
		return 0;
	id = bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id);
	set = BPF_CORE_READ(task, cgroups);
	/* subsys[] has CGROUP_SUBSYS_COUNT entries, never near 64 */
	if (!set || id < 0 || id >= 64)
		return 0;
	bpf_core_read(&css, sizeof(css), &set->subsys[id]);
	return memcg_cgroup_id((struct mem_cgroup *)css);
}

/* A process made its first GPU call: note its memory cgroup and name. */
static __always_inline void kthread_job_seen(struct task_struct *task, __u32 tgid)
{
	struct umt_gpu_memcg m = {};

	m.cgroup = task_memcg_cgroup(task);
	bpf_probe_read_kernel_str(m.comm, sizeof(m.comm), task->group_leader->comm);
	bpf_map_update_elem(&gpu_memcgs, &tgid, &m, BPF_ANY);
}

#endif /* UMTRACE_KTHREADS_BPF_H */
