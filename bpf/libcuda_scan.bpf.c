// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Which processes may have mapped a new library since the last look,
 * host-wide, without reading every /proc/PID/maps: that file is formatted
 * line by line, every mapping of every process, and an always-on guard
 * looks again every 2 s (with 570 processes here it took 1.9% of a core).
 * Mapping a library's code grows its process's executable mappings
 * (mm->exec_vm), and a process's anonymous memory, heap and stacks never
 * do. A task iterator writes out each process's exec_vm; user space reads
 * the maps of only the processes that are new or whose figure changed.
 * A separate object: a kernel without the iterator loses only this.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include "umtrace.h"

SEC("iter/task")
int list_exec_vm(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct umt_proc_exec p = {};
	struct mm_struct *mm;

	/* One record a process: its leader's; none for kernel threads. */
	if (!task || task->pid != task->tgid)
		return 0;
	mm = task->mm;
	if (!mm)
		return 0;
	p.tgid = task->tgid;
	p.start_ns = task->start_time;
	p.exec_vm = mm->exec_vm;
	bpf_seq_write(ctx->meta->seq, &p, sizeof(p));
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
