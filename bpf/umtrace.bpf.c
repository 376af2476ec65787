// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Charge host pages to the GPU allocation call that took them.
 *
 * A uprobe at a libcuda entry point opens a window in the calling thread's
 * task-local storage; the matching uretprobe closes it and sends one record.
 * In between, every page the thread allocates or frees is counted in the
 * window. Nothing crosses the ring buffer per page.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "umtrace.h"
#include "ctx.bpf.h"

#define READ_ONCE(x) (*(const volatile typeof(x) *)&(x))
/* The smallest page size of x86 and arm64: user stacks end at its multiples. */
#define UMT_PAGE_MIN 4096

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by user space before load. */
const volatile bool filter_pids = false;
const volatile bool count_proc_pages = false;
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
/*
 * Wake the reader only once this much is waiting (0: every record). The
 * reader polls with a timeout anyway; a wake-up per record cost more CPU
 * than everything else umtrace does per call.
 */
const volatile __u64 wakeup_bytes = 0;
/*
 * Count the pages processes that made GPU calls take outside them: a hash
 * lookup on every page the host allocates, so only top asks for it.
 */
const volatile bool count_outside = false;
/*
 * Leave out the pages freed while a softirq runs (softirq_entry/exit
 * keep a per-CPU mark): they belong to whatever it serves, an RCU callback
 * freeing another process's page tables or a network buffer, never to the
 * task it interrupted. Two more programs on every softirq of the host, so
 * the guard, which decides on allocations alone, goes without.
 */
const volatile bool skip_softirq_frees = false;
/*
 * Index managed ranges and charge CPU faults to them (--managed-faults).
 * Off, the code that needs bpf_loop (5.17) is dead and never verified, so
 * older kernels load the rest.
 */
const volatile bool track_managed = false;

/*
 * NUMA nodes whose memory is not host RAM (a GPU's HBM onlined as a node
 * on GH200), a bit a node, and where page flags keep the node number;
 * both from user space (user/lib/numa.c). With no such node no page pays for
 * the test.
 */
const volatile bool any_device_node = false;
const volatile __u32 node_flags_shift = 0;
const volatile __u64 device_nodes[UMT_MAX_NODES / 64] = {};

/*
 * Windows open right now, host-wide. The page hooks read it first so that
 * a host with no GPU call in flight pays one load per page and nothing
 * more. Written only at GPU call entry and exit.
 */
__s64 open_windows;

/*
 * Threads of GPU processes inside memory compaction right now, host-wide
 * (compaction_begin/end): the page free hook's gate for looking further.
 */
__s64 compacting_tasks;

/* Counters for user space; none of them is touched per page. */
__u64 rec_total;
__u64 rec_dropped;
__u64 storage_failed;
__u64 ustack_skipped;	/* calls sent without their raw stack: buffer busy */

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

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct window);
} windows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);	/* user space may resize */
} events SEC(".maps");

/* 1 while this CPU serves a softirq (skip_softirq_frees). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} in_softirq SEC(".maps");

/* Processes in scope when filter_pids is set (tgid -> 1). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u8);
} traced_pids SEC(".maps");

/*
 * Managed memory gets its pages on CPU faults after the call. Each live
 * managed allocation is found by 2 MiB chunk of its address range; the
 * fault hook marks the faulting thread, and the thread's next user data
 * page is charged to the allocation.
 */
#define MANAGED_CHUNK_SHIFT 21
#define MANAGED_MAX_CHUNKS 4096		/* 8 GiB indexed per allocation */

/*
 * The allocations a 2 MiB chunk belongs to: two, so that one ending and
 * the next starting inside the same chunk are both found. A third small
 * one sharing the chunk goes unindexed.
 */
struct managed_chunk {
	__u64 base[2];
};

