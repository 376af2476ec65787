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

__s64 guard_anchor;
__s64 guard_ceiling;
__s64 guard_floor;
__s64 guard_low;
bool guard_armed;

const volatile bool meter_free_only = false;
struct umt_meter_zone meter_zones[UMT_GUARD_MAX_ZONES];
__u32 meter_n_zones;
__u64 meter_nodes[UMT_GUARD_MAX_NODES];
__u32 meter_n_nodes;

__s64 guard_meter_seen;
__u32 guard_n_possible;
__u64 guard_device_nodes;
bool guard_exact;
__u64 guard_sample_pages;

__u32 guard_helper;
__s64 guard_look_room;
__u64 guard_daemon_ns;

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
struct guard_protect_map guard_protect SEC(".maps");

struct umt_protect_cgroup guard_protect_cgroups[UMT_GUARD_MAX_PROTECT_CGROUPS];
__u32 guard_n_protect_cgroups;

/* include/uapi/linux/stat.h */
#define GUARD_S_IWGRP	00020
#define GUARD_S_IWOTH	00002

static __always_inline bool guard_protected_cgroup(void)
{
	struct umt_protect_cgroup *c;
	__u32 i, n = READ_ONCE(guard_n_protect_cgroups);

	for (i = 0; i < UMT_GUARD_MAX_PROTECT_CGROUPS; i++) {
		if (i >= n)
			break;
		c = &guard_protect_cgroups[i];
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

/*
 * Every host node's memory is reached from a memory cgroup: its per-node
 * part holds an LRU vector, and that knows its node once a page of the
 * node has been charged there. The root cgroup, found from the current
 * task's (user space runs this once, with BPF_PROG_TEST_RUN), has seen
 * every node's pages. No kernel data symbol is needed: kernels without
 * CONFIG_KALLSYMS_ALL have none. Read with CO-RE, since struct zone
 * changes with the kernel's configuration.
 */
#define GUARD_MAX_CGROUP_DEPTH	32

static __always_inline void *guard_memcg(void)
{
	struct task_struct *task = (void *)bpf_get_current_task();
	struct css_set *cset = BPF_CORE_READ(task, cgroups);
	struct cgroup_subsys_state *parent;
	void *css = NULL;
	int depth;
	__u64 id;

	if (!bpf_core_enum_value_exists(enum cgroup_subsys_id, memory_cgrp_id))
		return NULL;
	id = bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id);
	if (!cset || bpf_probe_read_kernel(&css, sizeof(css), (void *)cset +
					   bpf_core_field_offset(struct css_set, subsys) +
					   id * sizeof(void *)) || !css)
		return NULL;
	for (depth = 0; depth < GUARD_MAX_CGROUP_DEPTH; depth++) {
		parent = BPF_CORE_READ((struct cgroup_subsys_state *)css, parent);
		if (!parent)
			return css - bpf_core_field_offset(struct mem_cgroup, css);
		css = parent;
	}
	return NULL;
}

/* Note one zone's counters; false when there is no room for them. */
static __always_inline bool meter_note_zone(__u64 at)
{
	__u32 n = meter_n_zones;

	if (n >= UMT_GUARD_MAX_ZONES)
		return false;
	meter_zones[n].free = at + bpf_core_field_offset(struct zone, vm_stat) +
			      bpf_core_enum_value(enum zone_stat_item, NR_FREE_PAGES) *
			      sizeof(long);
	meter_zones[n].low = at + bpf_core_field_offset(struct zone, _watermark) +
			     bpf_core_enum_value(enum zone_watermarks, WMARK_LOW) * sizeof(long);
	meter_zones[n].boost = bpf_core_field_exists(struct zone, watermark_boost) ?
			       at + bpf_core_field_offset(struct zone, watermark_boost) : 0;
	meter_n_zones = n + 1;
	return true;
}

/* Note a host node's counters and each of its zones that has pages. */
static __always_inline bool meter_note_node(void *pgdat)
{
	__u64 zone_size = bpf_core_type_size(struct zone), nz, z, at;
	__u32 n = meter_n_nodes;
	long managed;

	if (n >= UMT_GUARD_MAX_NODES)
		return false;
	meter_nodes[n] = (__u64)pgdat + bpf_core_field_offset(struct pglist_data, vm_stat);
	meter_n_nodes = n + 1;
	nz = bpf_core_enum_value(enum zone_type, __MAX_NR_ZONES);
	for (z = 0; z < 8; z++) {
		if (z >= nz)
			break;
		at = (__u64)pgdat + bpf_core_field_offset(struct pglist_data, node_zones) +
		     z * zone_size;
		managed = BPF_CORE_READ((struct zone *)at, managed_pages.counter);
		if (managed > 0 && !meter_note_zone(at))
			return false;
	}
	return true;
}

SEC("?raw_tp")
int guard_find_zones(void *ctx)
{
	void *memcg = guard_memcg(), *pn, *pgdat;
	__u64 nodes_at;
	__u32 nid;
	__s64 now;

	meter_n_zones = meter_n_nodes = 0;
	if (!memcg || !bpf_core_field_exists(struct lruvec, pgdat))
		return 0;
	nodes_at = (__u64)memcg + bpf_core_field_offset(struct mem_cgroup, nodeinfo);
	for (nid = 0; nid < UMT_GUARD_MAX_NODES; nid++) {
		if (nid >= guard_n_possible)
			break;
		if (guard_device_nodes & (1ULL << nid))
			continue;
		pn = NULL;
		if (bpf_probe_read_kernel(&pn, sizeof(pn), (void *)(nodes_at + nid * sizeof(void *))) ||
		    !pn)
			continue;	/* a possible node not online */
		pgdat = BPF_CORE_READ((struct mem_cgroup_per_node *)pn, lruvec.pgdat);
		if (!pgdat || BPF_CORE_READ((struct pglist_data *)pgdat, node_id) != (int)nid)
			continue;
		if (!meter_note_node(pgdat))
			break;
	}
	if (meter_now(&now))
		guard_meter_seen = now;
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

	if (!guard_exact_room(READ_ONCE(guard_floor), &room))
		return 1;
	guard_look_room = room;
	return 0;
}
