// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * When a process may just have mapped libcuda or libc10, so that user
 * space reads that process's maps at once instead of at the next rescan
 * (seconds later: a job allocates its largest buffers in its first ones).
 *
 * The dynamic loader calls _dl_debug_state() (the debugger's hook, r_brk)
 * each time its list of objects changes: once the program's own libraries
 * are mapped, and at every dlopen and dlclose. An entry uprobe on it in
 * every loader found says which process. A loader is a file of its own in
 * every container image, so the first exec under a root directory not
 * seen before (a container's, once its runtime has switched to it; a
 * chroot's) says so too: its loader is mapped by then, and user space
 * probes it while the program starts.
 *
 * Neither runs on an idle host; an exec costs a hash lookup.
 */
#include "shared.bpf.h"

__u64 lib_events_sent;

/* Root directories an exec has been reported under. */
struct root_key {
	__u64 dev;
	__u64 ino;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct root_key);
	__type(value, __u8);
} seen_roots SEC(".maps");

static __always_inline void lib_event(__u32 tgid, __u32 why)
{
	struct umt_lib_event_rec *r;

	r = rec_reserve(sizeof(*r));
	if (!r)
		return;
	r->type = UMT_REC_LIB_EVENT;
	r->pid = tgid;
	r->why = why;
	r->pad = 0;
	r->ts_ns = bpf_ktime_get_ns();
	/* User space has to act before the process goes on: wake it now. */
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
	__sync_fetch_and_add(&lib_events_sent, 1);
}

SEC("uprobe")
int BPF_KPROBE(dl_debug_state)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (pid_in_scope(tgid))
		lib_event(tgid, UMT_LIB_LOADER);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(lib_exec, struct task_struct *task)
{
	struct dentry *root = BPF_CORE_READ(task, fs, root.dentry);
	struct root_key k = {
		.dev = BPF_CORE_READ(root, d_sb, s_dev),
		.ino = BPF_CORE_READ(root, d_inode, i_ino),
	};
	__u8 one = 1;

	if (!k.ino || bpf_map_lookup_elem(&seen_roots, &k))
		return 0;
	if (bpf_map_update_elem(&seen_roots, &k, &one, BPF_NOEXIST))
		return 0;	/* another CPU's exec took it */
	lib_event(task->tgid, UMT_LIB_NEW_ROOT);
	return 0;
}
