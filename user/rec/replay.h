/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What the commands that read a recording share (report FILE, flamegraph,
 * timeline): the attribution tables, a summary per process and entry point
 * and the call sites, filled from a recording (user/rec/recording.h) exactly
 * as `umtrace report` fills them live, so every command tells the same
 * story of one file. Hooks see each record after the tables took it: at a
 * sample, the tables hold what every call before it did.
 *
 * And the one file flamegraph and timeline write: created exclusively, or
 * with --force built beside it and renamed over it once complete, so that
 * a failed export never leaves half a file under the name asked for.
 */
#ifndef UMTRACE_REPLAY_H
#define UMTRACE_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "model/callsites.h"
#include "model/platform.h"
#include "rec/recording.h"
#include "model/summary.h"
#include "model/torch.h"

#define REPLAY_MAX_SITES 65536	/* past it, new stacks share one overflow site */

struct replay_opts;

struct replay_view {
	struct summary summary;
	struct callsites sites;
	struct torch_model torch;	/* PyTorch's caching allocator per process */
	uint64_t page_size;		/* the recording host's (live: this host's) */
	uint64_t first_call_ns;		/* of the calls taken; 0: none yet */
	uint64_t last_call_ns;
	uint64_t dropped;		/* records the recorder lost to a full ring buffer */
	/* From a recording only. */
	struct recording_header hdr;
	struct replay_stats st;
	uint64_t last_ns;		/* of any record, filtered out or not */
	bool info_seen;
	const struct replay_opts *opts;	/* during replay_view__load() */
};

/*
 * Called after the view took the record; any may be NULL. Calls, exits,
 * stops and allocator samples come only for the processes asked for; host
 * memory samples and info always.
 */
struct replay_hooks {
	void (*on_call)(void *ctx, struct replay_view *v, const struct umt_call_rec *r,
			uint32_t site);
	void (*on_exit)(void *ctx, struct replay_view *v, const struct umt_proc_exit_rec *r);
	void (*on_sample)(void *ctx, struct replay_view *v, const struct rec_sample *s);
	void (*on_stop)(void *ctx, struct replay_view *v, const struct rec_stop *s);
	void (*on_torch)(void *ctx, struct replay_view *v, const struct torch_sample *s);
};

struct replay_opts {
	const pid_t *pids;		/* keep only these processes; none: all */
	size_t n_pids;
	/*
	 * The host cost model: the recording host's (--platform when it was
	 * recorded, else what its driver said), unless given here.
	 */
	bool platform_given;
	enum platform platform;
	const struct replay_hooks *hooks;
	void *ctx;
};

/* Empty tables for a host of this page size. Must not move once set up. */
void replay_view__init(struct replay_view *v, uint64_t page_size);
/* One call and its stack into the tables (live or replayed); its site id. */
uint32_t replay_view__add_call(struct replay_view *v, const struct umt_call_rec *r,
			       const struct sym_frame *frames, size_t n);
/*
 * Replay the recording at path into v (freshly initialised). 0 when it is
 * a recording, after logging the one-line warning if it could not be read
 * to its end; -errno after logging the one-line error when it is not one
 * (or is unreadable): v->st.why says why.
 */
int replay_view__load(struct replay_view *v, const char *path, const struct replay_opts *o);
/* A sample of PyTorch's allocator into its model (live or replayed). */
void replay_view__add_torch(struct replay_view *v, const struct torch_sample *s);
/* A process's end, into every table (live or replayed). */
void replay_view__exit(struct replay_view *v, const struct umt_proc_exit_rec *r);
bool replay_view__wanted(const struct replay_view *v, uint32_t pid);
void replay_view__free(struct replay_view *v);

#endif /* UMTRACE_REPLAY_H */
