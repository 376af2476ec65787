// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The guard's kernel side (guard.bpf.h says how it decides): its maps and
 * figures, and the programs of its own, on direct reclaim, kswapd's
 * wake-up and a process's rename. Its decisions at a GPU call's entry and
 * at a page are made in those programs (calls.bpf.c, pages.bpf.c).
 */
#include "guard.bpf.h"

const volatile bool guard_on = false;
const volatile bool guard_dry_run = false;
const volatile __u32 guard_scope = UMT_SCOPE_GPU;
const volatile __u32 guard_self = 0;
const volatile __u32 page_shift = 12;
const volatile __u32 guard_nr_cpus = 1;
const volatile __u64 guard_cost_apis = 0;
const volatile __u32 guard_n_protect = 0;
const volatile char guard_protect[UMT_GUARD_MAX_PROTECT][TASK_COMM_LEN] = {};

__s64 guard_anchor;
__s64 guard_ceiling;
__s64 guard_floor;
__s64 guard_low;
bool guard_armed;

__s64 guard_net;
__s64 guard_reserved;
__u64 guard_checks;
__u64 guard_stops;
__u64 guard_send_failed;
__u64 guard_reclaims;
__u64 guard_kswapd_wakes;

struct umt_guard_cpu guard_cpus[GUARD_MAX_CPUS];

struct guard_sent_map guard_sent SEC(".maps");
struct guard_scope_pids_map guard_scope_pids SEC(".maps");
struct guard_scope_comms_map guard_scope_comms SEC(".maps");
struct guard_cgroup_map guard_cgroup SEC(".maps");

/*
 * Direct reclaim: the allocating task itself reclaims, so it is current.
 * On unified memory the driver's pages cannot be reclaimed, so a GPU job
 * reclaiming under LOW is a job about to take the host down.
 */
SEC("tp_btf/mm_vmscan_direct_reclaim_begin")
int BPF_PROG(direct_reclaim, int order, gfp_t gfp)
{
	guard_reclaim(gfp);
	return 0;
}

/* Context for the record: kswapd woken means the host is short already. */
SEC("tp_btf/mm_vmscan_wakeup_kswapd")
int BPF_PROG(kswapd_wake, int nid, int zid, int order, gfp_t gfp)
{
	__sync_fetch_and_add(&guard_kswapd_wakes, 1);
	return 0;
}

/* A process renaming itself (the main thread's comm) takes a new verdict. */
SEC("tp_btf/task_rename")
int BPF_PROG(task_rename, struct task_struct *task, const char *comm)
{
	if (task->pid == task->tgid)
		guard_note_name(task->tgid, comm);
	return 0;
}
