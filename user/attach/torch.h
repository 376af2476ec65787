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
