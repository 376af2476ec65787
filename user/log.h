/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Diagnostics go to stderr, data to stdout. */
#ifndef UMTRACE_LOG_H
#define UMTRACE_LOG_H

#include <stdbool.h>
#include <stdio.h>

extern bool log_verbose;

#define elog(fmt, ...) fprintf(stderr, "umtrace: " fmt "\n", ##__VA_ARGS__)
#define wlog(fmt, ...) fprintf(stderr, "umtrace: warning: " fmt "\n", ##__VA_ARGS__)
#define vlog(fmt, ...)							\
	do {								\
		if (log_verbose)					\
			fprintf(stderr, "umtrace: " fmt "\n", ##__VA_ARGS__); \
	} while (0)

#endif /* UMTRACE_LOG_H */
