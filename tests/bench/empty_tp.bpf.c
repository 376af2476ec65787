// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The cheapest possible page programs: they do nothing. Whatever
 * empty_alloc costs is the floor any BPF page tracer pays on this machine
 * (the tracepoint's BPF dispatch), against which umtrace's own cost is
 * judged; with empty_free beside it, the floor of a tracer that must see
 * frees too, as the guard and trace do. tests/bench/empty_tp attaches
 * empty_alloc only; tests/bench/interleave toggles either. The three on
 * the process tracepoints are those the guard keeps attached far from its
 * floor, empty: what a tracer pays for them before its programs do
 * anything (their tracepoints hardly fire in a storm); loaded only when
 * toggled (sched_prepare_exec is 6.10's). empty_uprobe
 * is the same for a uprobe (empty_tp --uprobe): what any uprobe program
 * on PyTorch's allocator hook pays before doing anything.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Kernel program names keep 15 characters: these fit whole. */
SEC("tp_btf/mm_page_alloc")
int BPF_PROG(empty_alloc, struct page *page, unsigned int order, gfp_t gfp)
{
	return 0;
}

SEC("tp_btf/mm_page_free")
int BPF_PROG(empty_free, struct page *page, unsigned int order)
{
	return 0;
}

SEC("?tp_btf/sched_process_exec")
int BPF_PROG(empty_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	return 0;
}

SEC("?tp_btf/sched_prepare_exec")
int BPF_PROG(empty_prep, struct task_struct *task, struct linux_binprm *bprm)
{
	return 0;
}

SEC("?tp_btf/sched_process_exit")
int BPF_PROG(empty_exit, struct task_struct *p)
{
	return 0;
}

SEC("uprobe")
int empty_uprobe(void *ctx)
{
	return 0;
}
