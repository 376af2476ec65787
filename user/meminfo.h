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

#endif /* UMTRACE_MEMINFO_H */
