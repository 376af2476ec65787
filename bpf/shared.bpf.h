/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What every program file of the umtrace object uses. The .bpf.c files
 * of bpf/ (but libcuda_scan's, an object of its own) are compiled apart and
 * linked into one object by bpftool gen object, one skeleton: a map or a
 * global is defined in one file and declared extern once, in that file's header.
 * These are shared.bpf.c's: the thread's window of an open GPU call, the
 * ring buffer, the processes that made GPU calls, the pid filter, and the
 * counters user space reads.
 */
#ifndef UMTRACE_SHARED_BPF_H
#define UMTRACE_SHARED_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "umtrace.h"
#include "cookie.h"
#include "ctx.bpf.h"

#define READ_ONCE(x) (*(const volatile typeof(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile typeof(x) *)&(x) = (v))

/* The settings and figures every file reads (umtrace.h describes them). */
extern const volatile struct umt_trace_conf trace_conf;
extern struct umt_trace_state trace_state;

/* A GPU call in flight on a thread: its task-local storage. */
struct window {
	__u64 cookie;
	__u64 ts_ns;
	__u64 sp;		/* user stack pointer at entry */
	__u64 out_ptr;		/* where the call writes its result */
	__u64 size;
	__u64 flags;
	__u64 handle;
	__u64 aux;
	__u64 pages_taken;
	__u64 pages_freed;
	__u64 args[5];		/* argument registers at entry */
	__u64 fault_base;	/* managed allocation the last CPU fault hit, 0: none */
	__u64 freed_size;	/* a free's managed allocation, taken out at entry */
	__u64 freed_pages;	/* and the pages its CPU faults took */
	__s64 reserved;		/* guard: pages admitted and not yet taken */
	__s64 slack;		/* guard: pages past them not stopped on */
	__u64 device_pages;	/* taken on device nodes, not host RAM */
	__u32 depth;		/* > 1 while libcuda calls itself */
	__u32 stack_len;
	__u32 compacting;	/* compactions in progress in the thread: its
				 * frees meanwhile are not its own */
	char comm[TASK_COMM_LEN];
	char pcomm[TASK_COMM_LEN];
	__u64 stack[UMT_STACK_MAX];
};

struct windows_map {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct window);
};
extern struct windows_map windows SEC(".maps");

struct events_map {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);	/* user space may resize */
};
extern struct events_map events SEC(".maps");

/*
 * A hash map's type, declared once in the header of its part for the
 * program that defines it (NAME SEC(".maps"), in its .bpf.c) and those
 * that use it.
 */
#define UMT_MAP_TYPE(name, map_type, max, key_t, value_t)	\
	struct name##_map {					\
		__uint(type, map_type);				\
		__uint(max_entries, max);			\
		__type(key, key_t);				\
		__type(value, value_t);				\
	}

/* Processes in scope when trace_conf.filter_pids is set (tgid -> 1). */
UMT_MAP_TYPE(traced_pids, BPF_MAP_TYPE_HASH, 8192, __u32, __u8);
extern struct traced_pids_map traced_pids SEC(".maps");

/*
 * Processes that made a GPU call: their exit is reported, and with
 * count_outside the host pages they take and free outside GPU calls.
 */
UMT_MAP_TYPE(gpu_procs, BPF_MAP_TYPE_HASH, 16384, __u32, struct umt_gpu_proc);
extern struct gpu_procs_map gpu_procs SEC(".maps");

static __always_inline bool pid_in_scope(__u32 tgid)
{
	if (!trace_conf.filter_pids)
		return true;
	return bpf_map_lookup_elem(&traced_pids, &tgid) != NULL;
}

static __always_inline __u64 submit_flags(void)
{
	if (!trace_conf.wakeup_bytes)
		return 0;
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= trace_conf.wakeup_bytes)
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

/* Room for a record, counted; NULL (counted as dropped) when full. */
static __always_inline void *rec_reserve(__u64 size)
{
	void *r;

	__sync_fetch_and_add(&trace_state.rec_total, 1);
	r = bpf_ringbuf_reserve(&events, size, 0);
	if (!r)
		__sync_fetch_and_add(&trace_state.rec_dropped, 1);
	return r;
}

/* The current thread's window storage, open or not; NULL: it has none. */
static __always_inline struct window *thread_window(void)
{
	return bpf_task_storage_get(&windows, bpf_get_current_task_btf(), 0, 0);
}

/* The window of the current thread, if a GPU call is in flight on it. */
static __always_inline struct window *current_window(void)
{
	struct window *w;

	if (!READ_ONCE(trace_state.open_windows))
		return NULL;
	w = thread_window();
	if (!w || !w->depth)
		return NULL;
	return w;
}

#endif /* UMTRACE_SHARED_BPF_H */
