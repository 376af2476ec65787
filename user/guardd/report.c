// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The state file and the metrics: written off the loop, and the metrics' text. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "guardd/report.h"
#include "lib/escape.h"
#include "lib/file_writer.h"
#include "lib/out_file.h"
#include "lib/sys.h"

void guard_report__init(struct guard_report *r, const char *state_path,
			const char *metrics_path)
{
	memset(r, 0, sizeof(*r));
	r->state_path = state_path;
	r->metrics_path = metrics_path;
	r->state_err.what = "guard: cannot write the state file";
	r->metrics_err.what = "guard: cannot write the metrics file";
}

/*
 * Hand a file's new content to the writer thread (the loop goes on at
 * once), or, before it runs, write it here. Failures are logged when
 * they start, now and then while they last, and when they end.
 */
static void put_file(struct guard_report *r, struct log_repeat *rep, const char *path,
		     char *buf, size_t len, mode_t mode, bool mkdir)
{
	int err;

	if (!buf) {
		err = -ENOMEM;
	} else if (r->files) {
		file_writer__put(r->files, path, buf, len, mode, mkdir);
		/* The last write that ended: this one may still be on its way. */
		err = file_writer__result(r->files, path);
	} else {
		err = mkdir ? file__make_parent(path) : 0;
		if (!err)
			err = out_file__replace(path, buf, len, mode);
		free(buf);
	}
	if (err > 0)
		return;
	if (err)
		log__repeat(rep, clock__mono_ms(), "guard: cannot write %s: %s", path,
			    strerror(-err));
	else
		log__repeat_end(rep);
}

void guard_report__write(struct guard_report *r, const struct guard_snapshot *s)
{
	size_t len = 0;
	char *buf;

	buf = guard_state__format(&s->status, &len);
	/* The state file's directory is root's, made 0700 when missing. */
	put_file(r, &r->state_err, r->state_path, buf, len, 0600, true);
	if (!r->metrics_path)
		return;
	buf = metrics__text(s, &len);
	put_file(r, &r->metrics_err, r->metrics_path, buf, len, METRICS_MODE, false);
}

void guard_snapshot__free(struct guard_snapshot *s)
{
	free((void *)s->procs);
	free((void *)s->stops);
	free((void *)s->torch);
	s->procs = NULL;
	s->stops = NULL;
	s->torch = NULL;
}

/* ---- the Prometheus text ---- */

#define PREFIX "umtrace_guard_"

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP " PREFIX "%s %s\n# TYPE " PREFIX "%s %s\n", name, help, name, type);
}

static void gauge(FILE *f, const char *name, const char *help, uint64_t v)
{
	family(f, name, "gauge", help);
	fprintf(f, PREFIX "%s %" PRIu64 "\n", name, v);
}

static void counter(FILE *f, const char *name, const char *help, uint64_t v)
{
	family(f, name, "counter", help);
	fprintf(f, PREFIX "%s %" PRIu64 "\n", name, v);
}

enum proc_col { PROC_HOST_BYTES, PROC_STOPPED, PROC_WARNED };

static uint64_t proc_value(const struct guard_metrics_process *r, enum proc_col c)
{
	if (c == PROC_HOST_BYTES)
		return r->host_bytes;
	return c == PROC_STOPPED ? r->stopped : r->warned;
}

static void process_rows(FILE *f, const struct guard_snapshot *s, const char *name,
			 enum proc_col c)
{
	const struct guard_metrics_process *r;
	size_t i;

	for (i = 0; i < s->n_procs; i++) {
		r = &s->procs[i];
		fprintf(f, PREFIX "%s{pid=\"%d\",comm=\"", name, (int)r->pid);
		esc__prom_label(f, r->comm);
		fprintf(f, "\"} %" PRIu64 "\n", proc_value(r, c));
	}
}

