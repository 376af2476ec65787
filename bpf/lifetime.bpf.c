// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A process's lifetime as the windows see it: a thread that exits or
 * execs inside a GPU call closes its window there, the last thread of a
 * process that made GPU calls reports the process's end (and its managed
 * memory and torch devices are forgotten), and a traced process's
 * children are traced too.
 */
#include "calls.bpf.h"
#include "torch.bpf.h"

/*
 * The task is done with its image: its open window closes with end, and
 * a managed fault it had not been charged for yet is dropped.
 */
static __always_inline void close_on(struct task_struct *task, __u32 end)
{
	struct window *w;

	if (!READ_ONCE(trace_state.open_windows) && !READ_ONCE(managed_state.faults_pending))
		return;
	w = bpf_task_storage_get(&windows, task, 0, 0);
	if (!w)
		return;
	if (w->fault_base) {
		w->fault_base = 0;
		__sync_fetch_and_add(&managed_state.faults_pending, -1);
	}
	if (w->depth)
		close_window(w, end, 0);
}

static __always_inline void report_proc_exit(struct task_struct *task, __u32 tgid)
{
	struct umt_proc_exit_rec *r;
	struct umt_gpu_proc *p;
	__u32 torch = 0;

	p = bpf_map_lookup_elem(&gpu_procs, &tgid);
	if (p)
		torch = p->torch_devs;
	if (bpf_map_delete_elem(&gpu_procs, &tgid))
		return;	/* made no GPU call */
	torch_forget(tgid, torch);
	forget_managed(tgid);
	r = rec_reserve(sizeof(*r));
	if (!r)
		return;
	r->type = UMT_REC_PROC_EXIT;
	r->pid = tgid;
	r->ts_ns = bpf_ktime_get_ns();
	bpf_probe_read_kernel_str(r->comm, sizeof(r->comm), task->group_leader->comm);
	bpf_ringbuf_submit(r, submit_flags());
}

/*
 * A thread that dies inside a GPU call still gets its record. The last
 * thread out takes the process's GPU memory with it: do_exit() has already
 * dropped signal->live to zero for it when this fires.
 */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(task_exit, struct task_struct *task)
{
	__u32 tgid = task->tgid;

	close_on(task, UMT_END_EXITED);
	if (BPF_CORE_READ(task, signal, live.counter))
		return 0;
	report_proc_exit(task, tgid);
	if (trace_conf.filter_pids)
		bpf_map_delete_elem(&traced_pids, &tgid);
	return 0;
}

/*
 * execve drops pending return probes: close the window here instead.
 * Linux 6.10+: exec is about to tear down the old image, and a window
 * closed here does not count the old address space's pages being freed.
 */
SEC("tp_btf/sched_prepare_exec")
int BPF_PROG(task_prepare_exec, struct task_struct *task, struct linux_binprm *bprm)
{
	close_on(task, UMT_END_EXECED);
	return 0;
}

/*
 * The old image is gone, and with it its CUDA context and everything the
 * driver allocated for it: to user space that is the old process's exit.
 */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(task_exec, struct task_struct *task)
{
	__u32 tgid = task->tgid;

	close_on(task, UMT_END_EXECED);
	report_proc_exit(task, tgid);
	guard_note_name(tgid, task->comm);
	return 0;
}

/*
 * Children of traced processes are traced too (only with
 * trace_conf.filter_pids).
 */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(task_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, ctgid = child->tgid;
	__u8 one = 1;

	if (ptgid == ctgid)
		return 0;
	if (!bpf_map_lookup_elem(&traced_pids, &ptgid))
		return 0;
	bpf_map_update_elem(&traced_pids, &ctgid, &one, BPF_ANY);
	return 0;
}
