/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Host memory figures from /proc/meminfo. */
#ifndef UMTRACE_MEMINFO_H
#define UMTRACE_MEMINFO_H

#include <stdint.h>

struct meminfo {
	uint64_t total;		/* bytes */
	uint64_t available;
	uint64_t free;
};

/* 0 or -errno; a file missing a field gives -EINVAL. */
int meminfo__read(struct meminfo *m);
/* Parse meminfo text (for tests and recordings). */
int meminfo__parse(const char *text, struct meminfo *m);

/*
 * The per-CPU free lists (/proc/zoneinfo pagesets): pages in them are
 * free but not in MemFree, and they may be refilled from MemFree up to
 * their high marks at any moment.
 */
struct pcp_info {
	uint64_t count;		/* bytes in the lists now */
	uint64_t high;		/* bytes they refill up to (their high marks now) */
};

/* 0 or -errno; text is /proc/zoneinfo's. */
int meminfo__parse_pcp(const char *text, uint64_t page_size, struct pcp_info *p);
int meminfo__read_pcp(struct pcp_info *p);

#endif /* UMTRACE_MEMINFO_H */
