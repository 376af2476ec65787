/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Record layouts shared by the BPF programs and user space.
 * Fixed-width types only: this header is included on both sides of the
 * ring buffer and, later, written to recordings as is.
 */
#ifndef UMTRACE_H
#define UMTRACE_H

#ifndef TASK_COMM_LEN
#define TASK_COMM_LEN 16
#endif

/* User stack frames kept per GPU call (frame-pointer walk at entry). */
#define UMT_STACK_MAX 64

/*
 * Raw user stack sent at a GPU call's entry for DWARF unwinding in user
 * space: at most this many bytes from the stack pointer up.
 */
#define UMT_USTACK_MAX		8192
/* Registers in DWARF numbering: x86-64 uses 17 (rax..r15, rip), arm64 32. */
#define UMT_USTACK_REGS		32

/* NUMA nodes the kernel side can tell apart (the kernel's limit, 1 << 10). */
#define UMT_MAX_NODES		1024
/*
 * Ranges of the NVIDIA driver's code (its modules' text, from
 * /proc/kallsyms) whose shrinkers give its page pool back to the kernel.
 */
#define UMT_DRIVER_RANGES	4

/* Every ring-buffer record starts with one of these. */
enum umt_rec_type {
	UMT_REC_CALL = 1,	/* one GPU allocation or free call */
	UMT_REC_PROC_EXIT = 2,	/* a process that made GPU calls has exited */
	UMT_REC_USTACK = 3,	/* registers and raw stack at a call's entry */
	UMT_REC_GUARD = 4,	/* the guard stopped (or, dry, would stop) a process */
	UMT_REC_SCOPE_ASK = 5,	/* the guard has no verdict for a process name */
	UMT_REC_TORCH = 6,	/* PyTorch's caching allocator: a process's figures */
	UMT_REC_LIB_EVENT = 7,	/* a process may have mapped a library to probe */
	UMT_REC_TORCH_SPENT = 8,	/* the hook's window has taken its calls */
};

/*
 * How a GPU call ended. A window closed by anything but the return probe
 * still produces a record, so a process that dies inside a call is
 * accounted for.
 */
enum umt_call_end {
	UMT_END_RETURNED = 0,
	UMT_END_EXITED = 1,	/* thread exited inside the call */
	UMT_END_EXECED = 2,	/* thread called execve inside the call */
	UMT_END_LOST_RETURN = 3,	/* return probe never fired (longjmp...) */
};

struct umt_call_rec {
	__u32 type;		/* UMT_REC_CALL */
	__u32 api;		/* enum umt_api */
	__u64 ts_ns;		/* call entry, CLOCK_MONOTONIC */
	__u64 duration_ns;
	__u32 pid;		/* tgid */
	__u32 tid;
	__u64 size;		/* bytes requested */
	__u64 flags;
	__u64 handle;		/* returned pointer/handle, or the one freed */
	__u64 aux;		/* cuMemMap: physical allocation handle */
	__s32 ret;		/* CUresult; meaningless unless end == RETURNED */
	__u32 end;		/* enum umt_call_end */
	__u64 pages_taken;	/* host pages allocated by the thread in the call */
	__u64 pages_freed;	/* host pages freed by the thread in the call */
	/*
	 * A free of managed memory: host pages CPU faults brought into the
	 * allocation between its call and this free (x86: page_fault_user).
	 */
	__u64 faulted_pages;
	/*
	 * Pages the call took on NUMA nodes that are not host RAM (a GPU's
	 * HBM on GH200, see --device-nodes); not in pages_taken.
	 */
	__u64 device_pages;
	__u32 is_free;		/* the call releases memory */
	__u32 stack_len;	/* valid bytes in stack[] */
	char comm[TASK_COMM_LEN];	/* the calling thread's */
	char pcomm[TASK_COMM_LEN];	/* the process's (its main thread's) */
	__u64 stack[UMT_STACK_MAX];
};

/*
 * The driver frees everything a process held when it exits: its
 * outstanding allocations are released at this point.
 */
struct umt_proc_exit_rec {
	__u32 type;		/* UMT_REC_PROC_EXIT */
	__u32 pid;
	__u64 ts_ns;
	char comm[TASK_COMM_LEN];
};

