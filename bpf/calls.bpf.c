// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Charge host pages to the GPU allocation call that took them.
 *
 * A uprobe at a libcuda entry point opens a window in the calling thread's
 * task-local storage; the matching uretprobe closes it and sends one record.
 * In between, every page the thread allocates or frees is counted in the
 * window (pages.bpf.c). Nothing crosses the ring buffer per page. A thread
 * that exits or execs inside a call closes its window there
 * (lifetime.bpf.c).
 */
#include "calls.bpf.h"
#include "kthreads.bpf.h"

/* The smallest page size of x86 and arm64: user stacks end at its multiples. */
#define UMT_PAGE_MIN 4096

/*
 * Bytes of raw user stack sent at each outermost GPU call's entry for
 * DWARF unwinding: 0 (off) to UMT_USTACK_MAX.
 */
const volatile __u32 ustack_bytes = 0;
/*
 * Raw stacks are 8 KiB a call: past this much data waiting in the ring
 * buffer, calls go with their frame-pointer stack only, so that a storm
 * of calls fills it with stacks no faster than it is read and never makes
 * a call record itself be lost.
 */
const volatile __u64 ustack_max_backlog = 0;

__u64 storage_failed;	/* calls not seen: no task storage */
__u64 ustack_skipped;	/* calls sent without their raw stack: buffer busy */

/*
 * The context may only be read at constant offsets, so the five argument
 * registers are copied once into the window (a map value, which may be
 * indexed) and picked from there.
 */
static __always_inline void load_args(struct window *args, struct pt_regs *ctx)
{
	args->args[0] = PT_REGS_PARM1(ctx);
	args->args[1] = PT_REGS_PARM2(ctx);
	args->args[2] = PT_REGS_PARM3(ctx);
	args->args[3] = PT_REGS_PARM4(ctx);
	args->args[4] = PT_REGS_PARM5(ctx);
}

_Static_assert(UMT_ARG_NONE >= 5, "UMT_ARG_NONE must name no register");

/* Argument i, or 0 past the five registers (UMT_ARG_NONE among them). */
static __always_inline __u64 arg_of(const struct window *args, unsigned int i)
{
	if (i >= 5)
		return 0;
	return args->args[i];
}

static __always_inline void fill_args(struct window *w, struct pt_regs *ctx,
				      __u64 ck)
{
	unsigned int i;

	load_args(w, ctx);
	/* An argument not present (UMT_ARG_NONE) reads as 0: see arg_of. */
	w->out_ptr = arg_of(w, UMT_CK_OUT(ck));
	w->handle = arg_of(w, UMT_CK_HANDLE(ck));
	w->size = arg_of(w, UMT_CK_SIZE(ck));
	if (ck & UMT_CK_SIZE32)
		w->size = (__u32)w->size;
	/* A second size factor: absent, it is not a factor of 0. */
	i = UMT_CK_SIZE2(ck);
	if (i != UMT_ARG_NONE)
		w->size *= (ck & UMT_CK_SIZE32) ? (__u32)arg_of(w, i) :
						   arg_of(w, i);
	w->flags = arg_of(w, UMT_CK_FLAGS(ck));
	w->aux = arg_of(w, UMT_CK_AUX(ck));
	if (ck & UMT_CK_HANDLE32)
		w->handle = (__u32)w->handle;
}

/*
 * At a function's first instruction its return address is not yet in a
 * frame, so the frame-pointer walk from the probed instruction skips the
 * direct caller. Kernels since 6.13 put it back themselves for uprobes;
 * older ones do not: insert it when it is missing.
 */
static __always_inline void capture_stack(struct window *w, struct pt_regs *ctx)
{
	__u64 ra = umt_entry_return_addr(ctx);
	long n;
	int i;

	n = bpf_get_stack(ctx, w->stack, sizeof(w->stack), BPF_F_USER_STACK);
	if (n <= 0) {
		w->stack[0] = PT_REGS_IP(ctx);
		w->stack[1] = ra;
		w->stack_len = 2 * sizeof(w->stack[0]);
		return;
	}
	w->stack_len = n;
	if (n >= 2 * sizeof(w->stack[0]) && w->stack[1] == ra)
		return;
	/*
	 * One slot at a time: as a memmove clang loads every slot into a
	 * stack temporary first, 500 of the program's 512 bytes of stack.
	 */
#pragma clang loop unroll(disable)
	for (i = UMT_STACK_MAX - 1; i > 1; i--) {
		__u64 v = w->stack[i - 1];

		barrier_var(v);
		w->stack[i] = v;
	}
	w->stack[1] = ra;
	if (n < sizeof(w->stack))
		w->stack_len = n + sizeof(w->stack[0]);
}

