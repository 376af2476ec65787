/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * From attribution to flamegraph stacks: call sites (innermost first,
 * user/model/callsites.h) become stackset stacks (outermost first, the GPU API
 * last, under their process), for every exporter alike.
 */
#ifndef UMTRACE_FLAME_BUILD_H
#define UMTRACE_FLAME_BUILD_H

#include <stdint.h>
#include "model/callsites.h"
#include "stacks/stackset.h"
#include "model/summary.h"

/* Charge values to site c as called by process pid. 0 or -errno. */
int flame__add_site(struct stackset *set, uint32_t pid, const char *comm,
		    const struct callsite *c, const uint64_t values[STACK_VAL__COUNT]);
/*
 * Every allocation still outstanding in s (pid 0: of every process), at
 * its call site: the "held" view. Returns how many could not be added.
 */
uint64_t flame__add_held(struct stackset *set, const struct summary *s,
			 const struct callsites *cs, uint32_t pid);

#endif /* UMTRACE_FLAME_BUILD_H */