/*
 * Sent at the entry of an outermost GPU call when user space asked for
 * raw stacks (ustack_bytes): what a DWARF unwinder needs to walk code
 * built without frame pointers. It comes before the call's UMT_REC_CALL,
 * which has the same tid and ts_ns. The record has a fixed size; only
 * stack_len bytes of stack[] are meaningful.
 */
struct umt_ustack_rec {
	__u32 type;		/* UMT_REC_USTACK */
	__u32 pid;		/* tgid */
	__u32 tid;
	__u16 machine;		/* ELF e_machine the registers belong to */
	__u16 nregs;		/* regs[0..nregs) hold DWARF registers 0..nregs-1 */
	__u64 ts_ns;		/* the call's entry: its UMT_REC_CALL's ts_ns */
	__u64 pc;		/* the probed entry point */
	__u64 sp;		/* user address stack[0] was copied from */
	__u32 stack_len;	/* valid bytes in stack[] */
	__u32 pad;
	__u64 regs[UMT_USTACK_REGS];
	__u8 stack[UMT_USTACK_MAX];
};

/*
 * Per process that made a GPU call (the gpu_procs map): host pages taken
 * and freed outside GPU calls (with count_outside), and how often it
 * entered direct reclaim.
 */
struct umt_gpu_proc {
	__u64 outside_alloc;	/* pages */
	__u64 outside_freed;
	__u64 reclaims;
	__u32 torch_devs;	/* bit n: a torch_devs entry for device n */
	__u32 pad;
};

/*
 * PyTorch's CUDA caching allocator, seen through the hook it calls on
 * every block allocation and free (c10::reportMemoryUsageToProfiler,
 * bpf/torch.bpf.c): its figures per process and CUDA device, kept in a
 * table of slots in the program's global data (torch_slots) that user
 * space reads in place. Devices 0 .. UMT_TORCH_MAX_DEVS - 1 are kept.
 */
#define UMT_TORCH_MAX_DEVS	16
#define UMT_TORCH_TOTALS	1	/* the hook gave the allocator's totals */
/*
 * The table: a slot's place is picked by hashing its process and device
 * into one of UMT_TORCH_GROUPS groups of UMT_TORCH_WAYS slots; a group
 * fits in a page, so finding a slot touches one page whatever the way.
 */
#define UMT_TORCH_GROUPS	512
#define UMT_TORCH_WAYS		4
#define UMT_TORCH_SLOTS		(UMT_TORCH_GROUPS * UMT_TORCH_WAYS)

struct umt_torch_dev {
	__u64 allocated;	/* bytes in allocated blocks (allocated_bytes) */
	__u64 reserved;		/* bytes in segments (reserved_bytes); 0 unknown */
	__u64 peak_allocated;	/* the largest seen since the probe went in */
	__u64 peak_reserved;
	__u64 alloc_low;	/* allocated's lowest since the last sample */
	__u64 alloc_high;	/* and highest */
	__u64 allocs;		/* block allocations reported */
	__u64 frees;		/* block frees reported */
	__u64 last_ns;		/* the clock at one of the last 16 calls (MONOTONIC) */
	__u64 sampled_ns;	/* the last sample record sent */
	__u32 flags;		/* UMT_TORCH_TOTALS */
	__u32 pad;
};

struct umt_torch_slot {
	__u64 key;		/* tgid << 32 | device; 0: free */
	struct umt_torch_dev d;
	__u64 pad[4];		/* 128 bytes: a group never straddles a page */
};

static inline __u64 umt_torch_key(__u32 tgid, __u32 device)
{
	return (__u64)tgid << 32 | device;
}

/* The group of a process and device: its first slot's index. */
static inline __u32 umt_torch_group(__u32 tgid, __u32 device)
{
	__u32 h = (tgid ^ device * 0x85ebca6bU) * 0x9e3779b1U;

	return (h >> 16) % UMT_TORCH_GROUPS * UMT_TORCH_WAYS;
}

/*
 * At most one per process and device every torch_sample_ns, sent at a
 * hook call (its figures moved): the entry as that call left it. The
 * range alloc_low..alloc_high covers the calls since the previous one.
 */
