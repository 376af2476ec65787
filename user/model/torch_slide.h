/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The horizons beyond the window (model/torch.h, "Horizons"): each
 * device's trends of allocated's floor, reserved and its unused part over
 * rules.horizon_s, and the slide they name. torch.c's alone: the API is
 * torch.h's.
 */
#ifndef UMTRACE_TORCH_SLIDE_H
#define UMTRACE_TORCH_SLIDE_H

#include <stdbool.h>
#include <stdint.h>
#include "model/torch.h"

/* A sample into every horizon's trends. */
void torch_slide__add(const struct torch_rules *r, struct torch_dev *d,
		      const struct torch_sample *s);
/* The shortest horizon's slot turns between two times: the horizons may say more. */
bool torch_slide__turns(const struct torch_rules *r, uint64_t a_ns, uint64_t b_ns);
/*
 * What the window cannot see: a slide on the shortest horizon that names
 * one, into v. A horizon judged since its slot last turned is not judged
 * again; keep (d's, or NULL) takes what is.
 */
void torch_slide__judge(const struct torch_model *m, const struct torch_dev *d,
			struct torch_verdict *v, struct torch_slide *keep);
/* A slide named on a horizon as an episode: its slots' means at both ends of the fit. */
void torch_slide__episode(const struct torch_rules *r, const struct torch_dev *d,
			  const struct torch_verdict *v, struct torch_episode *e);

#endif /* UMTRACE_TORCH_SLIDE_H */
