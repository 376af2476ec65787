/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Multi-uprobe links (Linux 6.6+): all entry points of one library behind
 * one link. Detaching a classic perf-event uprobe waits for a grace period
 * under a global mutex, about 0.1 s each here, so 52 of them kept umtrace
 * from exiting for 5 s; one multi link waits once. Debian bookworm's
 * libbpf (1.1) predates them, so the few kernel ABI bits live here.
 */
#ifndef UMTRACE_UPROBE_MULTI_H
#define UMTRACE_UPROBE_MULTI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* enum bpf_attach_type value, stable kernel ABI since 6.6 */
#define UMT_BPF_TRACE_UPROBE_MULTI 48

/* Does this kernel create multi-uprobe links? */
bool uprobe_multi__supported(void);
/* A link firing prog at every offset of path; returns its fd or -errno. */
int uprobe_multi__attach(int prog_fd, const char *path, const uint64_t *offsets,
			 const uint64_t *cookies, size_t cnt, bool retprobe);

#endif /* UMTRACE_UPROBE_MULTI_H */
