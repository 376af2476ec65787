// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * PyTorch's CUDA caching allocator calls c10::reportMemoryUsageToProfiler
 * (libc10.so) after every block allocation (size > 0) and free (size < 0),
 * with its own allocated_bytes and reserved_bytes for the device, whatever
 * the profiler's state. An entry uprobe there keeps those figures per
 * process and device, their peaks and the calls, in torch_slots; user
 * space reads them in place. Eager PyTorch makes 10^4 to 10^5 of these
 * calls a second, so the program finds its slot in one page, stores a few
 * figures and reads the clock once in 16 calls; a record goes to the ring
 * buffer at most every torch_sample_ns per process and device: never one
 * per tensor.
 */
#include "torch.bpf.h"

#define C10_DEVICE_CPU 0	/* c10::DeviceType::CPU */
#define C10_DEVICE_CUDA 1	/* c10::DeviceType::CUDA */
/* The clock is read once in this many calls of a slot (a power of 2). */
#define TORCH_CLOCK_EVERY 16

/* The least time between two sample records of a process and device. */
const volatile __u64 torch_sample_ns = 100000000ULL;
const volatile bool torch_cues;	/* the hook is attached in windows */
__u64 torch_cue_ns;
bool torch_asleep;
/*
 * Calls a window of the hook may take (0: no windows), and those it took
 * (user space zeroes it as a window opens). The call that spends the
 * last wakes the reader, which then detaches the hook.
 */
const volatile __u64 torch_budget;
__u64 torch_spent;

static __noinline void torch_count(void)
{
	__u32 *r;

	if (__sync_fetch_and_add(&torch_spent, 1) + 1 != torch_budget)
		return;
	r = rec_reserve(sizeof(*r));
	if (!r)
		return;
	*r = UMT_REC_TORCH_SPENT;
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
}
/*
 * TEST ONLY, never a product feature: count the CPU allocator's calls as
 * device 0, so that the tests can drive the real ABI of a real PyTorch
 * on a machine without a GPU (CPU tensors call the hook while memory
 * profiling is on). Set from the environment by user/attach/torch.c,
 * which says so on stderr; no option or configuration reaches it.
 */
const volatile bool torch_test_cpu = false;

/*
 * Global data, not a hash map: a hash lookup touches the map, its bucket
 * and its element, three pages, and where every kernel entry flushes the
 * TLB (page-table isolation without PCID, as on this project's VMs) each
 * costs a page walk: 140 ns of the program's first 250. A slot's group
 * is one page. User space reads the table in place (its own section: the
 * skeleton maps it apart from the hot counters of .bss).
 */
struct umt_torch_slot torch_slots[UMT_TORCH_SLOTS] SEC(".data.torch");

/* The slot of (tgid, device), or NULL. */
static __always_inline struct umt_torch_slot *torch_find(__u64 key, __u32 group)
{
	__u32 i, s;

	for (i = 0; i < UMT_TORCH_WAYS; i++) {
		s = (group + i) & (UMT_TORCH_SLOTS - 1);
		if (torch_slots[s].key == key)
			return &torch_slots[s];
	}
	return NULL;
}

/*
 * A sample record of d (the figures of tgid's device), as the hook in
 * task left it; allocated's range starts over.
 */
static __noinline void torch_send(struct umt_torch_dev *d, __u32 tgid, __u32 device,
				  struct task_struct *task, __u64 now)
{
	struct umt_torch_rec *r;

	d->sampled_ns = now;
	r = rec_reserve(sizeof(*r));
	if (r) {
		r->type = UMT_REC_TORCH;
		r->pid = tgid;
		r->device = device;
		r->pad = 0;
		r->ts_ns = now;
		__builtin_memcpy(&r->d, d, sizeof(r->d));
		bpf_probe_read_kernel_str(r->comm, sizeof(r->comm), task->group_leader->comm);
		bpf_ringbuf_submit(r, submit_flags());
	}
	d->alloc_low = d->allocated;
	d->alloc_high = d->allocated;
}

__u64 torch_far_devices;	/* calls for a device index past the table's */
/*
 * Calls for a device that is not CUDA's: a job whose hook fires only for
 * them (CPU tensors under the memory profiler) has no row, and top and
 * report say why. Rare (other allocators report only while profiled).
 */
__u64 torch_other_devices;
__u64 torch_map_full;		/* calls not counted: their group was full */

