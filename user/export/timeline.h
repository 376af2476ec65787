/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What `umtrace timeline` draws (export_timeline() in user/export/export.h): host
 * memory samples over time, the host memory attributed to GPU calls per
 * process at each sample, and events: GPU allocation bursts, reclaim
 * activity and guard stops. Filled with the builders below, in time order;
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

#include <stddef.h>
#include <stdint.h>

#define TIMELINE_MAX_SAMPLES	10000000
#define TIMELINE_MAX_PROCS	1024
#define TIMELINE_MAX_EVENTS	1000000	/* of each kind */
#define TIMELINE_COMM_LEN	32
#define TIMELINE_REASON_LEN	128

struct timeline_sample {
	uint64_t t_ns;
	uint64_t mem_total;
	uint64_t mem_available;
	uint64_t mem_free;
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
int timeline__add_burst(struct timeline *t, uint64_t t_ns, uint32_t pid, uint64_t bytes);
int timeline__add_reclaim(struct timeline *t, uint64_t t_ns, uint64_t count);
/* A guard stop: comm and reason are copied (cut to fit, cleaned). */
int timeline__add_stop(struct timeline *t, uint64_t t_ns, uint32_t pid, const char *comm,
		       const char *reason, uint64_t available);

#endif /* UMTRACE_TIMELINE_H */
