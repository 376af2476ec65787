// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The meter's globals (meter.bpf.h) and its search: where the kernel's
 * free-page counters of each host zone and node are, found once.
 */
#include "meter.bpf.h"

const volatile bool meter_free_only = false;
struct umt_meter meter;

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
	__u32 n = meter.n_zones;

	if (n >= UMT_GUARD_MAX_ZONES)
		return false;
	meter.zones[n].free = at + bpf_core_field_offset(struct zone, vm_stat) +
			      bpf_core_enum_value(enum zone_stat_item, NR_FREE_PAGES) *
			      sizeof(long);
	meter.zones[n].low = at + bpf_core_field_offset(struct zone, _watermark) +
			     bpf_core_enum_value(enum zone_watermarks, WMARK_LOW) * sizeof(long);
	meter.zones[n].boost = bpf_core_field_exists(struct zone, watermark_boost) ?
			       at + bpf_core_field_offset(struct zone, watermark_boost) : 0;
	meter.n_zones = n + 1;
	return true;
}

/* Note a host node's counters and each of its zones that has pages. */
static __always_inline bool meter_note_node(void *pgdat)
{
	__u64 zone_size = bpf_core_type_size(struct zone), nz, z, at;
	__u32 n = meter.n_nodes;
	long managed;

	if (n >= UMT_GUARD_MAX_NODES)
		return false;
	meter.nodes[n] = (__u64)pgdat + bpf_core_field_offset(struct pglist_data, vm_stat);
	meter.n_nodes = n + 1;
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

	meter.n_zones = meter.n_nodes = 0;
	if (!memcg || !bpf_core_field_exists(struct lruvec, pgdat))
		return 0;
	nodes_at = (__u64)memcg + bpf_core_field_offset(struct mem_cgroup, nodeinfo);
	for (nid = 0; nid < UMT_GUARD_MAX_NODES; nid++) {
		if (nid >= meter.n_possible)
			break;
		if (meter.device_nodes & (1ULL << nid))
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
		meter.seen = now;
	return 0;
}
