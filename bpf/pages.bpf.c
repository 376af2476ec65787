// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The page allocator's hooks: every page a thread takes or gives back
 * while a GPU call's window is open on it is the call's (HOST+, HOST-);
 * with count_outside, a GPU process's pages outside its calls; the
 * guard's headroom moves with every host page (guard.bpf.h). Frees that
 * are no task's own (softirqs', compaction's, memory new to the
 * allocator) are left out.
 */
#include "guard.bpf.h"
#include "kthreads.bpf.h"
#include "managed.bpf.h"
#include "pages.bpf.h"

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
 * NUMA nodes whose memory is not host RAM (a GPU's HBM onlined as a node
 * on GH200), a bit a node, and where page flags keep the node number;
 * both from user space (user/lib/numa.c). With no such node no page pays
 * for the test.
 */
const volatile bool any_device_node = false;
const volatile __u32 node_flags_shift = 0;
const volatile __u64 device_nodes[UMT_MAX_NODES / 64] = {};

/*
 * Threads of GPU processes inside memory compaction right now, host-wide
 * (compaction_begin/end): the page free hook's gate for looking further.
 */
__s64 compacting_tasks;

struct in_softirq_map in_softirq SEC(".maps");

/*
 * The NVIDIA driver's page pool (driver 590+) keeps the pages its frees
 * release and serves its allocations from them; only its shrinker gives
 * them back, from kswapd, direct reclaim or drop_caches, in whatever task
 * reclaims. User space names the driver's code (driver_text, [start, end)
 * of its modules' text) and reads what came back (driver_shrunk_pages);
 * the threads inside one of its shrinkers now are in in_driver_shrink,
 * and driver_shrinking says whether any is, so that other frees pay one
 * load.
 */
__u64 driver_text[UMT_DRIVER_RANGES][2];
__u64 driver_shrunk_pages;
__s64 driver_shrinking;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);	/* tid */
	__type(value, __u8);
} in_driver_shrink SEC(".maps");

static __always_inline bool driver_code(__u64 addr)
{
	int i;

	for (i = 0; i < UMT_DRIVER_RANGES; i++)
		if (addr >= driver_text[i][0] && addr < driver_text[i][1])
			return true;
	return false;
}

static __always_inline bool in_driver_shrinker(void)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	if (!READ_ONCE(driver_shrinking))
		return false;
	return bpf_map_lookup_elem(&in_driver_shrink, &tid) != NULL;
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
	bool busy = READ_ONCE(trace_state.open_windows) ||
		    READ_ONCE(managed_state.faults_pending);
	__u64 pages = 1ULL << order, unreserved = pages;
	struct window *w = NULL;
	bool device;

	if (!busy && !count_outside && !count_kthreads && !guard_conf.on)
		return 0;
	if (!page)
		return 0;
	/* Device-node pages are never host memory: not the headroom's either. */
	device = on_device_node(page);
	if (!umt_gfp_from_task(gfp))
		goto guard;
	if (busy)
		w = thread_window();
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
		w = thread_window();
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
	/* The pool's pages, not the reclaiming task's (nor its call's). */
	if (in_driver_shrinker()) {
		__sync_fetch_and_add(&driver_shrunk_pages, 1ULL << order);
		return 0;
	}
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
	struct window *w = thread_window();

	if (w && !w->compacting++)
		__sync_fetch_and_add(&compacting_tasks, 1);
	return 0;
}

/* An end whose begin came before umtrace attached finds a depth of 0. */
SEC("tp_btf/mm_compaction_end")
int BPF_PROG(compaction_end)
{
	struct window *w = thread_window();

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
 * A shrinker begins (only when it has something to free) and ends in the
 * same task, around its scans; the driver's are told by their scan
 * function. Loaded only where user space shows the driver's pool.
 */
SEC("tp_btf/mm_shrink_slab_start")
int BPF_PROG(driver_shrink_start, struct shrinker *shr)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u8 one = 1;

	if (!shr || !driver_code((__u64)shr->scan_objects))
		return 0;
	if (!bpf_map_update_elem(&in_driver_shrink, &tid, &one, BPF_NOEXIST))
		__sync_fetch_and_add(&driver_shrinking, 1);
	return 0;
}

SEC("tp_btf/mm_shrink_slab_end")
int BPF_PROG(driver_shrink_end, struct shrinker *shr)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	if (!bpf_map_delete_elem(&in_driver_shrink, &tid))
		__sync_fetch_and_add(&driver_shrinking, -1);
	return 0;
}
