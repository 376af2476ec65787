// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Managed memory's index (managed.bpf.h) and its CPU fault hook. */
#include "managed.bpf.h"

const volatile bool track_managed = false;

struct managed_chunks_map managed_chunks SEC(".maps");
struct managed_allocs_map managed_allocs SEC(".maps");

struct umt_managed_state managed_state;

/* x86 only: arm64 has no tracepoint that gives a user fault's address. */
SEC("tp_btf/page_fault_user")
int BPF_PROG(managed_fault, unsigned long address)
{
	struct umt_managed_key k = { .tgid = bpf_get_current_pid_tgid() >> 32 };
	struct managed_chunk *chunk;
	struct umt_managed_alloc *a;
	struct window *w;

	if (!READ_ONCE(managed_state.live))
		return 0;
	k.addr = address >> MANAGED_CHUNK_SHIFT;
	chunk = bpf_map_lookup_elem(&managed_chunks, &k);
	if (!chunk)
		return 0;
	k.addr = chunk->base[0];
	a = bpf_map_lookup_elem(&managed_allocs, &k);
	if (!a || address - k.addr >= a->size) {
		k.addr = chunk->base[1];
		a = bpf_map_lookup_elem(&managed_allocs, &k);
		if (!a || address - k.addr >= a->size)
			return 0;
	}
	w = bpf_task_storage_get(&windows, bpf_get_current_task_btf(), 0,
				 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!w)
		return 0;
	if (!w->fault_base)
		__sync_fetch_and_add(&managed_state.faults_pending, 1);
	w->fault_base = k.addr;
	return 0;
}
