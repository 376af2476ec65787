/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * PyTorch's caching allocator hook, from the attaching side: which symbols
 * of a libc10.so are the hook and in which form (their cookies), and the
 * feed that turns the kernel's records and map (bpf/torch.bpf.c) into
 * samples for the model (model/torch.h): the process's allocator config
 * read once from its environment, and the figures that moved since the
 * kernel's last record read from its table, so that a process gone quiet
 * still shows its last state.
 */
#ifndef UMTRACE_ATTACH_TORCH_H
#define UMTRACE_ATTACH_TORCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "attach/libcuda.h"
#include "lib/pid_table.h"
#include "model/torch.h"
#include "umtrace.h"

/* c10::reportMemoryUsageToProfiler(void *, int64_t, ...): every form starts so. */
#define TORCH_HOOK_PREFIX "_ZN3c1027reportMemoryUsageToProfilerEPvl"

/*
 * The cookie for a mangled name of the hook (bpf/cookie.h), or -1 for a
 * name that is none of its forms: after the prefix (the pointer and the
 * signed size), two integer totals (size_t or int64_t, however the build
 * mangles them) or none, then c10::Device by value.
 */
int64_t torch_hook__cookie(const char *mangled);
/* What a form of the hook (its cookie) gives, in words, for -v. */
const char *torch_hook__form(int64_t cookie);

/*
 * When the hook is attached. Every tensor allocation and free pays a
 * uprobe while it is (5 us on a VM, 0.3 to 1 us on bare metal), and the
 * hook passes the allocator's totals, so a call seen at any moment gives
 * that moment's figures exactly. So the hook takes at most `budget` calls
 * (all processes together) in a window, which opens once every every_ns
 * at a random moment (a job's steps as long as the period are then seen
 * at every phase, not always the same one); the kernel says when they are
 * spent, and the hook is detached until the next window. A GPU call (a
 * cue that reserved may move) opens one more window a period. A job that
 * calls less than budget a period is thus seen on every call.
 */
struct torch_window {
	uint64_t every_ns;	/* 0: always attached */
	uint64_t budget;
	bool on;		/* attached now */
	bool fresh;		/* a window opened: the caller zeroes the kernel's count */
	bool opened_now;	/* this period's window has opened */
	bool cue_used;		/* and its cued one */
	uint64_t period_ns;	/* the current period's start */
	uint64_t open_ns;	/* its window opens then */
	uint64_t cue_ns;	/* the last cue seen */
	uint64_t rand;
	/* what it did, for -v and the benchmark */
	uint64_t opened;	/* windows opened */
	uint64_t cued;		/* of which by a cue */
	uint64_t spent;		/* closed with their calls spent */
};

#define TORCH_WINDOW_EVERY_NS	1000000000ULL	/* 1 s */
/*
 * Kernels before 6.6 (a perf event per uprobe): attaching one and closing
 * it take tens of ms each, and a job calling the hook meanwhile pays about
 * 0.1 s of a core per window at 100,000 tensors a second (tests/bench/
 * torch_bench.py, top-perf), where a multi-uprobe link costs it ~5 ms.
 */
#define TORCH_WINDOW_EVERY_PERF_NS	8000000000ULL	/* 8 s */
/* 1000 calls: 5 ms of a job's time here, 1 ms or less on bare metal. */
#define TORCH_WINDOW_CALLS	1000

/* every_ns 0: the hook on every call, no windows. */
void torch_window__init(struct torch_window *w, uint64_t every_ns, uint64_t now_ns);
/*
 * Should the hook be attached at now_ns, given the time of the last cue
 * (0: none yet) and the calls the kernel counted since the last fresh
 * window? Updates the window's state.
 */
bool torch_window__want(struct torch_window *w, uint64_t now_ns, uint64_t cue_ns,
			uint64_t calls);
/* When the answer may change next without a cue or the calls spent. */
uint64_t torch_window__next_ns(const struct torch_window *w);

/*
 * TEST ONLY: the environment variable that makes the hook count the CPU
 * allocator's calls as device 0 (bpf/torch.bpf.c, torch_test_cpu), so that
 * umtrace's tests can check the real ABI of Debian's PyTorch on a machine
 * without a GPU. Deliberately no option, no configuration, no man page:
 * the product counts CUDA devices only. True when set to 1, said on stderr.
 */
#define TORCH_TEST_CPU_ENV "UMTRACE_TEST_ONLY_TORCH_CPU"
bool torch_hook__test_cpu(void);

typedef void (*torch_sample_fn)(void *ctx, const struct torch_sample *s);

struct torch_feed {
	struct pid_table procs;		/* struct torch_feed_proc */
	const struct umt_torch_slot *slots;	/* UMT_TORCH_SLOTS, the kernel's; NULL: none */
	bool windowed;			/* the hook is attached in windows */
	bool sampled;			/* a CUDA device's figures came */
};

void torch_feed__init(struct torch_feed *f, const struct umt_torch_slot *slots);
/* A kernel record as a sample. */
void torch_feed__record(struct torch_feed *f, const struct umt_torch_rec *r,
			struct torch_sample *s);
/* Call fn for every process and device whose figures moved since its last sample. */
void torch_feed__flush(struct torch_feed *f, torch_sample_fn fn, void *ctx);
/* The process has ended: its next pid's owner is another. */
void torch_feed__forget(struct torch_feed *f, uint32_t pid);
void torch_feed__free(struct torch_feed *f);

/*
 * The hook probed, yet every call it saw was for another device (CPU
 * tensors under the memory profiler): the libc10 files it is probed in
 * (their terminal-escaped names, at most max) for "hook probed in FILE:
 * N calls, none for a CUDA device". 0 when a CUDA device's figures came,
 * or no other device called (other_calls: probe_stats.torch_other_devices).
 */
size_t torch_hook__unseen(const struct torch_feed *f, const struct libcuda_set *libs,
			  uint64_t other_calls, const char **files, size_t max);

#endif /* UMTRACE_ATTACH_TORCH_H */