struct umt_torch_rec {
	__u32 type;		/* UMT_REC_TORCH */
	__u32 pid;		/* tgid */
	__u32 device;
	__u32 pad;
	__u64 ts_ns;		/* the call's */
	struct umt_torch_dev d;
	char comm[TASK_COMM_LEN];	/* the process's (its main thread's) */
};

/* Why a process's maps should be read now (bpf/libload.bpf.c). */
enum umt_lib_why {
	UMT_LIB_LOADER = 1,	/* its dynamic loader changed its list of objects */
	UMT_LIB_NEW_ROOT = 2,	/* the first exec seen under its root directory */
};

struct umt_lib_event_rec {
	__u32 type;		/* UMT_REC_LIB_EVENT */
	__u32 pid;		/* tgid */
	__u32 why;		/* enum umt_lib_why */
	__u32 pad;
	__u64 ts_ns;
};

/*
 * A live managed allocation (--managed-faults), and the pages CPU faults
 * have brought into it since the call: top reads them while they live.
 */
struct umt_managed_key {
	__u32 tgid;
	__u32 pad;
	__u64 addr;		/* chunk number, or the allocation's base */
};

struct umt_managed_alloc {
	__u64 size;
	__u64 pages;		/* faulted in since the call */
};

/*
 * A process as the rescan's task iterator sees it (bpf/libcuda_scan.bpf.c):
 * its executable mappings' size changes when it maps a library.
 */
struct umt_proc_exec {
	__u32 tgid;
	__u32 pad;
	__u64 start_ns;		/* task start_time: tells a reused pid */
	__u64 exec_vm;		/* pages of its executable mappings */
};

/*
 * Host pages taken by a kernel thread (the driver's bottom halves such as
 * "UVM GPU0 BH", khugepaged, kworkers), by thread and by whom they were
 * for (bpf/kthreads.bpf.h): the process whose mm it had adopted, the
 * memory cgroup it had made active, or the process whose resident-set
 * counters it later changed (kmem:rss_stat). by 0: the thread's own.
 */
#define UMT_KTHREAD_BY_MM	1	/* tgid: the adopted mm's owner */
#define UMT_KTHREAD_BY_MEMCG	2	/* cgroup: the active memory cgroup */
#define UMT_KTHREAD_BY_RSS	3	/* tgid: named by rss_stat afterwards */

struct umt_kthread_key {
	__u32 pid;		/* the kernel thread */
	__u32 tgid;		/* for this process, 0: none named */
	__u64 cgroup;		/* for this memory cgroup (its id), 0: none */
	__u32 by;		/* UMT_KTHREAD_BY_*, 0: the thread's own */
	__u32 pad;
};

struct umt_kthread_pages {
	__u64 pages;
	char comm[TASK_COMM_LEN];	/* the kernel thread's */
};

/*
 * A process that made a GPU call (the gpu_memcgs map, kept past its exit):
 * its memory cgroup's id (0: none) and its name, so that pages a kernel
 * thread charged to that cgroup are named for the job.
 */
struct umt_gpu_memcg {
	__u64 cgroup;
	char comm[TASK_COMM_LEN];
};

/*
 * A umt_guard_rec's flags. SCOPE_PENDING: stopped while its name's
 * --scope comm: verdict was on its way, so that a job is held from its
 * first call; user space, which has the answer, lets it go if out.
 */
#define UMT_GUARD_SCOPE_PENDING	1

/* Why the guard's kernel side stopped a process. */
enum umt_guard_reason {
	UMT_GUARD_ADMISSION = 1,	/* a GPU call's host cost would cross the floor */
	UMT_GUARD_FLOOR = 2,	/* a page it took crossed the floor */
	UMT_GUARD_RECLAIM = 3,	/* it entered direct reclaim under LOW */
	UMT_GUARD_POLICY = 4,	/* user space's sampled rule (never sent by BPF) */
};

