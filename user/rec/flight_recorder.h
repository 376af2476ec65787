/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A flight recorder for the guard daemon: the last few seconds of GPU
 * calls (with their symbolized stacks), process exits, host memory
 * samples, PyTorch allocator samples and stops, kept in memory within a byte budget, and written
 * out as a complete recording (user/rec/recording.h) when something happens.
 *
 * Bounded both ways: an event older than the window (by its timestamp,
 * against the newest one added or the clock at dump time) is dropped, and
 * so is the oldest event whenever the budget would be passed. Stacks are
 * kept once, shared by the calls that have them, and freed with the last.
 * Not thread-safe: one thread adds, expires and dumps.
 */
#ifndef UMTRACE_FLIGHT_RECORDER_H
#define UMTRACE_FLIGHT_RECORDER_H

#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "rec/recording.h"
#include "stacks/symbolize.h"
#include "umtrace.h"

struct flight_recorder;

struct flight_stats {
	uint64_t events;	/* held now */
	uint64_t calls;		/* held now */
	uint64_t stacks;	/* distinct stacks held now */
	uint64_t bytes;		/* memory held, against max_bytes */
	uint64_t evicted;	/* events dropped so far, by age or budget */
	uint64_t oldest_ns, newest_ns;	/* timestamps of what is held */
};

/* The smallest budget: room for the first few events. */
#define FLIGHT_MIN_BYTES	(64 * 1024)

/*
 * Keep window_ns of events in at most max_bytes (counting the event
 * array, stacks and stops; at least FLIGHT_MIN_BYTES). NULL with errno
 * set (EINVAL: a budget too small).
 */
struct flight_recorder *flight__new(uint64_t window_ns, size_t max_bytes);
/* 0, or -ENOMEM (the event is not kept). frames' strings are copied. */
int flight__add_call(struct flight_recorder *fr, const struct umt_call_rec *r,
		     const struct sym_frame *frames, size_t n);
int flight__add_exit(struct flight_recorder *fr, const struct umt_proc_exit_rec *r);
int flight__add_sample(struct flight_recorder *fr, const struct rec_sample *s);
int flight__add_stop(struct flight_recorder *fr, const struct rec_stop *s);
int flight__add_torch(struct flight_recorder *fr, const struct torch_sample *t);
/* The recording's INFO record (platform, lost records) in dumps. */
void flight__set_info(struct flight_recorder *fr, const struct rec_info *i);
/* Drop what is older than the window at now_ns (CLOCK_MONOTONIC). */
void flight__expire(struct flight_recorder *fr, uint64_t now_ns);
void flight__stats(const struct flight_recorder *fr, struct flight_stats *st);
/*
 * Expire against the clock, then write everything held, oldest first, as
 * a self-contained recording at path (created 0600, never overwritten:
 * EEXIST). What is held stays held. 0 or -errno; a dump that failed
 * part way leaves a file that reads up to its last whole chunk.
 */
int flight__dump(struct flight_recorder *fr, const char *path);
/* The same with recording_writer__open's flags (RECORDING_FORCE...). */
int flight__dump_flags(struct flight_recorder *fr, const char *path, unsigned int flags);
void flight__free(struct flight_recorder *fr);

#endif /* UMTRACE_FLIGHT_RECORDER_H */
