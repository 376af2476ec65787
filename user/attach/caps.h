/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Least privilege: once the probes are attached, a long-running umtrace
 * keeps only the capabilities its loop still uses, so that a bug in what
 * it parses afterwards (ELF files and perf maps of other users' processes,
 * containers' libraries) cannot be turned into root's full power.
 */
#ifndef UMTRACE_CAPS_H
#define UMTRACE_CAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/capability.h>

/* At most this many capabilities may be kept. */
#define CAPS_KEEP_MAX 16

/*
 * Keep those of the n capabilities in keep that the process holds now, and
 * nothing else, for good: the effective and permitted sets become them,
 * the inheritable and ambient sets are emptied, every other capability
 * leaves the bounding set (when CAP_SETPCAP allows it) and no_new_privs is
 * set, so that no program umtrace runs later gets any back. uid 0 stays
 * uid 0: files root owns stay writable.
 *
 * Capabilities belong to a thread: threads that exist already keep theirs,
 * threads started afterwards inherit the reduced sets. With other threads
 * alive, this thread still drops, and -EBUSY says the others did not.
 * 0 or -errno.
 */
int caps__drop_to(const cap_value_t *keep, size_t n);
/* Is cap in this thread's permitted set? */
bool caps__permitted(cap_value_t cap);

#endif /* UMTRACE_CAPS_H */
