/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What `umtrace timeline` draws (export_timeline() in user/export/export.h): host
 * memory samples over time, the host memory attributed to GPU calls per
 * process at each sample, PyTorch's caching allocator per process and
 * device (reserved, and allocated's range), and events: GPU allocation
 * bursts, reclaim activity and guard stops. Filled with the builders below, in time order;
 * the builders live in user/export/timeline.c, the drawing in timeline_svg.c.
 *
 * Times are nanoseconds on any one clock (the drawing shows seconds from
 * the first sample or event). Memory is in bytes.
 *
 * Bounded: past the caps below entries are refused and counted in
 * refused; a process past TIMELINE_MAX_PROCS is charged to one "other
 * processes" series.
 */
#ifndef UMTRACE_TIMELINE_H
#define UMTRACE_TIMELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TIMELINE_MAX_SAMPLES	10000000
#define TIMELINE_MAX_PROCS	1024
#define TIMELINE_MAX_EVENTS	1000000	/* of each kind */
#define TIMELINE_COMM_LEN	32
#define TIMELINE_REASON_LEN	128
#define TIMELINE_MAX_TORCH	1024	/* allocator series (process and device) */
#define TIMELINE_TORCH_DRAWN	4	/* the largest drawn; the rest in the subtitle */
#define TIMELINE_TORCH_BANDS	8	/* episodes of a series (the model keeps 8) */

struct timeline_sample {
	uint64_t t_ns;
	uint64_t mem_total;
	uint64_t mem_available;
	uint64_t mem_free;
	uint64_t pool;			/* the driver's page pool holds (no process does) */
};

/* A process's attributed host bytes at sample index `sample`. */
struct timeline_point {
	size_t sample;
	uint64_t bytes;
};

struct timeline_proc {
	uint32_t pid;			/* 0: "other processes" */
	char comm[TIMELINE_COMM_LEN];
	struct timeline_point *points;	/* by sample; absent samples are 0 */
	size_t n_points, cap_points;
	uint64_t peak;
};

struct timeline_burst {
	uint64_t t_ns;
	uint32_t pid;
	uint64_t bytes;			/* GPU-attributed host bytes taken */
};

struct timeline_reclaim {
	uint64_t t_ns;
	uint64_t count;			/* reclaim events (or pages) at t_ns */
};

struct timeline_stop {
	uint64_t t_ns;
	uint32_t pid;
	char comm[TIMELINE_COMM_LEN];
	char reason[TIMELINE_REASON_LEN];
	uint64_t available;		/* host available memory when stopped */
};

/* PyTorch's caching allocator at one of its samples. */
struct timeline_torch_point {
	uint64_t t_ns;
	uint64_t reserved;
	uint64_t alloc_low, alloc_high;	/* allocated's range since the point before */
};

/* An episode of the allocator's life (model/torch.h), a shaded band. */
struct timeline_torch_band {
	uint64_t start_ns, end_ns;
	char kind[16];			/* "fragmentation", "leak", "cache-held" */
};

struct timeline_torch {
	uint32_t pid;
	uint32_t device;
	char comm[TIMELINE_COMM_LEN];
	bool reserved_known;		/* the hook gave the allocator's totals */
	struct timeline_torch_point *points;	/* in time order */
	size_t n_points, cap_points;
	uint64_t peak;			/* reserved's, or allocated's without it */
	struct timeline_torch_band bands[TIMELINE_TORCH_BANDS];	/* in time order */
	size_t n_bands;
};

/* Where the plot is, for what is drawn beside timeline_svg.c. */
struct timeline_frame {
	uint64_t tmin;
	double span;			/* ns, never 0 */
	double x0, pw;			/* plot left and width */
	double top, bottom;
	double unit, ytop;		/* bytes per axis unit, the axis top in units */
};

struct timeline {
	struct timeline_sample *samples;
	size_t n_samples, cap_samples;
	struct timeline_proc *procs;
	size_t n_procs, cap_procs;
	struct timeline_burst *bursts;
	size_t n_bursts, cap_bursts;
	struct timeline_reclaim *reclaims;
	size_t n_reclaims, cap_reclaims;
	struct timeline_stop *stops;
	size_t n_stops, cap_stops;
	struct timeline_torch *torch;
	size_t n_torch, cap_torch;
	uint64_t refused;		/* entries past a cap */
};

void timeline__init(struct timeline *t);
void timeline__free(struct timeline *t);

/*
 * A host memory sample (from /proc/meminfo). Times must not go backwards:
 * -EINVAL; -ENOSPC past TIMELINE_MAX_SAMPLES; -ENOMEM.
 */
int timeline__add_sample(struct timeline *t, uint64_t t_ns, uint64_t mem_total,
			 uint64_t mem_available, uint64_t mem_free);
/*
 * The host bytes attributed to process pid at the latest sample (a second
 * call for the same sample replaces the value). -EINVAL before any sample.
 */
int timeline__set_proc_value(struct timeline *t, uint32_t pid, const char *comm,
			     uint64_t host_bytes);
/*
 * What the driver's page pool holds at the latest sample: drawn as a line
 * of its own. -EINVAL before any sample.
 */
int timeline__set_pool(struct timeline *t, uint64_t bytes);
int timeline__add_burst(struct timeline *t, uint64_t t_ns, uint32_t pid, uint64_t bytes);
int timeline__add_reclaim(struct timeline *t, uint64_t t_ns, uint64_t count);
/* A guard stop: comm and reason are copied (cut to fit, cleaned). */
int timeline__add_stop(struct timeline *t, uint64_t t_ns, uint32_t pid, const char *comm,
		       const char *reason, uint64_t available);

/*
 * A sample of PyTorch's allocator for process pid, device: reserved (when
 * known) and allocated's range since the one before. A sample older than
 * the series' last is dropped (0).
 */
int timeline__add_torch(struct timeline *t, uint64_t t_ns, uint32_t pid, uint32_t device,
			const char *comm, uint64_t reserved, bool reserved_known,
			uint64_t alloc_low, uint64_t alloc_high);

/*
 * An episode of that series (it must have samples): kind (its name) from
 * start_ns to end_ns; -E2BIG past TIMELINE_TORCH_BANDS, -ENOENT without
 * samples.
 */
int timeline__add_torch_band(struct timeline *t, uint32_t pid, uint32_t device,
			     const char *kind, uint64_t start_ns, uint64_t end_ns);

/* timeline_torch.c: the largest series' highest figure (for the memory axis). */
uint64_t timeline_torch__max(const struct timeline *t);
/*
 * Draw the TIMELINE_TORCH_DRAWN largest series on the memory plot:
 * reserved a line, allocated's range a band under it, and each one's
 * episodes as shaded bands the plot's height, labelled by kind.
 */
void timeline_torch__draw(const struct timeline *t, const struct timeline_frame *fr,
			  FILE *out);
/* Its legend: for each drawn, fn(ctx, label, color, dashed). */
void timeline_torch__legend(const struct timeline *t,
			    void (*fn)(void *ctx, const char *label, const char *color, bool band),
			    void *ctx);

#endif /* UMTRACE_TIMELINE_H */