/*
 * Plain hashes: an LRU hash may evict entries long before it is full (its
 * free lists are per CPU), which lost whole chunks of ranges here.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct umt_managed_key);
	__type(value, struct managed_chunk);
} managed_chunks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct umt_managed_key);
	__type(value, struct umt_managed_alloc);
} managed_allocs SEC(".maps");

__s64 managed_live;	/* live managed allocations: the fault hook's gate */
__s64 faults_pending;	/* threads with a managed fault not yet charged */

/*
 * Processes that made a GPU call: their exit is reported, and with
 * count_outside the host pages they take and free outside GPU calls.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct umt_gpu_proc);
} gpu_procs SEC(".maps");

struct proc_pages {
	__u64 alloc;
	__u64 freed;
	char comm[TASK_COMM_LEN];	/* kept: the process may be gone when read */
};

/* Host pages per process, only loaded when there is no libcuda to probe. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct proc_pages);
} proc_pages SEC(".maps");

#include "guard.bpf.h"
#include "kthreads.bpf.h"

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

static __always_inline __u64 arg_of(const struct window *args, unsigned int i)
{
	if (i >= 5)
		return 0;
	return args->args[i];
}

static __always_inline bool pid_in_scope(__u32 tgid)
{
	if (!filter_pids)
		return true;
	return bpf_map_lookup_elem(&traced_pids, &tgid) != NULL;
}

static __always_inline __u64 submit_flags(void)
{
	if (!wakeup_bytes)
		return 0;
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes)
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

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

struct chunk_ctx {
	struct umt_managed_key k;
	__u64 first;		/* chunk number of the allocation's base */
	__u64 base;
	bool add;
};

static void chunk_add(struct umt_managed_key *k, __u64 base)
{
	struct managed_chunk *c, fresh = { .base = { base, 0 } };

	c = bpf_map_lookup_elem(&managed_chunks, k);
	if (!c) {
		if (!bpf_map_update_elem(&managed_chunks, k, &fresh, BPF_NOEXIST))
			return;
		/* Another thread indexed the same chunk first. */
		c = bpf_map_lookup_elem(&managed_chunks, k);
		if (!c)
			return;
	}
	if (!c->base[0])
		c->base[0] = base;
	else if (!c->base[1])
		c->base[1] = base;
}

static void chunk_remove(struct umt_managed_key *k, __u64 base)
{
	struct managed_chunk *c = bpf_map_lookup_elem(&managed_chunks, k);

	if (!c)
		return;
	if (c->base[0] == base)
		c->base[0] = 0;
	if (c->base[1] == base)
		c->base[1] = 0;
	if (!c->base[0] && !c->base[1])
		bpf_map_delete_elem(&managed_chunks, k);
}

/* One 2 MiB chunk of a managed range in or out of the index. */
static long chunk_step(__u32 i, struct chunk_ctx *c)
{
	c->k.addr = c->first + i;
	if (c->add)
		chunk_add(&c->k, c->base);
	else
		chunk_remove(&c->k, c->base);
	return 0;
}

/* bpf_loop: a range of thousands of chunks would be too much to unroll. */
static __always_inline void index_chunks(__u32 tgid, __u64 base, __u64 size, bool add)
{
	struct chunk_ctx c = {
		.k = { .tgid = tgid },
		.first = base >> MANAGED_CHUNK_SHIFT,
		.base = base,
		.add = add,
	};
	__u64 n = ((base + size - 1) >> MANAGED_CHUNK_SHIFT) - c.first + 1;

	bpf_loop(n < MANAGED_MAX_CHUNKS ? n : MANAGED_MAX_CHUNKS, chunk_step, &c, 0);
}

static __always_inline void managed_register(__u32 tgid, __u64 base, __u64 size)
{
	struct umt_managed_key k = { .tgid = tgid, .addr = base };
	struct umt_managed_alloc a = { .size = size };

	if (!base || !size)
		return;
	bpf_map_update_elem(&managed_allocs, &k, &a, BPF_ANY);
	index_chunks(tgid, base, size, true);
	__sync_fetch_and_add(&managed_live, 1);
}

