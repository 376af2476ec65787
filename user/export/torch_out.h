/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * PyTorch's caching allocator (user/model/torch.h) for people and for
 * programs: a report section per process and device (figures, peaks,
 * verdict, the advice in words), or one JSON object each; the advice
 * alone, for top, the guard's stop line and its post-mortem.
 */
#ifndef UMTRACE_TORCH_OUT_H
#define UMTRACE_TORCH_OUT_H

#include <stddef.h>
#include <stdio.h>
#include "model/callsites.h"
#include "model/torch.h"

struct session;

/*
 * The verdict's advice as one sentence into buf; sites (may be NULL) names
 * the call sites of the process's segments, for a leak.
 */
const char *torch_out__advice(const struct torch_verdict *v, const struct callsites *sites,
			      char *buf, size_t len);
/* "warm-up" while there is none yet, else the verdict's name. */
const char *torch_out__verdict(const struct torch_verdict *v);
/*
 * One episode in one line, its times in seconds from t0_ns (the process's
 * first sample: struct torch_verdict's first_ns, struct torch_dev's):
 * "fragmentation 4.0s-10.6s: reserved +4.3G, floor flat, unused 4.3G
 * (97%)"; on a horizon, "; over 15 min, the floor +1.0G/h" after. Without
 * the allocator's totals, the floor alone. Returns buf.
 */
const char *torch_out__episode(const struct torch_episode *e, uint64_t t0_ns, char *buf,
			       size_t len);
/* A section per process and device, under a heading; nothing if none reported. */
void export_torch_text(const struct torch_model *m, const struct callsites *sites, FILE *f);
/*
 * "PyTorch's allocator hook probed in FILE: N calls, none for a CUDA
 * device": why a live session's job whose hook fires has no row. Nothing
 * where that is not so.
 */
void export_torch_unseen(const struct session *s, FILE *f);
/* One {"event":"torch_allocator",...} line per process and device. */
void export_torch_json(const struct torch_model *m, const struct callsites *sites, FILE *f);

#endif /* UMTRACE_TORCH_OUT_H */
