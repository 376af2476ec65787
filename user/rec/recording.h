/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * user/rec: recordings: the crash-safe container (recfile_*.c), the
 * records in it, written and replayed (recording_*.c, rec_sample.c), the
 * guard's in-memory flight recorder dumped as one (flight_recorder.c),
 * and a replay into the model (replay.c). Uses lib/, model/, stacks/.
 */
/*
 * Recordings: GPU calls with their symbolized stacks, process exits, host
 * memory samples and the guard's stops, written to a recfile (user/rec/recfile.h)
 * and replayed later, on any machine, into the same consumers as the ring
 * buffer feeds (summary, call sites).
 *
 * Inside a chunk, records follow each other as
 *
 *   u8 type, varint body length, body
 *
 * so a reader skips types it does not know and ignores fields appended to
 * the end of a body by a later writer. Integers are LEB128 varints
 * ("s": zigzag-signed). Strings and stacks are interned: a STR or STACK
 * record defines the next id (1, 2, ... in file order; 0 means none)
 * before the first record that uses it, in the same or an earlier chunk.
 *
 *   STR     the string's bytes
 *   STACK   n, then per frame: func str, module str, addr, offset
 *   CALL    present bits, s ts delta, duration, s pid delta, s tid - pid,
 *           api, size, s handle delta, pages_taken, comm str, [pcomm str],
 *           stack id, then [flags] [aux] [s ret] [end] [pages_freed]
 *           [faulted_pages] [device_pages] as the present bits say
 *           (absent: 0; device_pages: pages from NUMA nodes that are not
 *           host RAM, left out of pages_taken)
 *   EXIT    ts, pid, comm str
 *   SAMPLE  present bits, ts, MemTotal, MemAvailable, MemFree (bytes),
 *           [PSI some/full avg10 (hundredths of %), some/full total (us)],
 *           allocstall, pgscan_direct, pgsteal_direct
 *   STOP    ts, pid, comm str, reason, reason text str, MemAvailable,
 *           GPU-attributed host bytes, top call site str
 *   INFO    platform forced, platform the driver says, records dropped
 *           so far, sample interval (ms)
 *   TORCH   ts, pid, device, flags (model/torch.h's TORCH_S_*), allocated,
 *           reserved, peak allocated, peak reserved, allocated's lowest and
 *           highest since the one before, block allocations, block frees,
 *           comm str: PyTorch's caching allocator, per process and device
 *
 * The deltas of CALL are against the previous CALL of the same chunk (0
 * at a chunk's start), so each chunk decodes given only the ids before it.
 */
#ifndef UMTRACE_RECORDING_H
#define UMTRACE_RECORDING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "rec/recfile.h"
#include "model/torch.h"
#include "stacks/symbolize.h"
#include "umtrace.h"

/*
 * The kinds of record a recording holds, by their number in the file
 * (never renumbered). The flight recorder keeps its events as the same
 * kinds: CALL, EXIT, SAMPLE, STOP and TORCH are what it holds and dumps.
 */
enum rec_type {
	REC_STR = 1,
	REC_STACK = 2,
	REC_CALL = 3,
	REC_EXIT = 4,
	REC_SAMPLE = 5,
	REC_STOP = 6,
	REC_INFO = 7,
	REC_TORCH = 8,
};

/* Frames kept per stack; deeper stacks are cut. */
#define REC_FRAMES_MAX		256
#define REC_STR_MAX		65536
#define REC_STOP_REASON_MAX	128
#define REC_STOP_SITE_MAX	1024

/* A host memory sample. */
struct rec_sample {
	uint64_t ts_ns;			/* CLOCK_MONOTONIC */
	uint64_t mem_total;		/* bytes, /proc/meminfo */
	uint64_t mem_available;
	uint64_t mem_free;
	bool has_psi;			/* /proc/pressure/memory exists */
	uint32_t psi_some_avg10;	/* hundredths of a percent */
	uint32_t psi_full_avg10;
	uint64_t psi_some_total_us;
	uint64_t psi_full_total_us;
	uint64_t allocstall;		/* /proc/vmstat: sum of allocstall_* */
	uint64_t pgscan_direct;		/* sums over zones where split */
	uint64_t pgsteal_direct;
	/* bytes the driver's pool shrinker gave back since the recording began */
	bool has_shrunk;
	uint64_t driver_shrunk;
};

/* The guard stopped a process. reason's values are the guard's. */
struct rec_stop {
	uint64_t ts_ns;
	uint32_t pid;
	char comm[TASK_COMM_LEN];
	uint32_t reason;
	char reason_text[REC_STOP_REASON_MAX];
	uint64_t mem_available;		/* bytes, when it decided */
	uint64_t gpu_host_bytes;	/* host bytes its GPU allocations hold */
	char site[REC_STOP_SITE_MAX];	/* its top call site, as text */
};