static void torch_rows(FILE *f, const struct guard_snapshot *s, bool reserved)
{
	const struct guard_metrics_torch *r;
	size_t i;

	for (i = 0; i < s->n_torch; i++) {
		r = &s->torch[i];
		if (reserved && !r->reserved_known)
			continue;
		fprintf(f, "umtrace_torch_%s_bytes{pid=\"%d\",comm=\"",
			reserved ? "reserved" : "allocated", (int)r->pid);
		esc__prom_label(f, r->comm);
		fprintf(f, "\",device=\"%u\"} %" PRIu64 "\n", r->device,
			reserved ? r->reserved : r->allocated);
	}
}

/* Each job whose host bytes grow: the floor's time if it went on alone. */
static void job_slides(FILE *f, const struct guard_snapshot *s)
{
	const struct guard_metrics_process *r;
	size_t i;

	for (i = 0; i < s->n_procs; i++) {
		r = &s->procs[i];
		if (!r->slide_horizon)
			continue;
		fprintf(f, "umtrace_seconds_to_floor{horizon=\"%" PRIu64 "s\",pid=\"%d\",comm=\"",
			r->slide_horizon, (int)r->pid);
		esc__prom_label(f, r->comm);
		fprintf(f, "\"} %" PRIu64 "\n", r->seconds_to_floor);
	}
}

/* PyTorch's caching allocator: a family of its own, outside umtrace_guard_*. */
static void torch_families(FILE *f, const struct guard_snapshot *s)
{
	if (!s->torch_on)
		return;
	fputs("# HELP umtrace_torch_allocated_bytes Bytes in blocks PyTorch's CUDA caching "
	      "allocator has handed out (torch.cuda.memory_allocated).\n"
	      "# TYPE umtrace_torch_allocated_bytes gauge\n", f);
	torch_rows(f, s, false);
	fputs("# HELP umtrace_torch_reserved_bytes Bytes PyTorch's CUDA caching allocator "
	      "holds from the driver (torch.cuda.memory_reserved).\n"
	      "# TYPE umtrace_torch_reserved_bytes gauge\n", f);
	torch_rows(f, s, true);
}

static uint64_t stopped_processes(const struct guard_snapshot *s)
{
	uint64_t n = 0;
	size_t i;

	for (i = 0; i < s->n_procs; i++)
		n += s->procs[i].stopped;
	return n;
}