/* A process and device seen for the first time (rare: no need to hurry). */
static __noinline struct umt_torch_slot *torch_new(__u64 key, __u32 group, __u32 flags)
{
	struct umt_gpu_proc proc = { .torch_devs = 1U << (key & (UMT_TORCH_MAX_DEVS - 1)) }, *p;
	__u32 tgid = key >> 32, i, s;
	struct umt_torch_slot *slot = NULL;

	for (i = 0; i < UMT_TORCH_WAYS && !slot; i++) {
		s = (group + i) & (UMT_TORCH_SLOTS - 1);
		/* Two processes new at once on one group: one slot each. */
		if (!torch_slots[s].key && !__sync_val_compare_and_swap(&torch_slots[s].key, 0, key))
			slot = &torch_slots[s];
	}
	if (!slot) {
		__sync_fetch_and_add(&torch_map_full, 1);
		return NULL;
	}
	__builtin_memset(&slot->d, 0, sizeof(slot->d));
	slot->d.flags = flags;
	slot->d.alloc_low = ~0ULL;
	/* A GPU process: its end is reported, and frees these slots. */
	p = bpf_map_lookup_elem(&gpu_procs, &tgid);
	if (p)
		p->torch_devs |= proc.torch_devs;
	else
		bpf_map_update_elem(&gpu_procs, &tgid, &proc, BPF_NOEXIST);
	return slot;
}

__noinline int torch_final(__u32 tgid, __u32 device)
{
	struct umt_torch_slot *s;

	if (device >= UMT_TORCH_MAX_DEVS)
		return 0;
	s = torch_find(umt_torch_key(tgid, device), umt_torch_group(tgid, device));
	if (!s)
		return 0;
	if (s->d.allocs + s->d.frees)	/* its last figures, always */
		torch_send(&s->d, tgid, device, bpf_get_current_task_btf(), bpf_ktime_get_ns());
	s->key = 0;
	return 0;
}

/*
 * (void *ptr, int64_t size, size_t total_allocated, size_t total_reserved,
 * c10::Device device), or (ptr, size, device) in old builds: the cookie
 * says which. c10::Device is {int8 type, int8 index} in one register,
 * its upper bits undefined (a CPU device arrives as 0x...ff00).
 */
SEC("uprobe")
int BPF_KPROBE(torch_hook)
{
	__u64 totals = bpf_get_attach_cookie(ctx) & UMT_TORCH_CK_TOTALS;
	__s64 size = (__s64)PT_REGS_PARM2(ctx);
	__u64 arg3 = PT_REGS_PARM3(ctx), arg4 = PT_REGS_PARM4(ctx), dev = PT_REGS_PARM5(ctx);
	struct umt_torch_slot *slot;
	struct umt_torch_dev *d;
	__u32 tgid, device, group;
	__u64 key, alloc, now;

	/*
	 * The context is read at constant offsets only: loaded apart, or
	 * clang picks the register's offset first and loads through it.
	 */
	barrier_var(arg3);
	barrier_var(dev);
	if (torch_budget)
		torch_count();
	if (!totals)
		dev = arg3;
	device = (dev >> 8) & 0xff;
	if ((dev & 0xff) == C10_DEVICE_CPU && torch_test_cpu) {
		device = 0;	/* {CPU, -1} */
	} else if ((dev & 0xff) != C10_DEVICE_CUDA) {
		/* Counted for the processes traced only: what report -- CMD says is its own. */
		if (pid_in_scope(bpf_get_current_pid_tgid() >> 32))
			__sync_fetch_and_add(&torch_other_devices, 1);
		return 0;
	}
	if (device >= UMT_TORCH_MAX_DEVS) {
		__sync_fetch_and_add(&torch_far_devices, 1);
		return 0;
	}
	tgid = bpf_get_current_pid_tgid() >> 32;
	if (!pid_in_scope(tgid))
		return 0;
	key = umt_torch_key(tgid, device);
	group = umt_torch_group(tgid, device);
	slot = torch_find(key, group);
	if (!slot) {
		slot = torch_new(key, group, totals ? UMT_TORCH_TOTALS : 0);
		if (!slot)
			return 0;
	}
	d = &slot->d;
	/*
	 * The allocator calls the hook under its device's lock: calls for
	 * one slot never overlap, and plain stores do.
	 */
	if (totals) {
		alloc = arg3;
		d->reserved = arg4;
		if (d->reserved > d->peak_reserved)
			d->peak_reserved = d->reserved;
	} else {
		/* Frees of blocks allocated before the probe went in: none below 0. */
		alloc = size < 0 && (__u64)-size > d->allocated ? 0 : d->allocated + size;
	}
	d->allocated = alloc;
	if (alloc > d->peak_allocated)
		d->peak_allocated = alloc;
	if (alloc < d->alloc_low)
		d->alloc_low = alloc;
	if (alloc > d->alloc_high)
		d->alloc_high = alloc;
	if (size > 0)
		d->allocs++;
	else
		d->frees++;
	if ((d->allocs + d->frees) & (TORCH_CLOCK_EVERY - 1) && d->last_ns)
		return 0;
	now = bpf_ktime_get_ns();
	d->last_ns = now;
	if (now - d->sampled_ns >= torch_sample_ns)
		torch_send(d, tgid, device, bpf_get_current_task_btf(), now);
	return 0;
}
