// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Kernel threads' pages (kthreads.bpf.h): the maps, and the program that
 * moves a thread's own pages to the process it then worked for. */
#include "kthreads.bpf.h"

const volatile bool count_kthreads = false;
__u64 kthread_rows_full;

struct kthread_pages_map kthread_pages SEC(".maps");
struct kthread_pending_map kthread_pending SEC(".maps");
struct gpu_memcgs_map gpu_memcgs SEC(".maps");

/*
 * A kernel thread changed a process's resident-set counters: the pages it
 * took as its own since it last did were for that process (count_kthreads
 * only: this fires at every change of every process's counters). Pages
 * taken with an mm adopted or a memory cgroup active were charged when
 * taken; this names what a thread maps into an mm it did not adopt
 * (khugepaged's collapses, faults serviced through a remote mm).
 */
SEC("tp_btf/rss_stat")
int BPF_PROG(rss_stat, struct mm_struct *mm, int member)
{
	struct task_struct *task = bpf_get_current_task_btf();

	if (mm && is_kthread(task))
		kthread_named(task, mm);
	return 0;
}