/*
 * Copy up to ustack_bytes of user stack from sp up into buf; returns the
 * bytes copied. The stack may end sooner: the top of the main thread's
 * stack is a few KiB above main, and a thread's runs into its TLS and
 * then whatever is mapped next. A read that crosses the end fails whole
 * and leaves nothing, so find the end first: readability changes only at
 * page boundaries, and one byte read at each boundary above sp says
 * whether the page from there on is there (4 KiB steps: right for larger
 * pages too). At most one probe faults; then one read copies it all.
 */
static __always_inline __u32 copy_user_stack(__u8 *buf, __u64 sp)
{
	__u64 next = (sp | (UMT_PAGE_MIN - 1)) + 1;	/* first boundary above sp */
	__u64 want = ustack_bytes, len = next - sp;	/* 64-bit: see below */
	__u8 probe;
	int i;

	for (i = 0; i < UMT_USTACK_MAX / UMT_PAGE_MIN; i++) {
		if (len >= want)
			break;
		if (bpf_probe_read_user(&probe, sizeof(probe),
					(void *)(next + i * UMT_PAGE_MIN)))
			break;
		len += UMT_PAGE_MIN;
	}
	if (len > want)
		len = want;
	/*
	 * want is bounded already, but the verifier must see it on the very
	 * register passed as the size: compared as 32 bits, clang checks a
	 * zero-extended copy and passes the original.
	 */
	if (len > UMT_USTACK_MAX)
		len = UMT_USTACK_MAX;
	if (bpf_probe_read_user(buf, len, (void *)sp))
		return 0;
	return len;
}

/*
 * Reserve and fill the call's raw stack record, all but its ts_ns: the
 * caller stamps that once the copy is done, so the copy's cost stays out
 * of the call's duration. Reserved in place: 8 KiB is not copied twice.
 */
static __always_inline struct umt_ustack_rec *ustack_reserve(struct pt_regs *ctx,
							     __u64 id)
{
	struct umt_ustack_rec *r;

	r = rec_reserve(sizeof(*r));
	if (!r)
		return NULL;
	r->type = UMT_REC_USTACK;
	r->pid = id >> 32;
	r->tid = (__u32)id;
	r->machine = UMT_EM_MACHINE;
	r->nregs = umt_user_regs(ctx, r->regs);
	r->pc = PT_REGS_IP(ctx);
	r->sp = PT_REGS_SP(ctx);
	r->pad = 0;
	r->stack_len = copy_user_stack(r->stack, r->sp);
	return r;
}

static __always_inline void note_gpu_proc(struct task_struct *task, __u32 tgid)
{
	struct umt_gpu_proc zero = {};

	if (bpf_map_lookup_elem(&gpu_procs, &tgid))
		return;
	bpf_map_update_elem(&gpu_procs, &tgid, &zero, BPF_NOEXIST);
	/* once a process: kernel threads may charge its memory cgroup */
	if (count_kthreads)
		kthread_job_seen(task, tgid);
}

SEC("uprobe")
int BPF_KPROBE(gpu_call_entry)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 ck = bpf_get_attach_cookie(ctx);
	__u64 sp = PT_REGS_SP(ctx);
	struct umt_ustack_rec *us = NULL;
	struct window *w;

	if (!pid_in_scope(task->tgid))
		return 0;
	w = bpf_task_storage_get(&windows, task, 0,
				 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!w) {
		__sync_fetch_and_add(&storage_failed, 1);
		return 0;
	}
	if (w->depth) {
		/* Deeper on the stack: libcuda calling its own entry point. */
		if (sp < w->sp) {
			w->depth++;
			return 0;
		}
		/* Not deeper: the open call returned without its probe. */
		close_window(w, UMT_END_LOST_RETURN, 0);
	}
	note_gpu_proc(task, task->tgid);
	w->cookie = ck;
	w->sp = sp;
	w->pages_taken = 0;
	w->device_pages = 0;
	w->pages_freed = 0;
	fill_args(w, ctx, ck);
	managed_unregister(w, task->tgid);
	w->reserved = guard_admit(ck, w->size);
	w->slack = guard_slack(w->reserved);
	bpf_get_current_comm(w->comm, sizeof(w->comm));
	bpf_probe_read_kernel_str(w->pcomm, sizeof(w->pcomm), task->group_leader->comm);
	capture_stack(w, ctx);
	if (ustack_bytes) {
		if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) < ustack_max_backlog)
			us = ustack_reserve(ctx, bpf_get_current_pid_tgid());
		else
			__sync_fetch_and_add(&ustack_skipped, 1);
	}
	w->ts_ns = bpf_ktime_get_ns();
	if (us) {
		us->ts_ns = w->ts_ns;
		bpf_ringbuf_submit(us, submit_flags());
	}
	w->depth = 1;
	__sync_fetch_and_add(&trace_state.open_windows, 1);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(gpu_call_return)
{
	struct window *w = thread_window();

	if (!w || !w->depth)
		return 0;
	if (w->depth > 1) {
		w->depth--;
		return 0;
	}
	close_window(w, UMT_END_RETURNED, (__s32)PT_REGS_RC(ctx));
	return 0;
}
