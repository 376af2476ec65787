// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The guard's flight recorder: the last --flight-seconds of GPU calls,
 * exits, memory samples and stops, kept in memory and written into each
 * post-mortem bundle as a recording that `umtrace report` and
 * `flamegraph` read like any other.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "guardd/guard.h"
#include "lib/log.h"
#include "rec/flight_recorder.h"

/* A daemon under MemoryMax=64M keeps its recorder well inside it. */
#define FLIGHT_MAX_BYTES (16u << 20)

int guard_flight__init(struct guard *g)
{
	if (!g->opt.flight_seconds || !g->opt.postmortem_dir)
		return 0;
	g->flight = flight__new(g->opt.flight_seconds * 1000000000ULL, FLIGHT_MAX_BYTES);
	if (!g->flight) {
		elog("cannot create the flight recorder: %s", strerror(errno));
		return -errno;
	}
	return 0;
}

void guard_flight__call(struct guard *g, const struct umt_call_rec *r,
			const struct sym_frame *frames, size_t n)
{
	if (g->flight)
		flight__add_call(g->flight, r, frames, n);
}

void guard_flight__exit(struct guard *g, const struct umt_proc_exit_rec *r)
{
	if (g->flight)
		flight__add_exit(g->flight, r);
}

void guard_flight__sample(struct guard *g)
{
	struct rec_sample s;

	if (g->flight && !rec_sample__read(&s, &g->session.nodes))
		flight__add_sample(g->flight, &s);
}

void guard_flight__stop(struct guard *g, const struct guard_stop *st)
{
	struct rec_stop s = {
		.ts_ns = st->ts_ns,
		.pid = st->pid,
		.reason = st->reason,
		.mem_available = st->metric_bytes,
		.gpu_host_bytes = st->held,
	};

	if (!g->flight)
		return;
	memcpy(s.comm, st->comm, sizeof(s.comm));
	/* The recording keeps what fits; cut, not refused. */
	snprintf(s.reason_text, sizeof(s.reason_text), "%.*s",
		 (int)sizeof(s.reason_text) - 1, st->detail);
	snprintf(s.site, sizeof(s.site), "%.*s", (int)sizeof(s.site) - 1, st->top_site);
	flight__add_stop(g->flight, &s);
}

void guard_flight__torch(struct guard *g, const struct torch_sample *s)
{
	if (g->flight)
		flight__add_torch(g->flight, s);
}

int guard_flight__dump(struct guard *g, const char *dir)
{
	char path[4200];

	if (!g->flight)
		return 0;
	snprintf(path, sizeof(path), "%s/recording.umt", dir);
	return flight__dump(g->flight, path);
}

void guard_flight__free(struct guard *g)
{
	if (g->flight)
		flight__free(g->flight);
	g->flight = NULL;
}