/* A free of a managed allocation: forget it, return its faulted pages. */
static __always_inline __u64 managed_unregister(__u32 tgid, __u64 base)
{
	struct umt_managed_key k = { .tgid = tgid, .addr = base };
	struct umt_managed_alloc *a;
	__u64 pages, size;

	a = bpf_map_lookup_elem(&managed_allocs, &k);
	if (!a)
		return 0;
	pages = a->pages;
	size = a->size;
	bpf_map_delete_elem(&managed_allocs, &k);
	index_chunks(tgid, base, size, false);
	__sync_fetch_and_add(&managed_live, -1);
	return pages;
}

/* Close the thread's outermost window and send its record. */
static __always_inline void close_window(struct window *w, __u32 end, __s32 ret)
{
	struct umt_call_rec *r;
	__u64 id = bpf_get_current_pid_tgid();

	__u64 handle = w->handle, faulted = 0;
	bool ok = end == UMT_END_RETURNED && ret == 0;

	w->depth = 0;
	__sync_fetch_and_add(&open_windows, -1);
	guard_release(&w->reserved);
	__sync_fetch_and_add(&rec_total, 1);
	if (ok && w->out_ptr)
		handle = read_user_handle(w->out_ptr, w->cookie & UMT_CK_HANDLE32);
	/* Kept whether or not the record finds room in the ring buffer. */
	if (track_managed && ok && (w->cookie & UMT_CK_MANAGED))
		managed_register(id >> 32, handle, w->size);
	if (track_managed && ok && (w->cookie & UMT_CK_FREE) && READ_ONCE(managed_live))
		faulted = managed_unregister(id >> 32, handle);

	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		__sync_fetch_and_add(&rec_dropped, 1);
		return;
	}
	r->type = UMT_REC_CALL;
	r->api = UMT_CK_API(w->cookie);
	r->ts_ns = w->ts_ns;
	r->duration_ns = bpf_ktime_get_ns() - w->ts_ns;
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
	bpf_ringbuf_submit(r, submit_flags());
}

static __always_inline void fill_args(struct window *w, struct pt_regs *ctx,
				      __u64 ck)
{
	unsigned int i;

	load_args(w, ctx);
	w->out_ptr = 0;
	w->handle = 0;
	w->size = 0;
	w->flags = 0;
	w->aux = 0;
	i = UMT_CK_OUT(ck);
	if (i != UMT_ARG_NONE)
		w->out_ptr = arg_of(w, i);
	i = UMT_CK_HANDLE(ck);
	if (i != UMT_ARG_NONE)
		w->handle = arg_of(w, i);
	i = UMT_CK_SIZE(ck);
	if (i != UMT_ARG_NONE)
		w->size = arg_of(w, i);
	if (ck & UMT_CK_SIZE32)
		w->size = (__u32)w->size;
	i = UMT_CK_SIZE2(ck);
	if (i != UMT_ARG_NONE)
		w->size *= (ck & UMT_CK_SIZE32) ? (__u32)arg_of(w, i) :
						   arg_of(w, i);
	i = UMT_CK_FLAGS(ck);
	if (i != UMT_ARG_NONE)
		w->flags = arg_of(w, i);
	i = UMT_CK_AUX(ck);
	if (i != UMT_ARG_NONE)
		w->aux = arg_of(w, i);
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
	for (i = UMT_STACK_MAX - 1; i > 1; i--)
		w->stack[i] = w->stack[i - 1];
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

	__sync_fetch_and_add(&rec_total, 1);
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		__sync_fetch_and_add(&rec_dropped, 1);
		return NULL;
	}
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

