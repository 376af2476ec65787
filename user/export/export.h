/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * user/export: everything umtrace writes for people or other tools, one
 * file per format: call lines (output.c), tables (summary_out.c,
 * kthreads_out.c, proc_pages_out.c), flamegraphs fed by one stack set
 * (flame_build.c, folded.c, svg.c, pprof.c, speedscope.c), the timeline
 * (timeline.c, its model; timeline_svg.c, its drawing). Uses lib/ to
 * rec/; only this folder and the commands print.
 */
/*
 * Post-mortem file formats. The flamegraph formats are each written from one
 * struct stackset (user/stacks/stackset.h), whose every stack starts at the process
 * frame "comm (pid)" and ends at the GPU API, so all of them show the same
 * tree. The timeline is drawn from a struct timeline (user/export/timeline.h).
 *
 * Every exporter writes one complete file to out and returns 0, or -errno:
 * -EINVAL for bad arguments, -ENOMEM, or the error of a failed write
 * (-ENOSPC, -EIO, ...). Output errors are found by flushing out and
 * testing ferror() at the end; out is not closed. On error the output is
 * incomplete and should be removed by the caller.
 *
 * One file each in user/export/: folded.c, svg.c, pprof.c, speedscope.c,
 * timeline_svg.c (the timeline it draws is built in timeline.c).
 */
#ifndef UMTRACE_EXPORT_H
#define UMTRACE_EXPORT_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "stacks/stackset.h"

struct timeline;

/*
 * Folded stacks for flamegraph.pl and inferno: "frame;frame;...;leaf value"
 * per stack, in stackset__sorted() order, for the metric m. Stacks whose
 * value is 0 are left out. In names ';' becomes ':' (control characters
 * are already spaces in a stackset), so every line splits unambiguously on
 * ';' and on its last space.
 */
int export_folded(const struct stackset *s, enum stack_metric m, FILE *out);

#define SVG_DEFAULT_WIDTH 1200

struct svg_opts {
	unsigned int width;	/* pixels; 0 means SVG_DEFAULT_WIDTH */
	const char *title;	/* NULL: a title naming the metric */
};

/*
 * A self-contained interactive flamegraph (icicle: the processes on top,
 * the GPU calls at the bottom of each column), one rectangle per frame
 * sized by its share of m. Hover shows name, amount (fmt_bytes_iec()) and
 * share; click zooms into a frame; "Search" highlights frames matching a
 * regular expression and shows their share of the total. Inline CSS and
 * JS only.
 * opts may be NULL.
 */
int export_svg(const struct stackset *s, enum stack_metric m,
	       const struct svg_opts *opts, FILE *out);

/*
 * A gzip-compressed pprof profile.proto. Every sample carries the three
 * values calls/count, host_space/bytes and gpu_space/bytes, and the labels
 * pid (num) and comm (str); m is the default_sample_type. Locations are the
 * stack's frames, process frame included (the root, last in location_id).
 */
int export_pprof(const struct stackset *s, enum stack_metric m, FILE *out);

/*
 * A speedscope file (https://www.speedscope.app/file-format-schema.json)
 * with one "sampled" profile of all processes for the metric m, unit
 * "bytes" (or "none" for calls): each stack is one sample, root first,
 * weighted by its value; stacks of value 0 are left out. One profile for
 * all, rather than one per process, keeps the processes side by side in
 * speedscope's views as in the SVG, the process frame being each stack's
 * root.
 */
int export_speedscope(const struct stackset *s, enum stack_metric m, FILE *out);

#define TIMELINE_WIDTH 1200
#define TIMELINE_HEIGHT 600

/*
 * An SVG of host memory over time: available, free and total memory
 * (lines), GPU-attributed host memory stacked per process (areas; the 8
 * largest by peak, the rest as one "other processes" band), GPU
 * allocation bursts (bars in a lane under the plot, the largest labelled
 * with their size), reclaim activity (a lane) and guard stops (vertical
 * lines labelled with comm, pid and reason). Time in seconds from the first
 * sample or event; memory in GiB, MiB or KiB by scale.
 *
 * More samples than pixel columns are cut down to each column's lowest and
 * highest available memory and the sample where attributed memory peaks,
 * so neither dips nor spikes vanish. -EINVAL when t has no samples.
 */
int export_timeline(const struct timeline *t, FILE *out);

/*
 * The end of every exporter: 0, or the write error as -errno. A write that
 * failed earlier left its errno, which nothing since has touched: the
 * exporters make no other calls that fail.
 */
static inline int export__finish(FILE *out)
{
	if (!ferror(out)) {
		errno = 0;
		if (!fflush(out) && !ferror(out))
			return 0;
	}
	return errno ? -errno : -EIO;
}

#endif /* UMTRACE_EXPORT_H */
