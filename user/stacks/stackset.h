/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A set of unique stacks with their weights: the one input every flamegraph
 * exporter (folded, SVG, pprof, speedscope) is fed from, so that all of them
 * draw the same tree.
 *
 * A stack is a process and its frames. The caller passes the frames
 * outermost first, the GPU API ("cuMemAlloc_v2") last; the set itself puts
 * the process frame "comm (pid)" in front. So in every stack it hands back,
 * frames[0] is the process and frames[n_frames - 1] the GPU API, whichever
 * format is written from it.
 *
 * Adding the same (pid, comm, frames) again sums the values. Frame strings
 * are interned: each distinct name is stored once and has an id, which the
 * exporters use for their own tables (pprof functions, speedscope frames).
 *
 * Frame text is stored cleaned (see text__clean()): valid UTF-8 without
 * control characters, at most STACKSET_NAME_MAX bytes. Every exporter may
 * rely on that and only has its own syntax to escape.
 *
 * Bounded: at most max_stacks unique stacks. Samples that would need a new
 * stack past the cap are refused and counted, never silently lost.
 * Not thread-safe.
 */
#ifndef UMTRACE_STACKSET_H
#define UMTRACE_STACKSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum stack_metric {
	STACK_VAL__CALLS,	/* GPU calls made from the stack */
	STACK_VAL__HOST_BYTES,	/* host bytes taken inside those calls */
	STACK_VAL__GPU_BYTES,	/* GPU bytes the calls asked for */
	STACK_VAL__COUNT,
};

#define STACKSET_MAX_STACKS	1000000	/* the default cap on unique stacks */
#define STACKSET_MAX_DEPTH	1024	/* frames per stack, the process frame not counted */
#define STACKSET_NAME_MAX	4096	/* bytes per frame name; longer names are cut */

struct stack {
	uint32_t pid;
	const char *comm;		/* cleaned */
	uint32_t comm_id;		/* comm as an id for stackset__name() */
	size_t n_frames;		/* the process frame included: at least 2 */
	const char *const *frames;	/* frames[0] "comm (pid)" ... the GPU API */
	const uint32_t *frame_ids;	/* the same frames as ids for stackset__name() */
	uint64_t values[STACK_VAL__COUNT];
};

struct stackset;

/* max_stacks 0 means STACKSET_MAX_STACKS. NULL and errno set on failure. */
struct stackset *stackset__new(size_t max_stacks);
void stackset__free(struct stackset *set);

/*
 * Charge values to the stack (pid, comm, frames[0..n)), frames outermost
 * first with the GPU API last. Returns 0; -EINVAL for no frames or a NULL
 * string; -E2BIG for more than STACKSET_MAX_DEPTH frames; -ENOSPC when the
 * stack is new and the set is full (the sample is counted in
 * stackset__refused()); -ENOMEM. Sums saturate at UINT64_MAX.
 */
int stackset__add(struct stackset *set, uint32_t pid, const char *comm,
		  const char *const *frames, size_t n,
		  const uint64_t values[STACK_VAL__COUNT]);

/* Unique stacks held. */
size_t stackset__count(const struct stackset *set);
/* Samples refused because the set was full. */
uint64_t stackset__refused(const struct stackset *set);
/* The sum of one value over every stack held (refused samples not in it). */
uint64_t stackset__total(const struct stackset *set, enum stack_metric m);

/*
 * Call cb for every stack in the order they were first added. A non-zero
 * return from cb stops the walk and is returned.
 */
int stackset__for_each(const struct stackset *set,
		       int (*cb)(const struct stack *st, void *ctx), void *ctx);

/*
 * Every stack, ordered frame by frame by name (strcmp), so stacks sharing
 * a prefix are adjacent: the order a tree is built in. The caller frees
 * the array (not the stacks). NULL and errno set on failure; an empty set
 * gives a valid array (of one NULL).
 */
const struct stack **stackset__sorted(const struct stackset *set);

/* Interned names (frames and comms) have ids 0..stackset__n_names()-1. */
size_t stackset__n_names(const struct stackset *set);
const char *stackset__name(const struct stackset *set, uint32_t id);

/* "calls", "host bytes", "GPU bytes": for people. */
const char *stack_metric__label(enum stack_metric m);
/* Counted in bytes (as opposed to calls). */
bool stack_metric__is_bytes(enum stack_metric m);
/* "calls", "host_bytes" or "host", "gpu_bytes" or "gpu" (any case). 0 or -EINVAL. */
int stack_metric__parse(const char *s, enum stack_metric *m);

/*
 * Text as every exporter can take it: src copied to dst (len bytes, at
 * least 4), with control characters (utf8__is_control(): C0, DEL, C1 and
 * the bidirectional overrides) made spaces and invalid UTF-8 (as well as
 * U+FFFE and U+FFFF, which XML forbids) replaced by U+FFFD; cut at a
 * character boundary to fit. Returns the length.
 */
size_t text__clean(char *dst, size_t len, const char *src);

#endif /* UMTRACE_STACKSET_H */