static __always_inline void note_gpu_proc(__u32 tgid)
{
	struct umt_gpu_proc zero = {};

	if (!bpf_map_lookup_elem(&gpu_procs, &tgid))
		bpf_map_update_elem(&gpu_procs, &tgid, &zero, BPF_NOEXIST);
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
	note_gpu_proc(task->tgid);
	w->cookie = ck;
	w->sp = sp;
	w->pages_taken = 0;
	w->device_pages = 0;
	w->pages_freed = 0;
	fill_args(w, ctx, ck);
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
	__sync_fetch_and_add(&open_windows, 1);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(gpu_call_return)
{
	struct window *w;

	w = bpf_task_storage_get(&windows, bpf_get_current_task_btf(), 0, 0);
	if (!w || !w->depth)
		return 0;
	if (w->depth > 1) {
		w->depth--;
		return 0;
	}
	close_window(w, UMT_END_RETURNED, (__s32)PT_REGS_RC(ctx));
	return 0;
}

static __always_inline bool serving_softirq(void)
{
	__u32 zero = 0, *mark;

	if (!skip_softirq_frees)
		return false;
	mark = bpf_map_lookup_elem(&in_softirq, &zero);
	return mark && *mark;
}

/* The window of the current thread, if a GPU call is in flight on it. */
static __always_inline struct window *current_window(void)
{
	struct window *w;

	if (!READ_ONCE(open_windows))
		return NULL;
	w = bpf_task_storage_get(&windows, bpf_get_current_task_btf(), 0, 0);
	if (!w || !w->depth)
		return NULL;
	return w;
}

/*
 * The thread faulted on managed memory: its next user data page (page
 * tables are not movable, user pages are) is that fault's page.
 */
static __always_inline void charge_fault(struct window *w, unsigned int order)
{
	struct umt_managed_key k = { .tgid = bpf_get_current_pid_tgid() >> 32 };
	struct umt_managed_alloc *a;

	k.addr = w->fault_base;
	w->fault_base = 0;
	__sync_fetch_and_add(&faults_pending, -1);
	a = bpf_map_lookup_elem(&managed_allocs, &k);
	if (a)
		__sync_fetch_and_add(&a->pages, 1ULL << order);
}

/*
 * page->flags is the word itself up to 6.16; 6.17 wrapped it in a struct
 * (memdesc_flags_t). Both flavours are read directly, the one the running
 * kernel has chosen at load: through bpf_probe_read_kernel() the guard's
 * mm_page_alloc took 160 ns a page here with a device node named, 87 read
 * directly; every page of a host with device nodes pays it.
 */
struct page___word {
	unsigned long flags;
} __attribute__((preserve_access_index));

struct memdesc_flags___umt {
	unsigned long f;
} __attribute__((preserve_access_index));

struct page___memdesc {
	struct memdesc_flags___umt flags;
} __attribute__((preserve_access_index));

static __always_inline __u64 page_flags(struct page *page)
{
	struct page___memdesc *pm = (void *)page;
	struct page___word *pw = (void *)page;

	if (bpf_core_field_exists(pm->flags.f))
		return pm->flags.f;
	return pw->flags;
}

static __always_inline bool on_device_node(struct page *page)
{
	__u64 nid;

	if (!any_device_node)
		return false;
	nid = page_flags(page) >> (node_flags_shift & 63);
	if (nid >= UMT_MAX_NODES)
		return false;
	return device_nodes[nid / 64] & (1ULL << (nid % 64));
}

static __always_inline void count_outside_call(__u64 pages, bool freed)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct umt_gpu_proc *p = bpf_map_lookup_elem(&gpu_procs, &tgid);

	if (!p)
		return;
	if (freed)
		__sync_fetch_and_add(&p->outside_freed, pages);
	else
		__sync_fetch_and_add(&p->outside_alloc, pages);
}

