/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The rescan for libcuda files mapped since the start, without reading
 * every process's /proc/PID/maps each time: a task iterator in the kernel
 * (bpf/libcuda_scan.bpf.c) lists each process with the size of its
 * executable mappings, which grows when it maps a library, and only the
 * processes that are new or whose size changed have their maps read.
 * Without the iterator (no permission, an old kernel) the caller reads
 * every process's maps instead.
 */
#ifndef UMTRACE_LIBCUDA_SCAN_H
#define UMTRACE_LIBCUDA_SCAN_H

#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "attach/libcuda.h"
#include "umtrace.h"

struct libcuda_scan_bpf;
struct bpf_link;

struct libcuda_scan {
	struct libcuda_scan_bpf *skel;
	struct bpf_link *link;
	/* The last look, in the iterator's order (ascending tgid). */
	struct umt_proc_exec *last;
	size_t n_last;
};

/* 0, or -errno when the kernel cannot run the iterator. */
int libcuda_scan__open(struct libcuda_scan *sc);
/* New libcuda files mapped by a running process into set: how many, or -errno. */
int libcuda_scan__run(struct libcuda_scan *sc, struct libcuda_set *set);
void libcuda_scan__close(struct libcuda_scan *sc);

/*
 * Which of now[] (ascending tgid) differ from last[]: new processes and
 * changed executable mappings. fn is called for each; for tests.
 */
void libcuda_scan__diff(const struct umt_proc_exec *last, size_t n_last,
			const struct umt_proc_exec *now, size_t n_now,
			void (*fn)(const struct umt_proc_exec *p, void *ctx), void *ctx);

#endif /* UMTRACE_LIBCUDA_SCAN_H */
