/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The loader: checks what the kernel offers, loads the BPF object, attaches
 * the page tracepoints and the libcuda uprobes, and detaches it all.
 */
#ifndef UMTRACE_PROBES_H
#define UMTRACE_PROBES_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/types.h>
#include "umtrace.h"
#include "lib/numa.h"

struct umtrace_bpf;
struct bpf_link;
struct bpf_program;

/* The guard's kernel side (bpf/guard.bpf.h), fixed at load. */
struct guard_kcfg {
	bool on;
	bool dry_run;		/* decide and report, send nothing */
	bool metric_free;	/* the metric is MemFree, not MemAvailable */
	uint32_t scope;		/* enum umt_guard_scope */
	uint64_t cost_apis;	/* bit n: API n's size costs host memory */
};

struct probes;
/* A program probes__attach_kernel leaves to its caller (who attaches it later). */
typedef bool (*probes_leave_fn)(const struct probes *p, const struct bpf_program *prog);

struct probe_cfg {
	uint64_t ringbuf_bytes;	/* rounded up to a power of two pages */
	bool filter_pids;	/* only processes added with probes__add_pid */
	bool proc_pages;	/* no libcuda: count host pages per process */
	uint32_t ustack_bytes;	/* raw stack per GPU call for DWARF unwinding, 0: none */
	bool batch_wakeups;	/* wake the reader at 1/8 full, not per record */
	bool count_outside;	/* host pages GPU processes take outside calls */
	bool count_kthreads;	/* host pages kernel threads take (kthreads.c) */
	bool driver_pool;	/* what the driver's pool shrinker gives back */
	bool managed_faults;	/* charge managed first-touch pages (x86) */
	bool skip_softirq_frees;	/* softirqs' frees are no task's (not for the guard) */
	bool torch;			/* load PyTorch's allocator hook (probes__attach_torch) */
	bool torch_windowed;		/* attached in windows (probes__torch_set), not always */
	uint64_t torch_budget;		/* hook calls a window takes (the kernel wakes the reader) */
	bool lib_events;		/* say when a process may have mapped a library */
	const struct numa_nodes *nodes;	/* device nodes, NULL: none */
	const struct guard_kcfg *guard;	/* NULL: no guard */
	probes_leave_fn leave;		/* NULL: attach them all */
};

struct probes {
	struct umtrace_bpf *skel;
	struct bpf_link **links;	/* tracepoints, classic uprobes */
	size_t n_links, cap_links;
	int *multi_fds;			/* multi-uprobe links, two per library */
	size_t n_multi, cap_multi;
	bool multi;			/* the kernel has multi-uprobe links */
	probes_leave_fn leave;		/* probe_cfg.leave */
	struct torch_hook_site *torch;	/* PyTorch's hook, per libc10 file */
	size_t n_torch;
	bool torch_windowed;		/* probe_cfg.torch_windowed */
	bool torch_on;			/* the windowed sites are attached */
	uint64_t torch_switches[2];	/* detaches [0], attaches [1] */
	uint64_t torch_switch_ns[2];	/* and the time they took */
	struct torch_reap *reap;	/* the last window's links, being closed */
	pthread_t reaper;		/* by this thread */
};

struct probe_stats {
	uint64_t rec_total;
	uint64_t rec_dropped;
	uint64_t storage_failed;
	uint64_t ustack_skipped;	/* calls sent with frame-pointer stacks only */
	uint64_t torch_far_devices;	/* hook calls for CUDA devices past 15 */
	uint64_t torch_map_full;	/* processes and devices the map had no room for */
	uint64_t torch_other_devices;	/* hook calls for devices other than CUDA's */
	int64_t open_windows;
};

/* Root or CAP_BPF+CAP_PERFMON, kernel BTF, needed BPF features: 0 or -errno. */
int probes__check_env(void);
int probes__load(struct probes *p, const struct probe_cfg *cfg);
int probes__attach_kernel(struct probes *p);
/*
 * Attach to every probed symbol the library file defines; returns how
 * many. name is the file as messages call it (terminal text already).
 * discovered: found in a process's mappings, so it may be gone already.
 */
int probes__attach_lib(struct probes *p, const char *file, const char *name, bool discovered);
/*
 * Attach PyTorch's allocator hook to every form of it a libc10 file
 * defines (attach/torch.h); returns how many, 0 if none, or -errno.
 */
int probes__attach_torch(struct probes *p, const char *file, const char *name,
			 bool discovered);
/*
 * Attach (on) or detach the hook in every libc10 whose form gives totals,
 * when torch_windowed: 0 or the first -errno (the others still done).
 */
int probes__torch_set(struct probes *p, bool on);
/*
 * In a forked child that lives on: close its copies of the windowed
 * hook's links (the parent's windows must be able to close them).
 */
void probes__torch_drop(struct probes *p);
/* Close the hook's links and files (torch_hook.c, for probes__destroy). */
void probes__torch_free(struct probes *p);
/* When a process last made a GPU call (CLOCK_MONOTONIC ns): the windows' cue. */
uint64_t probes__torch_cue_ns(const struct probes *p);
/* The hook's calls since the window opened, and a new window's zero. */
uint64_t probes__torch_calls(const struct probes *p);
void probes__torch_fresh(struct probes *p);
/*
 * The dynamic loader's debugger hook (_dl_debug_state) in path, for
 * lib_events: 1 if probed, 0 if the file has none, or -errno.
 */
int probes__attach_loader(struct probes *p, const char *path);
int probes__add_pid(struct probes *p, pid_t pid);
/* Host pages pid took and freed outside GPU calls (count_outside). */
int probes__outside_pages(const struct probes *p, uint32_t pid,
			  uint64_t *taken, uint64_t *freed);
int probes__events_fd(const struct probes *p);
int probes__proc_pages_fd(const struct probes *p);
/* Live managed allocations (managed_faults on x86), -1 without them. */
int probes__managed_fd(const struct probes *p);
/* The torch hook's table of slots (cfg.torch), read in place; NULL without it. */
const struct umt_torch_slot *probes__torch_slots(const struct probes *p);
/* The kernel threads' pages map (count_kthreads), -1 without it. */
int probes__kthreads_fd(const struct probes *p);
/*
 * Find the NVIDIA driver's code for the pool's shrinker programs, when it
 * is loaded (/proc/modules, then /proc/kallsyms, whose addresses take
 * CAP_SYSLOG): how many modules' text, 0 if none, or -errno. A driver
 * loaded later is not seen.
 */
int probes__driver_find(struct probes *p);
/*
 * Base pages the driver's pool shrinker gave back since the load; false
 * when they are not watched (not asked for, or no driver found).
 */
bool probes__driver_shrunk(const struct probes *p, uint64_t *pages);
/* The GPU processes' memory cgroups and names (count_kthreads), -1 without them. */
int probes__gpu_memcgs_fd(const struct probes *p);
void probes__stats(const struct probes *p, struct probe_stats *st);
void probes__destroy(struct probes *p);
/* The programs this load verified. */
unsigned int probes__n_loaded(const struct probes *p);
/* Does this architecture have the tracepoint --managed-faults needs? */
bool probes__can_track_managed(void);

#endif /* UMTRACE_PROBES_H */