SEC("tp_btf/mm_page_alloc")
int BPF_PROG(page_alloc, struct page *page, unsigned int order, gfp_t gfp)
{
	bool busy = READ_ONCE(open_windows) || READ_ONCE(faults_pending);
	__u64 pages = 1ULL << order, unreserved = pages;
	struct window *w = NULL;
	bool device;

	if (!busy && !count_outside && !count_kthreads && !guard_on)
		return 0;
	if (!page)
		return 0;
	/* Device-node pages are never host memory: not the headroom's either. */
	device = on_device_node(page);
	if (!umt_gfp_from_task(gfp))
		goto guard;
	if (busy)
		w = bpf_task_storage_get(&windows, bpf_get_current_task_btf(), 0, 0);
	if (w && w->depth) {
		if (device) {
			w->device_pages += pages;
		} else {
			w->pages_taken += pages;
			unreserved = guard_draw(&w->reserved, &w->slack, pages);
		}
	} else if (device) {
		/* nothing: no host page */
	} else if (w && w->fault_base && (gfp & UMT_GFP_MOVABLE)) {
		charge_fault(w, order);
	} else if (count_kthreads && kthread_page(pages)) {
		/* counted under the kernel thread */
	} else if (count_outside) {
		count_outside_call(pages, false);
	}
guard:
	/* Every host page counts for the headroom, an interrupt's too. */
	if (!device)
		guard_page_alloc(pages, unreserved, gfp);
	return 0;
}

/* x86 only: arm64 has no tracepoint that gives a user fault's address. */
SEC("tp_btf/page_fault_user")
int BPF_PROG(managed_fault, unsigned long address)
{
	struct umt_managed_key k = { .tgid = bpf_get_current_pid_tgid() >> 32 };
	struct managed_chunk *chunk;
	struct umt_managed_alloc *a;
	struct window *w;

	if (!READ_ONCE(managed_live))
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
		__sync_fetch_and_add(&faults_pending, 1);
	w->fault_base = k.addr;
	return 0;
}

/*
 * Memory new to the page allocator: a block whose struct pages were
 * initialised just now, never allocated. With deferred struct page
 * initialisation done lazily (deferred_init=lazy: this VM's kernel), the
 * first allocation to find its zone short initialises whole sections
 * inside itself (deferred_grow_zone) and hands them to the allocator as
 * MAX_PAGE_ORDER frees in that task: a 64 MiB cuMemAlloc_v2 showed
 * HOST- 128M here. Memory hotplug's onlining does the same in whichever
 * task onlines. Those frees gave nothing back: they are no call's HOST-.
 * Nor do they move the guard's figure: that kernel's MemFree and
 * MemAvailable count the pages still to initialise, so counting them
 * left the headroom high by all that was initialised since the last
 * sample (256 MiB in one 512 MiB burst here). Hotplugged memory does add
 * to MemFree: there the figure stays low, the safe side, until the next
 * sample. Such a block's head page still has the list head that
 * __init_single_page() pointed at itself; a page that came out of the
 * allocator has it poisoned (list_del) or reused. Only big frees are
 * looked at (page-table pages freed at order 0 can look the same): one
 * compare a free, and for those a load from the struct page line the
 * kernel has just read.
 */
#define UMT_NEW_MIN_ORDER	9

static __always_inline bool new_to_allocator(struct page *page, unsigned int order)
{
	if (order < UMT_NEW_MIN_ORDER)
		return false;
	return (unsigned long)page->lru.next == (unsigned long)&page->lru;
}

/*
 * A thread in compaction (direct compaction in an allocation, or a write
 * to /proc/sys/vm/compact_memory) frees the pages it migrated: other
 * processes' pages as often as its own, whose copies it took from free
 * pages it isolated, with no mm_page_alloc. Not the thread's frees.
 */
static __always_inline bool compacting(struct window *w)
{
	if (!READ_ONCE(compacting_tasks))
		return false;
	if (!w)
		w = bpf_task_storage_get(&windows, bpf_get_current_task_btf(), 0, 0);
	return w && w->compacting;
}

/*
 * Every free passes free_pages_prepare(), which fires mm_page_free; the
 * batched path fires mm_page_free_batched on top of it, so counting that
 * too would count batched pages twice.
 */