int metrics__format(FILE *f, const struct guard_snapshot *s)
{
	size_t i;

	gauge(f, "up", "1 while umtrace guard runs, 0 in the file it leaves at exit.", s->up);
	gauge(f, "floor_bytes", "The guard's FLOOR threshold.", s->status.floor);
	gauge(f, "low_bytes", "The guard's LOW threshold.", s->status.low);
	gauge(f, "drop_bytes", "The guard's DROP threshold, per sample.", s->status.drop);
	gauge(f, "auto_resume_bytes",
	      "Stopped jobs are resumed above this (0: only by an operator).",
	      s->status.auto_resume);
	family(f, "headroom_bytes", "gauge",
	       "Host memory left above the floor (negative below it).");
	fprintf(f, PREFIX "headroom_bytes %" PRId64 "\n", s->status.headroom);
	gauge(f, "mem_available_bytes", "MemAvailable at the last sample.", s->mem_available);
	gauge(f, "mem_free_bytes", "MemFree at the last sample.", s->mem_free);
	gauge(f, "mem_total_bytes", "MemTotal.", s->mem_total);
	if (s->status.driver_pool_seen)
		gauge(f, "driver_pool_bytes", "Host memory the NVIDIA driver's page pool holds: "
		      "no process's, not in MemAvailable, given back under pressure.",
		      s->status.driver_pool);

	family(f, "stops_total", "counter", "Processes stopped (or, in a dry run, not), by reason.");
	for (i = 0; i < s->n_stops; i++) {
		fputs(PREFIX "stops_total{reason=\"", f);
		esc__prom_label(f, s->stops[i].reason);
		fprintf(f, "\"} %" PRIu64 "\n", s->stops[i].count);
	}
	counter(f, "resumes_total", "Processes resumed by auto-resume.", s->resumes);
	gauge(f, "stopped_processes", "Processes the guard holds stopped now.",
	      stopped_processes(s));
	counter(f, "signal_failures_total", "Stops or resumes that could not be delivered.",
		s->status.send_failed);
	counter(f, "reclaim_events_total", "Direct reclaim entries seen, host-wide.",
		s->status.reclaims);
	counter(f, "kernel_decisions_total", "Stops decided by the guard's kernel side.",
		s->kernel_decisions);
	counter(f, "admission_checks_total", "GPU calls checked by the kernel side.",
		s->status.checks);
	counter(f, "samples_total", "/proc/meminfo samples taken.", s->status.samples);
	gauge(f, "page_programs_attached",
	      "1: the per-page programs are attached (near the floor, or always).",
	      s->status.pages_on);
	counter(f, "page_program_arms_total",
		"Times the per-page programs were attached near the floor.", s->status.arms);
	family(f, "last_stop_timestamp_seconds", "gauge",
	       "When the last process was stopped, in Unix time (0: never).");
	if (s->last_stop_time > 0)
		fprintf(f, PREFIX "last_stop_timestamp_seconds %.3f\n", s->last_stop_time);
	else
		fputs(PREFIX "last_stop_timestamp_seconds 0\n", f);

	counter(f, "log_lines_dropped_total",
		"Log lines the daemon dropped: its log queue was full (a stalled stderr).",
		s->log_dropped);
	counter(f, "log_stop_lines_dropped_total", "Of those, lines that told a stop.",
		s->log_stops_dropped);
	counter(f, "file_writes_failed_total",
		"Writes of the state file or the metrics that failed.", s->file_writes_failed);
	counter(f, "file_writes_superseded_total",
		"Contents of those files replaced by newer ones before a slow disk took them.",
		s->file_writes_superseded);
	if (s->flight_on) {
		gauge(f, "flight_recorder_bytes", "Memory the flight recorder holds.",
		      s->flight_bytes);
		counter(f, "flight_recorder_evicted_total",
			"Events the flight recorder let go, by age or its memory budget.",
			s->flight_evicted);
	}

	/* Absent when nothing slides: never a huge number standing for none. */
	fputs("# HELP umtrace_seconds_to_floor When the host reaches the guard's floor: at the "
	      "pace its metric falls now, or (pid, comm) that job's GPU-attributed host memory "
	      "grows; on the shortest horizon that shows a slide.\n"
	      "# TYPE umtrace_seconds_to_floor gauge\n", f);
	if (s->status.slide_horizon)
		fprintf(f, "umtrace_seconds_to_floor{horizon=\"%" PRIu64 "s\"} %" PRIu64 "\n",
			s->status.slide_horizon, s->status.seconds_to_floor);
	job_slides(f, s);

	family(f, "process_host_bytes", "gauge",
	       "Host memory a process took in GPU allocation calls and holds.");
	process_rows(f, s, "process_host_bytes", PROC_HOST_BYTES);
	family(f, "process_stopped", "gauge", "1 if the guard holds the process stopped.");
	process_rows(f, s, "process_stopped", PROC_STOPPED);
	if (s->warn_on) {
		counter(f, "warnings_total", "Jobs warned that their floor is near (--warn-eta).",
			s->status.warnings);
		family(f, "process_warned", "gauge",
		       "1 if the process was warned of its floor and is still on its way there.");
		process_rows(f, s, "process_warned", PROC_WARNED);
	}
	torch_families(f, s);

	if (fflush(f) || ferror(f))
		return errno ? -errno : -EIO;
	return 0;
}

char *metrics__text(const struct guard_snapshot *s, size_t *len)
{
	char *buf = NULL;
	FILE *f;
	int err;

	f = open_memstream(&buf, len);
	if (!f)
		return NULL;
	err = metrics__format(f, s);
	if (fclose(f) && !err)
		err = -ENOMEM;
	if (err) {
		free(buf);
		errno = -err;
		return NULL;
	}
	return buf;
}
