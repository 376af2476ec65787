/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What the guard tells the outside while it runs: the state file (for
 * `umtrace status` and `resume`) and the Prometheus metrics. Both are
 * made from one snapshot of the daemon, taken in its loop, and written
 * by a thread of their own once the loop runs (lib/file_writer.h), so a
 * slow or hung disk never stalls it.
 */
#ifndef UMTRACE_GUARD_REPORT_H
#define UMTRACE_GUARD_REPORT_H

#include "guard/metrics.h"
#include "guard/state.h"
#include "lib/log.h"

struct file_writer;

struct guard_snapshot {
	struct guard_status status;
	struct guard_metrics metrics;	/* its procs and stops belong to the snapshot */
};

struct guard_report {
	const char *state_path;
	const char *metrics_path;	/* NULL: no metrics */
	struct file_writer *files;	/* NULL: write here and now */
	struct log_repeat state_err, metrics_err;
};

void guard_report__init(struct guard_report *r, const char *state_path,
			const char *metrics_path);
/* Hand both files to the writer (or write them now, without one). */
void guard_report__write(struct guard_report *r, const struct guard_snapshot *s);
void guard_snapshot__free(struct guard_snapshot *s);

#endif /* UMTRACE_GUARD_REPORT_H */
