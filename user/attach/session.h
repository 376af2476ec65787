/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * user/attach: getting the kernel's view: options (opts.c), loading and
 * attaching the BPF object (probes.c, uprobe_multi.c; PyTorch's hook in
 * windows, torch_hook.c), finding libcuda and
 * its entry points (libcuda.c, elf_syms.c, libcuda_scan.c), starting
 * COMMAND held (launch.c), dropping capabilities (caps.c), reading the
 * kernel's per-process and kernel-thread counts (proc_pages.c,
 * kthreads.c), and the session every attaching command runs (session.c).
 * Uses lib/, model/, stacks/, rec/.
 */
/*
 * A tracing session, shared by every subcommand that attaches probes:
 * find libcuda, start COMMAND held, load and attach, poll the ring buffer,
 * rescan for new libraries, report lost records, stop on a signal, on
 * COMMAND's end, when the -p processes are gone or after a duration.
 * Subcommands only say what to do with each record.
 */
#ifndef UMTRACE_SESSION_H
#define UMTRACE_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/types.h>
#include "attach/opts.h"
#include "attach/launch.h"
#include "attach/libcuda.h"
#include "attach/libcuda_scan.h"
#include "attach/probes.h"
#include "attach/torch.h"
#include "umtrace.h"

struct ring_buffer;

/* Lib events kept between two reads of the ring buffer (a dlopen burst). */
#define SESSION_LIB_PENDING 32

struct session_ops {
	void (*on_call)(void *ctx, const struct umt_call_rec *r);
	void (*on_exit)(void *ctx, const struct umt_proc_exit_rec *r);
	void (*on_tick)(void *ctx);	/* once per tick_ms */
	/* Raw stack at a call's entry; comes before that call's on_call. */
	void (*on_ustack)(void *ctx, const struct umt_ustack_rec *r);
	/* The guard's kernel side stopped (or, dry, would stop) a process. */
	void (*on_guard)(void *ctx, const struct umt_guard_rec *r);
	/* The guard's kernel side wants a process name's scope verdict. */
	void (*on_scope_ask)(void *ctx, const struct umt_scope_ask_rec *r);
	/*
	 * PyTorch's allocator figures for a process and device (with torch):
	 * the kernel's samples, and before each on_tick and at the end those
	 * that moved since.
	 */
	void (*on_torch)(void *ctx, const struct torch_sample *s);
};

struct session {
	struct attach_opts *ao;
	char **cmd;			/* argv of COMMAND, or NULL */
	const struct session_ops *ops;
	void *ctx;
	uint64_t tick_ms;		/* on_tick may change it */
	uint64_t next_tick_ms;		/* session__tick_by may bring it nearer */
	int poll_ms;			/* longest ring buffer wait */
	uint64_t duration_ms;		/* 0: until stopped */
	bool quiet_pages;		/* no-libcuda mode prints nothing */
	uint32_t ustack_bytes;		/* raw stack per call for on_ustack, 0: none */
	/*
	 * Let records wait (up to a poll interval, 100 ms) instead of waking
	 * the reader for each: a third of the CPU at high call rates. Not for
	 * subcommands that must read a process's maps while it is alive.
	 */
	bool batch_wakeups;
	bool count_outside;		/* see struct probe_cfg */
	bool count_kthreads;		/* see struct probe_cfg */
	bool driver_pool;		/* see struct probe_cfg */
	const struct guard_kcfg *guard;	/* NULL: no guard */
	probes_leave_fn leave;		/* see struct probe_cfg */
	/* Probe PyTorch's allocator hook in libc10 files (--libc10, or found). */
	bool torch;
	/*
	 * The caller calls session__drop_caps() itself, later: the guard,
	 * once its links are pinned (mounting a bpffs takes CAP_SYS_ADMIN).
	 */
	bool drop_caps_later;
	/* state */
	int pidfds[ATTACH_MAX_PIDS];	/* readable once the process is gone */
	struct probes probes;
	struct numa_nodes nodes;	/* device nodes in force */
	struct ring_buffer *rb;
	struct libcuda_set libs;
	struct libcuda_scan scan;	/* the rescan in the kernel; skel NULL: /proc */
	struct launched launched;
	struct torch_feed torch_feed;
	struct torch_window torch_window;	/* when the hook is attached */
	bool have_cmd;
	bool pages_mode;		/* no libcuda: host pages per process */
	uint64_t drops_reported;
	uint64_t bad_records;
	/* Processes whose maps to read now (lib events), and when each was said. */
	pid_t lib_pending[SESSION_LIB_PENDING];
	uint64_t lib_pending_ns[SESSION_LIB_PENDING];
	unsigned int n_lib_pending;
	bool lib_overflow;		/* more than that: look at every process */
};

void session__init(struct session *s, struct attach_opts *ao, char **cmd,
		   const struct session_ops *ops, void *ctx);
/*
 * Everything up to the probes being attached, the capabilities dropped
 * (unless drop_caps_later) and COMMAND released.
 */
int session__start(struct session *s);
/*
 * Keep only the capabilities the loop needs from now on (the guard's,
 * with a guard_kcfg, also CAP_KILL); a failure is a warning. Start no
 * thread before it: a thread keeps what it had.
 */
void session__drop_caps(struct session *s);
/* A callback wants on_tick by at_ms (CLOCK_MONOTONIC), sooner than tick_ms. */
void session__tick_by(struct session *s, uint64_t at_ms);
/* Poll until a stop condition; 0 or -errno. */
int session__run(struct session *s);
/* Ask the loop to stop (async-signal-safe). */
void session__stop(void);
void session__stats(const struct session *s, struct probe_stats *st);
/*
 * The hook probed but fed no CUDA device's figures, only other devices'
 * calls (*calls): the files it is probed in, at most max; 0 if not so.
 */
size_t session__torch_unseen(const struct session *s, const char **files, size_t max,
			     uint64_t *calls);
/* The process exit code: COMMAND's status when there is one. */
int session__exit_code(struct session *s, int err);
void session__close(struct session *s);

#endif /* UMTRACE_SESSION_H */
