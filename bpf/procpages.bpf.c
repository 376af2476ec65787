// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * With no libcuda to probe, umtrace still shows which processes take host
 * pages: the pages each process takes and frees, counted here and read by
 * user space (user/attach/proc_pages.c). Loaded only in that mode.
 */
#include "pages.bpf.h"

struct proc_pages {
	__u64 alloc;
	__u64 freed;
	char comm[TASK_COMM_LEN];	/* kept: the process may be gone when read */
};

/* Host pages per process, only loaded when there is no libcuda to probe. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct proc_pages);
} proc_pages SEC(".maps");

static __always_inline struct proc_pages *proc_pages_of_current(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct proc_pages zero = {}, *pp;

	if (!pid_in_scope(tgid))
		return NULL;
	pp = bpf_map_lookup_elem(&proc_pages, &tgid);
	if (pp)
		return pp;
	bpf_get_current_comm(zero.comm, sizeof(zero.comm));
	bpf_map_update_elem(&proc_pages, &tgid, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&proc_pages, &tgid);
}

/* 2^order pages the current process took, or freed. */
static __always_inline void proc_pages_count(bool freed, unsigned int order)
{
	struct proc_pages *pp = proc_pages_of_current();

	if (pp)
		__sync_fetch_and_add(freed ? &pp->freed : &pp->alloc, 1ULL << order);
}

/* Fallback with no libcuda to probe: host pages per process. */
SEC("tp_btf/mm_page_alloc")
int BPF_PROG(proc_page_alloc, struct page *page, unsigned int order, gfp_t gfp)
{
	if (page && umt_gfp_from_task(gfp))
		proc_pages_count(false, order);
	return 0;
}

SEC("tp_btf/mm_page_free")
int BPF_PROG(proc_page_free, struct page *page, unsigned int order)
{
	if (!serving_softirq() && !new_to_allocator(page, order))
		proc_pages_count(true, order);
	return 0;
}


/* The comm seen at the first page is the parent's, before exec. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(proc_exec, struct task_struct *task)
{
	__u32 tgid = task->tgid;
	struct proc_pages *pp = bpf_map_lookup_elem(&proc_pages, &tgid);

	if (pp)
		bpf_get_current_comm(pp->comm, sizeof(pp->comm));
	return 0;
}