SEC("tp_btf/mm_page_free")
int BPF_PROG(page_free, struct page *page, unsigned int order)
{
	struct window *w;

	if (on_device_node(page) || new_to_allocator(page, order))
		return 0;
	guard_page_free(1ULL << order);
	w = current_window();
	if (!w && !count_outside)
		return 0;
	if (serving_softirq() || compacting(w))
		return 0;
	if (w)
		w->pages_freed += 1ULL << order;
	else
		count_outside_call(1ULL << order, true);
	return 0;
}

/*
 * One zone's compaction in the current task, begin to end. Only GPU
 * processes' threads are marked (those with a window's storage). A depth,
 * not a flag: an allocation inside compaction could compact in turn.
 */
SEC("tp_btf/mm_compaction_begin")
int BPF_PROG(compaction_begin)
{
	struct window *w;

	w = bpf_task_storage_get(&windows, bpf_get_current_task_btf(), 0, 0);
	if (w && !w->compacting++)
		__sync_fetch_and_add(&compacting_tasks, 1);
	return 0;
}

/* An end whose begin came before umtrace attached finds a depth of 0. */
SEC("tp_btf/mm_compaction_end")
int BPF_PROG(compaction_end)
{
	struct window *w;

	w = bpf_task_storage_get(&windows, bpf_get_current_task_btf(), 0, 0);
	if (w && w->compacting && !--w->compacting)
		__sync_fetch_and_add(&compacting_tasks, -1);
	return 0;
}

/*
 * Compaction took nr_taken free pages off the free lists (as alloc_contig
 * does for its range): the pages it migrates into come from them, with no
 * mm_page_alloc, while the pages it migrated out, and those it did not
 * need, go back through mm_page_free. Counting these as allocated keeps
 * the guard's figure balanced; without them every compaction, kcompactd's
 * included, left the headroom high by all it isolated (151 MiB for one
 * compaction that moved 136 MiB here; under 2 MiB with them).
 */
SEC("tp_btf/mm_compaction_isolate_freepages")
int BPF_PROG(compaction_isolate, unsigned long start_pfn, unsigned long end_pfn,
	     unsigned long nr_scanned, unsigned long nr_taken)
{
	guard_page_isolated(nr_taken);
	return 0;
}

/*
 * Since 6.5 (before, fast isolation has no tracepoint, and its pages go
 * uncounted): not loaded unless user space asks, when the kernel has it.
 */
SEC("?tp_btf/mm_compaction_fast_isolate_freepages")
int BPF_PROG(compaction_fast_isolate, unsigned long start_pfn, unsigned long end_pfn,
	     unsigned long nr_scanned, unsigned long nr_taken)
{
	guard_page_isolated(nr_taken);
	return 0;
}

static __always_inline void mark_softirq(__u32 on)
{
	__u32 zero = 0, *mark = bpf_map_lookup_elem(&in_softirq, &zero);

	if (mark)
		*mark = on;
}

/* Softirqs do not nest on a CPU: a flag, not a depth. */
SEC("tp_btf/softirq_entry")
int BPF_PROG(softirq_entry, unsigned int vec)
{
	mark_softirq(1);
	return 0;
}

SEC("tp_btf/softirq_exit")
int BPF_PROG(softirq_exit, unsigned int vec)
{
	mark_softirq(0);
	return 0;
}

/*
 * A kernel thread changed a process's resident-set counters: the pages it
 * took since it last did were for that process (count_kthreads only: this
 * fires at every change of every process's counters).
 */
SEC("tp_btf/rss_stat")
int BPF_PROG(rss_stat, struct mm_struct *mm, int member)
{
	struct task_struct *task = bpf_get_current_task_btf();

	if (mm && is_kthread(task))
		kthread_named(task, mm);
	return 0;
}

/*
 * Direct reclaim: the allocating task itself reclaims, so it is current.
 * On unified memory the driver's pages cannot be reclaimed, so a GPU job
 * reclaiming under LOW is a job about to take the host down.
 */
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