/* Which processes the guard may stop. */
enum umt_guard_scope {
	UMT_SCOPE_GPU = 0,	/* those that made a GPU allocation call */
	UMT_SCOPE_ALL = 1,
	UMT_SCOPE_PIDS = 2,	/* listed in the guard_scope_pids map */
	UMT_SCOPE_CGROUP = 3,	/* in the cgroup (or below) in guard_cgroup */
	UMT_SCOPE_COMM = 4,	/* named in guard_scope_comms with UMT_COMM_IN */
};

/*
 * --scope comm:REGEX. A regex cannot run in BPF, but its verdict depends
 * on the process name alone, so user space keeps one verdict a name; the
 * kernel side asks for the names it meets without one (at exec, at a
 * rename and at a decision), and until the answer comes a process counts
 * as out of scope.
 */
struct umt_comm_key {
	char comm[TASK_COMM_LEN];	/* NUL-padded */
};

enum umt_comm_verdict {
	UMT_COMM_OUT = 0,
	UMT_COMM_IN = 1,
	UMT_COMM_ASKED = 2,	/* asked, no answer yet */
};

struct umt_scope_ask_rec {
	__u32 type;		/* UMT_REC_SCOPE_ASK */
	__u32 pid;		/* a process with that name */
	struct umt_comm_key name;
};

/*
 * The guard's page count on one CPU (see guard.bpf.h), a cache line each
 * so that CPUs never share one.
 */
struct umt_guard_cpu {
	__s64 delta;
	__s64 limit;
} __attribute__((aligned(64)));

/*
 * Who the guard never stops, besides pid 1, kernel threads and its own
 * processes (user/guardd/protect.c keeps the list, bpf/guard.bpf.c
 * decides): what a user of the host cannot take on. A name alone never
 * protects: any process can take any name.
 */
enum umt_protect_kind {
	UMT_PROTECT_NAME = 1,	/* root's, named so, run from root's file of that name */
	UMT_PROTECT_EXE = 2,	/* root's, running the file (device and inode) */
	UMT_PROTECT_UID = 3,	/* the real uid, as the host sees it */
};

struct umt_protect_key {
	__u32 kind;		/* enum umt_protect_kind */
	__u32 uid;		/* UID */
	__u64 dev;		/* EXE: its filesystem's dev_t in the kernel's
				 * encoding (major << 20 | minor), as
				 * /proc/self/mountinfo gives it */
	__u64 ino;		/* EXE */
	char comm[TASK_COMM_LEN];	/* NAME, NUL-padded */
};

/* A protected cgroup v2: its id, at its depth below the root (level). */
struct umt_protect_cgroup {
	__u64 id;
	__u32 level;
	__u32 pad;
};

/* Entries of the protect map; cgroups (each a helper call to test) apart. */
#define UMT_GUARD_MAX_PROTECT 256
#define UMT_GUARD_MAX_PROTECT_CGROUPS 16
/* Host zones whose free-page counters the guard reads near the floor. */
#define UMT_GUARD_MAX_ZONES 64
/* Nodes the zone search looks at: node ids past it are not searched. */
#define UMT_GUARD_MAX_NODES 64

/* Kernel addresses of one zone's counters (bpf/meter.bpf.h); boost 0: none. */
struct umt_meter_zone {
	__u64 free;
	__u64 low;
	__u64 boost;
};

/*
 * The globals every program file reads (bpf/shared.bpf.c): settings, in
 * .rodata, set before load...
 */
struct umt_trace_conf {
	__u8 filter_pids;	/* only traced_pids' processes */
	__u8 pad[7];
	/*
	 * Wake the reader only once this much is waiting (0: every record).
	 * The reader polls with a timeout anyway; a wake-up per record cost
	 * more CPU than everything else umtrace does per call.
	 */
	__u64 wakeup_bytes;
};

/* ...and figures, in .bss, none of them touched per page. */
struct umt_trace_state {
	/*
	 * Windows open right now, host-wide. The page hooks read it first so
	 * that a host with no GPU call in flight pays one load per page and
	 * nothing more. Written only at GPU call entry and exit.
	 */
	__s64 open_windows;
	__u64 rec_total;	/* records reserved */
	__u64 rec_dropped;	/* of them, not sent: the ring buffer was full */
};

