/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Host pages taken by kernel threads. A driver's bottom half (NVIDIA's
 * "UVM GPU0 BH") or khugepaged allocates for a process without being it,
 * so no window and no per-process count sees those pages. Each kernel
 * thread's pages are counted under its own pid; when the kernel then
 * changes the resident-set counters of a process's mm from that thread
 * (kmem:rss_stat: it has mapped the pages there), the pages it took since
 * its last such change move to a row for that process.
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
							     __u32 tgid)
{
	struct umt_kthread_key k = { .pid = task->pid, .tgid = tgid };
	struct umt_kthread_pages zero = {}, *v;

	v = bpf_map_lookup_elem(&kthread_pages, &k);
	if (v)
		return v;
	bpf_probe_read_kernel_str(zero.comm, sizeof(zero.comm), task->comm);
	bpf_map_update_elem(&kthread_pages, &k, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&kthread_pages, &k);
}

static __always_inline void kthread_took(struct task_struct *task, __u64 pages)
{
	struct umt_kthread_pages *v = kthread_row(task, 0);
	__u64 *pending;

	if (!v) {
		__sync_fetch_and_add(&kthread_rows_full, pages);
		return;
	}
	__sync_fetch_and_add(&v->pages, pages);
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

/* The process an mm belongs to (CONFIG_MEMCG keeps mm->owner), or 0. */
static __always_inline __u32 mm_tgid(struct mm_struct *mm)
{
	struct task_struct *owner;

	if (!bpf_core_field_exists(mm->owner))
		return 0;
	owner = BPF_CORE_READ(mm, owner);
	return owner ? BPF_CORE_READ(owner, tgid) : 0;
}

/* A kernel thread changed mm's counters: its pending pages were for it. */
static __always_inline void kthread_named(struct task_struct *task, struct mm_struct *mm)
{
	struct umt_kthread_pages *from, *to;
	__u64 *pending, n;
	__u32 tgid;

	pending = bpf_task_storage_get(&kthread_pending, task, 0, 0);
	if (!pending || !*pending)
		return;
	tgid = mm_tgid(mm);
	if (!tgid) {
		/* No owner to name (no CONFIG_MEMCG): they stay the thread's. */
		*pending = 0;
		return;
	}
	from = kthread_row(task, 0);
	to = kthread_row(task, tgid);
	if (!from || !to)
		return;
	n = *pending;
	*pending = 0;
	__sync_fetch_and_add(&from->pages, -n);
	__sync_fetch_and_add(&to->pages, n);
}

#endif /* UMTRACE_KTHREADS_BPF_H */
