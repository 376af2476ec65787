/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The episodes of a process and device (model/torch.h, "Episodes"): kept
 * as torch.c judges, at most TORCH_EPISODES, and the root cause among
 * them. torch.c's alone: the API is torch.h's.
 */
#ifndef UMTRACE_TORCH_EPISODE_H
#define UMTRACE_TORCH_EPISODE_H

#include <stdbool.h>
#include "model/torch.h"

/*
 * A judgement other than ok: one of the last episode's kind in a row, or
 * overlapping it (a verdict that flickers), extends it; else a new one,
 * from where the last ended at the earliest, room made when full.
 */
void torch_episodes__keep(struct torch_dev *d, const struct torch_episode *e);
/* The last episode is of this kind and still open: a judgement of it now is in it. */
bool torch_episodes__open(const struct torch_dev *d, enum torch_kind kind);
/* v's root cause: the most severe of d's episodes and now (NULL: none). */
void torch_episodes__cause(const struct torch_dev *d, const struct torch_episode *now,
			   struct torch_verdict *v);

#endif /* UMTRACE_TORCH_EPISODE_H */