/* Managed memory's figures (bpf/managed.bpf.c, in .bss). */
struct umt_managed_state {
	__s64 live;		/* live managed allocations: the fault hook's gate */
	__s64 faults_pending;	/* threads with a managed fault not yet charged */
};

/*
 * The meter's globals (bpf/meter.bpf.c, in .bss): user space says which
 * nodes to search, guard_find_zones notes where their counters are.
 */
struct umt_meter {
	__u32 n_possible;	/* user space: the possible nodes */
	__u32 n_zones;
	__u32 n_nodes;
	__u32 pad;
	__u64 device_nodes;	/* user space: bit n, node n is no host RAM */
	__s64 seen;		/* meter_now() when they were found */
	struct umt_meter_zone zones[UMT_GUARD_MAX_ZONES];
	__u64 nodes[UMT_GUARD_MAX_NODES];	/* each node's vm_stat[] */
};

/* The guard's settings (bpf/guard.bpf.c, in .rodata): set before load. */
struct umt_guard_conf {
	__u8 on;
	__u8 dry_run;
	__u8 pad[2];
	__u32 scope;		/* enum umt_guard_scope */
	__u32 self;		/* umtrace's own tgid */
	__u32 page_shift;
	__u32 nr_cpus;
	__u32 pad2;
	__u64 cost_apis;	/* bit n: API n's size is host memory here */
};

/* CPUs with a slot of their own in umt_guard_state; a power of two. */
#define UMT_GUARD_MAX_CPUS 1024

/*
 * The guard's figures (bpf/guard.bpf.c, in .bss, which user space maps):
 * what user space writes while running, then what the kernel side keeps.
 */
struct umt_guard_state {
	__s64 anchor;		/* metric pages at the sample + net then */
	__s64 ceiling;		/* metric pages at the sample */
	__s64 floor;		/* pages */
	__s64 low;		/* pages */
	__u8 armed;		/* an anchor has been written */
	/*
	 * The meter's counters have been checked against /proc/meminfo;
	 * then sample_pages is the last sample, in one word so that it is
	 * never read half old: the metric in the high 32 bits, meter_now()
	 * at the same moment in the low (0: none).
	 */
	__u8 exact;
	__u8 pad[2];
	__u32 helper;		/* the arming helper's tgid (user/guardd/arm.c) */
	__u64 sample_pages;
	/*
	 * When the daemon last sampled (bpf_ktime_get_ns): a name's verdict
	 * it has not given yet is worth waiting for only while it is alive.
	 */
	__u64 daemon_ns;
	__u32 n_protect_cgroups;
	__u32 pad2;
	struct umt_protect_cgroup protect_cgroups[UMT_GUARD_MAX_PROTECT_CGROUPS];

	__s64 look_room;	/* guard_look's answer, pages */
	__s64 net;		/* pages allocated minus freed, host-wide */
	__s64 reserved;		/* pages reserved by admitted calls in flight */
	__u64 checks;		/* admission decisions */
	__u64 stops;		/* stop records sent (dry runs included) */
	__u64 send_failed;	/* bpf_send_signal errors: user space retries */
	__u64 reclaims;		/* direct reclaim entries, host-wide */
	__u64 kswapd_wakes;
	struct umt_guard_cpu cpus[UMT_GUARD_MAX_CPUS];	/* see guard.bpf.h */
};

struct umt_guard_rec {
	__u32 type;		/* UMT_REC_GUARD */
	__u32 reason;		/* enum umt_guard_reason */
	__u64 ts_ns;
	__u32 pid;		/* tgid: the process stopped */
	__u32 tid;		/* the thread that allocated */
	__s32 sig_ret;		/* bpf_send_signal's result: non-zero, user space sends */
	__u32 api;		/* UMT_GUARD_ADMISSION: the entry point */
	__s64 headroom_pages;	/* above the floor (LOW for reclaim), before it */
	__u64 cost_bytes;	/* the call's host cost, or the pages that crossed */
	__u32 dry_run;		/* nothing was sent */
	__u32 flags;		/* UMT_GUARD_* below */
	char comm[TASK_COMM_LEN];
	char pcomm[TASK_COMM_LEN];
};

#endif /* UMTRACE_H */
