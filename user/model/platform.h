/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What a GPU allocation costs the host, by platform. The pages a call's
 * window saw are only part of the truth: since driver 590 freed device
 * memory stays in the driver's pools and is handed out again without the
 * page allocator, and managed pages arrive after the call. So every
 * allocation carries two figures: host bytes observed in its window, and
 * host bytes it holds by the platform's cost model:
 *
 *   class                 unified (GB10, Jetson, Thor)   discrete (H100, H200)
 *   device, VMM physical  its size                       what was observed
 *   pinned, registered    its size                       its size
 *   managed               what was observed              what was observed
 *   VA reserve, mapping   nothing                        nothing
 */
#ifndef UMTRACE_PLATFORM_H
#define UMTRACE_PLATFORM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "model/cuda_api.h"
#include "umtrace.h"

enum platform {
	PLATFORM_AUTO,		/* not decided yet: holds = observed */
	PLATFORM_UNIFIED,
	PLATFORM_DISCRETE,
};

struct platform_model {
	enum platform forced;	/* --platform, or AUTO */
	enum platform decided;	/* what the evidence says, or AUTO */
	const char *why;	/* how it was decided */
	uint64_t dev_bytes;	/* device bytes requested in calls of >= 1 MiB */
	uint64_t dev_observed;	/* host bytes those calls took */
};

int platform__parse(const char *s, enum platform *out);
/* forced: from the command line; the driver's own files are read here. */
void platform__init(struct platform_model *m, enum platform forced);
/* Device allocations tell unified from discrete by what they take. */
void platform__observe(struct platform_model *m, const struct umt_call_rec *r,
		       uint64_t page_size);
enum platform platform__current(const struct platform_model *m);
const char *platform__describe(const struct platform_model *m, char *buf, size_t len);
uint64_t platform__holds(const struct platform_model *m, enum umt_class c,
			 uint64_t size, uint64_t observed);
/*
 * The platform now, for a decision that cannot wait for evidence (the
 * guard's admission): --platform, the driver's own files, else discrete
 * when the driver lists a GPU with memory of its own, unified otherwise.
 */
enum platform platform__decide_now(enum platform forced, const char **why);
/* Bit n: API n's size is host RAM on platform p (the guard's admission cost). */
uint64_t platform__admission_apis(enum platform p);

#endif /* UMTRACE_PLATFORM_H */
