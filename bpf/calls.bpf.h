/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The end of a GPU call's window, wherever it comes: at the call's return
 * (calls.bpf.c), or at its thread's exit or exec (lifetime.bpf.c).
 */
#ifndef UMTRACE_CALLS_BPF_H
#define UMTRACE_CALLS_BPF_H

#include "guard.bpf.h"
#include "managed.bpf.h"
#include "torch.bpf.h"

static __always_inline __u64 read_user_handle(__u64 uptr, bool narrow)
{
	__u64 v = 0;
	__u32 v32 = 0;

	if (!uptr)
		return 0;
	if (narrow) {
		bpf_probe_read_user(&v32, sizeof(v32), (void *)uptr);
		return v32;
	}
	bpf_probe_read_user(&v, sizeof(v), (void *)uptr);
	return v;
}

/* Close the thread's outermost window and send its record. */
static __always_inline void close_window(struct window *w, __u32 end, __s32 ret)
{
	struct umt_call_rec *r;
	__u64 id = bpf_get_current_pid_tgid();

	__u64 handle = w->handle, faulted = 0, now = bpf_ktime_get_ns();
	bool ok = end == UMT_END_RETURNED && ret == 0;
	bool wake = ok && torch_cue(now);

	w->depth = 0;
	__sync_fetch_and_add(&trace_state.open_windows, -1);
	guard_release(&w->reserved);
	if (ok && w->out_ptr)
		handle = read_user_handle(w->out_ptr, w->cookie & UMT_CK_HANDLE32);
	/* Kept whether or not the record finds room in the ring buffer. */
	if (track_managed && ok && (w->cookie & UMT_CK_MANAGED))
		managed_register(id >> 32, handle, w->size, 0);
	/* A free the driver failed leaves the allocation as it was. */
	if (w->freed_size && end == UMT_END_RETURNED && ret)
		managed_register(id >> 32, w->handle, w->freed_size, w->freed_pages);
	else if (ok)
		faulted = w->freed_pages;

	r = rec_reserve(sizeof(*r));
	if (!r)
		return;
	r->type = UMT_REC_CALL;
	r->api = UMT_CK_API(w->cookie);
	r->ts_ns = w->ts_ns;
	r->duration_ns = now - w->ts_ns;
	r->pid = id >> 32;
	r->tid = (__u32)id;
	r->size = w->size;
	r->flags = w->flags;
	r->handle = handle;
	r->faulted_pages = faulted;
	r->device_pages = w->device_pages;
	r->aux = w->aux;
	r->ret = ret;
	r->end = end;
	r->pages_taken = w->pages_taken;
	r->pages_freed = w->pages_freed;
	r->is_free = !!(w->cookie & UMT_CK_FREE);
	r->stack_len = w->stack_len;
	__builtin_memcpy(r->comm, w->comm, sizeof(r->comm));
	__builtin_memcpy(r->pcomm, w->pcomm, sizeof(r->pcomm));
	__builtin_memcpy(r->stack, w->stack, sizeof(r->stack));
	bpf_ringbuf_submit(r, wake ? BPF_RB_FORCE_WAKEUP : submit_flags());
}

#endif /* UMTRACE_CALLS_BPF_H */