static __always_inline void close_on(struct task_struct *task, __u32 end)
{
	struct window *w;

	if (!READ_ONCE(open_windows) && !READ_ONCE(faults_pending))
		return;
	w = bpf_task_storage_get(&windows, task, 0, 0);
	if (!w)
		return;
	if (w->fault_base) {
		w->fault_base = 0;
		__sync_fetch_and_add(&faults_pending, -1);
	}
	if (w->depth)
		close_window(w, end, 0);
}

/*
 * Callbacks change nothing in their context: the verifier walks callback
 * iterations until their states converge, and a counter there never does.
 */
static long forget_managed_alloc(struct bpf_map *map, struct umt_managed_key *k,
				 void *value, __u32 *tgid)
{
	if (k->tgid == *tgid && !bpf_map_delete_elem(map, k))
		__sync_fetch_and_add(&managed_live, -1);
	return 0;
}

static long forget_managed_chunk(struct bpf_map *map, struct umt_managed_key *k,
				 void *value, __u32 *tgid)
{
	if (k->tgid == *tgid)
		bpf_map_delete_elem(map, k);
	return 0;
}

/* Managed memory the process never freed goes with it. */
static __always_inline void forget_managed(__u32 tgid)
{
	if (!track_managed || !READ_ONCE(managed_live))
		return;
	bpf_for_each_map_elem(&managed_allocs, forget_managed_alloc, &tgid, 0);
	bpf_for_each_map_elem(&managed_chunks, forget_managed_chunk, &tgid, 0);
}

static __always_inline void report_proc_exit(struct task_struct *task, __u32 tgid)
{
	struct umt_proc_exit_rec *r;

	if (bpf_map_delete_elem(&gpu_procs, &tgid))
		return;	/* made no GPU call */
	forget_managed(tgid);
	__sync_fetch_and_add(&rec_total, 1);
	r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
	if (!r) {
		__sync_fetch_and_add(&rec_dropped, 1);
		return;
	}
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
	if (filter_pids)
		bpf_map_delete_elem(&traced_pids, &tgid);
	return 0;
}

/* execve drops pending return probes: close the window here instead. */
/*
 * Linux 6.10+: exec is about to tear down the old image. A window closed
 * here does not count the old address space's pages being freed.
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
	struct proc_pages *pp;

	close_on(task, UMT_END_EXECED);
	report_proc_exit(task, tgid);
	guard_note_name(tgid, task->comm);
	if (!count_proc_pages)
		return 0;
	/* The comm seen at the first page is the parent's, before exec. */
	pp = bpf_map_lookup_elem(&proc_pages, &tgid);
	if (pp)
		bpf_get_current_comm(pp->comm, sizeof(pp->comm));
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

/* Children of traced processes are traced too (only with filter_pids). */
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

static __always_inline struct proc_pages *proc_pages_of_current(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct proc_pages zero = {}, *pp;

	if (!pid_in_scope(tgid))
		return NULL;
	pp = bpf_map_lookup_elem(&proc_pages, &tgid);
	if (pp)
		return pp;
	bpf_get_current_comm(zero.comm, sizeof(zero.comm));
	bpf_map_update_elem(&proc_pages, &tgid, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&proc_pages, &tgid);
}

/* Fallback with no libcuda to probe: host pages per process. */
SEC("tp_btf/mm_page_alloc")
int BPF_PROG(proc_page_alloc, struct page *page, unsigned int order, gfp_t gfp)
{
	struct proc_pages *pp;

	if (!page || !umt_gfp_from_task(gfp))
		return 0;
	pp = proc_pages_of_current();
	if (pp)
		__sync_fetch_and_add(&pp->alloc, 1ULL << order);
	return 0;
}

SEC("tp_btf/mm_page_free")
int BPF_PROG(proc_page_free, struct page *page, unsigned int order)
{
	struct proc_pages *pp;

	if (serving_softirq() || new_to_allocator(page, order))
		return 0;
	pp = proc_pages_of_current();
	if (pp)
		__sync_fetch_and_add(&pp->freed, 1ULL << order);
	return 0;
}