/* About the recording as a whole; written again when it changes. */
struct rec_info {
	/* enum platform's values, which the file keeps: 0 auto, 1 unified, 2 discrete */
	uint32_t platform_forced;	/* --platform */
	uint32_t platform_driver;	/* what the recording host's driver said */
	uint64_t dropped;		/* records lost to a full ring buffer so far */
	uint32_t sample_interval_ms;
	/*
	 * The calls' host pages were not watched (the guard far from its
	 * floor): their HOST+ and HOST- are not figures, and the driver's pool
	 * is not kept from them. Written after the rest: an older file reads
	 * as 0.
	 */
	uint32_t pages_unseen;
};

/* Read the sample fields from /proc now (ts_ns included). 0 or -errno. */
struct numa_nodes;
/* Host RAM only: the device nodes' memory is left out (meminfo__read_host). */
int rec_sample__read(struct rec_sample *s, const struct numa_nodes *nodes);
/* The parts of it, from the files' text (for tests). */
int rec_sample__parse_psi(const char *text, struct rec_sample *s);
void rec_sample__parse_vmstat(const char *text, struct rec_sample *s);

/* ---- writing ---- */

enum recording_flags {
	RECORDING_FORCE = RECFILE_FORCE,	/* replace path atomically */
	RECORDING_SYNC = RECFILE_SYNC,		/* fdatasync every chunk */
};

struct recording_writer;

struct recording_wstats {
	uint64_t calls, exits, samples, stops, torch;
	uint64_t strings, stacks;	/* defined */
	uint64_t chunks;
	uint64_t file_bytes;		/* written so far */
	uint64_t raw_bytes;		/* before compression */
};

/* Create path (see recfile_writer__open). NULL with errno set. */
struct recording_writer *recording_writer__open(const char *path, unsigned int flags);
/*
 * Add one call and its symbolized stack, innermost first (r->stack is
 * not read). Every add returns 0, or the first write error met: then
 * nothing more is written, and the file reads up to its last whole chunk.
 */
int recording_writer__add_call(struct recording_writer *w, const struct umt_call_rec *r,
			       const struct sym_frame *frames, size_t n);
int recording_writer__add_exit(struct recording_writer *w, const struct umt_proc_exit_rec *r);
int recording_writer__add_sample(struct recording_writer *w, const struct rec_sample *s);
int recording_writer__add_stop(struct recording_writer *w, const struct rec_stop *s);
int recording_writer__set_info(struct recording_writer *w, const struct rec_info *i);
int recording_writer__add_torch(struct recording_writer *w, const struct torch_sample *s);
/* Flush the chunk if its oldest record is a second old: call it often. */
int recording_writer__tick(struct recording_writer *w);
int recording_writer__flush(struct recording_writer *w);
void recording_writer__stats(const struct recording_writer *w, struct recording_wstats *st);
/* RECORDING_FORCE: put the file in place of path now (close does too). */
int recording_writer__commit(struct recording_writer *w);
/* Flush, end the file, close, free. 0 or the first error met. */
int recording_writer__close(struct recording_writer *w);
/* Close and remove the file, free: nothing worth keeping was written. */
void recording_writer__discard(struct recording_writer *w);

/* ---- replaying ---- */

struct recording_header {
	struct recfile_info file;
};

/*
 * Callbacks, in file order; any may be NULL. Pointers are valid during
 * the call only, but frames' strings live until replay returns.
 */
struct recording_ops {
	void (*on_header)(void *ctx, const struct recording_header *h);
	void (*on_info)(void *ctx, const struct rec_info *i);
	/* r->stack and r->stack_len are unused (0): the stack is frames. */
	void (*on_call)(void *ctx, const struct umt_call_rec *r,
			const struct sym_frame *frames, size_t n);
	void (*on_exit)(void *ctx, const struct umt_proc_exit_rec *r);
	void (*on_sample)(void *ctx, const struct rec_sample *s);
	void (*on_stop)(void *ctx, const struct rec_stop *s);
	void (*on_torch)(void *ctx, const struct torch_sample *s);
};

struct replay_stats {
	struct recfile_rstats file;	/* chunks read and lost */
	uint64_t calls, exits, samples, stops, infos, torch;
	uint64_t strings, stacks;
	uint64_t skipped;		/* records of types this build does not know */
	bool damaged;			/* reading stopped early (file.why says why) */
	char why[160];			/* the error when replay fails */
};

/*
 * Read the recording at path and call ops for each record. Returns 0 when
 * the file is a recording (st says whether all of it could be read), or
 * -errno with a one-line reason in st->why: EINVAL not a recording,
 * EPROTONOSUPPORT an unknown format version, EBADMSG a damaged header.
 */
int recording__replay(const char *path, const struct recording_ops *ops, void *ctx,
		      struct replay_stats *st);
/* The same over a recording held in memory. */
int recording__replay_mem(const void *buf, size_t len, const struct recording_ops *ops,
			  void *ctx, struct replay_stats *st);
/*
 * The one-line warning for a recording not read to its end, or NULL when
 * it was: "recording damaged: chunk 3 at byte 1234: checksum mismatch;
 * read 3 chunks (1.2M), lost 4567 bytes (2 chunks)".
 */
const char *replay_stats__warning(const struct replay_stats *st, char *buf, size_t len);

#endif /* UMTRACE_RECORDING_H */
