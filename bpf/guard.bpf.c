// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The guard's kernel side (guard.bpf.h says how it decides): its maps and
 * figures, and the programs of its own, on direct reclaim, kswapd's
 * wake-up and a process's rename. Its decisions at a GPU call's entry and
 * at a page are made in those programs (calls.bpf.c, pages.bpf.c).
 */
#include "guard.bpf.h"

const volatile struct umt_guard_conf guard_conf = {
	.scope = UMT_SCOPE_GPU,
	.page_shift = 12,
	.nr_cpus = 1,
};
struct umt_guard_state guard_state;

struct guard_sent_map guard_sent SEC(".maps");
struct guard_scope_pids_map guard_scope_pids SEC(".maps");
struct guard_scope_comms_map guard_scope_comms SEC(".maps");
struct guard_cgroup_map guard_cgroup SEC(".maps");
struct guard_protect_map guard_protect SEC(".maps");

/* include/uapi/linux/stat.h */
#define GUARD_S_IWGRP	00020
#define GUARD_S_IWOTH	00002

static __always_inline bool guard_protected_cgroup(void)
{
	struct umt_protect_cgroup *c;
	__u32 i, n = READ_ONCE(guard_state.n_protect_cgroups);

	for (i = 0; i < UMT_GUARD_MAX_PROTECT_CGROUPS; i++) {
		if (i >= n)
			break;
		c = &guard_state.protect_cgroups[i];
		if (c->id && bpf_get_current_ancestor_cgroup_id(c->level) == c->id)
			return true;
	}
	return false;
}

static __always_inline bool same_name(const char *a, const char *b)
{
	int i;

	for (i = 0; i < TASK_COMM_LEN - 1; i++) {
		if (a[i] != b[i])
			return false;
		if (!a[i])
			return true;
	}
	return true;
}

/*
 * A protected name counts only for a process run from a file of that
 * name (its first 15 bytes, as comm keeps them) that is root's and that
 * no one else may write: root may run anything under any name, but the
 * name is the operator's word for a daemon, not for whatever root runs.
 */
static __always_inline bool guard_protected_name(struct task_struct *task, struct file *exe)
{
	struct umt_protect_key key = { .kind = UMT_PROTECT_NAME };
	struct inode *inode = BPF_CORE_READ(exe, f_inode);
	char file_name[TASK_COMM_LEN] = {};

	bpf_probe_read_kernel_str(key.comm, sizeof(key.comm), task->group_leader->comm);
	if (!bpf_map_lookup_elem(&guard_protect, &key))
		return false;
	if (BPF_CORE_READ(inode, i_uid.val) ||
	    (BPF_CORE_READ(inode, i_mode) & (GUARD_S_IWGRP | GUARD_S_IWOTH)))
		return false;
	bpf_probe_read_kernel_str(file_name, sizeof(file_name),
				  BPF_CORE_READ(exe, f_path.dentry, d_name.name));
	return same_name(file_name, key.comm);
}

/*
 * Whether the current task is protected by who it is: its real uid, its
 * cgroup, or, run by root, its executable (device and inode, as the
 * kernel keeps them) or its name with its executable. Neither of the
 * last two counts for anyone else: a user may run root's daemon binary
 * with code of their own in it (LD_PRELOAD), or relabel an executable
 * in a user namespace of their own (prctl PR_SET_MM_MAP), but cannot
 * take on a uid.
 */
__noinline int guard_protected_id(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct umt_protect_key key = {};
	struct inode *inode;
	struct file *exe;
	__u32 uid;

	uid = BPF_CORE_READ(task, real_cred, uid.val);
	key.kind = UMT_PROTECT_UID;
	key.uid = uid;
	if (bpf_map_lookup_elem(&guard_protect, &key))
		return 1;
	if (guard_protected_cgroup())
		return 1;
	exe = BPF_CORE_READ(task, mm, exe_file);
	if (uid || !exe)
		return 0;
	inode = BPF_CORE_READ(exe, f_inode);
	key.kind = UMT_PROTECT_EXE;
	key.uid = 0;
	key.dev = BPF_CORE_READ(inode, i_sb, s_dev);
	key.ino = BPF_CORE_READ(inode, i_ino);
	if (bpf_map_lookup_elem(&guard_protect, &key))
		return 1;
	return guard_protected_name(task, exe);
}

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
	__sync_fetch_and_add(&guard_state.kswapd_wakes, 1);
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

/*
 * The helper's look (user space runs it with BPF_PROG_TEST_RUN): the
 * headroom above the floor as the next decision would see it, from the
 * kernel's counters. 1: there are none to read.
 */
SEC("?raw_tp")
int guard_look(void *ctx)
{
	__s64 room;

	if (!guard_exact_room(READ_ONCE(guard_state.floor), &room))
		return 1;
	guard_state.look_room = room;
	return 0;
}
