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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "guard/state.h"
#include "lib/log.h"

struct file_writer;

/*
 * The guard's figures in Prometheus text format, for node_exporter's
 * textfile collector (--metrics-file DIR/NAME.prom). The guard's own are
 * named umtrace_guard_*, PyTorch's caching allocator's (--torch)
 * umtrace_torch_*; the file is replaced atomically, never written in place.
 */

/* umtrace_guard_stops_total{reason="..."}: pass every reason, even at 0. */
struct guard_metrics_count {
	const char *reason;	/* "admission", "floor", "reclaim", "policy" */
	uint64_t count;
};

struct guard_metrics_process {
	pid_t pid;
	const char *comm;
	uint64_t host_bytes;	/* GPU-attributed host memory */
	bool stopped;		/* by the guard */
	bool warned;		/* of its floor, this episode (--warn-eta) */
	/* its host bytes grow on this horizon (s; 0: none), reaching the floor in */
	uint64_t slide_horizon, seconds_to_floor;
};

/* umtrace_torch_*_bytes{pid,comm,device}: a process's allocator on a device. */
struct guard_metrics_torch {
	pid_t pid;
	const char *comm;
	uint32_t device;
	uint64_t allocated;
	uint64_t reserved;
	bool reserved_known;	/* the old 3-argument hook gives no totals */
};

/*
 * One snapshot of the daemon, taken in its loop: the state file is its
 * status; the metrics are its status and what only they show.
 */
struct guard_snapshot {
	struct guard_status status;
	bool up;		/* false in the last file written at exit */
	uint64_t mem_available;
	uint64_t mem_free;
	uint64_t mem_total;
	uint64_t resumes;
	bool warn_on;		/* --warn-eta: the warnings' families are written */
	uint64_t kernel_decisions;	/* the kernel side's, told or let go */
	double last_stop_time;	/* Unix seconds; 0: never */
	/* What the daemon could not keep: log lines, files, flight events. */
	uint64_t log_dropped, log_stops_dropped;
	uint64_t file_writes_failed, file_writes_superseded;
	bool flight_on;
	uint64_t flight_bytes, flight_evicted;
	/* Arrays the snapshot owns (guard_snapshot__free). */
	const struct guard_metrics_count *stops;
	size_t n_stops;
	const struct guard_metrics_process *procs;
	size_t n_procs;
	bool torch_on;		/* the hook is probed: its families are written */
	const struct guard_metrics_torch *torch;
	size_t n_torch;
};

/* Not secret, and node_exporter reads it as another user. */
#define METRICS_MODE 0644

/* The exposition text. 0 or -errno (the stream's). */
int metrics__format(FILE *f, const struct guard_snapshot *s);
/* The same in memory (the caller frees it), or NULL with errno set. */
char *metrics__text(const struct guard_snapshot *s, size_t *len);

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
