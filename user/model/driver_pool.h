/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The NVIDIA driver's page pool (driver 590+) as a holder of host memory.
 * A free whose pages the driver keeps returns none of them inside the
 * call, and an allocation it serves from the pool takes none: so what
 * went in is the bytes frees released without pages coming back, what
 * came out the bytes allocations got without pages being taken, and what
 * its shrinker gave back the kernel counts (bpf/pages.bpf.c). The pool
 * holds in - out - shrunk, as far as umtrace has seen it: from its start,
 * never what was pooled before.
 *
 * Only the driver's own pages are pooled: device memory where it is host
 * RAM (unified: GB10, Thor; counted apart and judged by the platform when
 * read) and pinned host memory; not registered memory (the process's own
 * pages), nor managed (the kernel's), nor address space. What a process
 * leaves at its exit goes to the driver unseen: freed or kept is not told
 * apart, so it is not in the figure.
 */
#ifndef UMTRACE_DRIVER_POOL_H
#define UMTRACE_DRIVER_POOL_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/types.h>
#include "model/cuda_api.h"

enum driver_pool_kind {
	DRIVER_POOL_DEVICE,	/* device memory: host RAM on unified hosts */
	DRIVER_POOL_HOST,	/* pinned host memory: host RAM everywhere */
	DRIVER_POOL__KINDS,
};

/*
 * An allocation is served from the pool only up to what the pool holds:
 * the rest of what it did not take in the call came from elsewhere (a
 * driver that takes pages later), so each kind keeps its level.
 */
struct driver_pool {
	uint64_t in[DRIVER_POOL__KINDS];	/* bytes kept by frees */
	uint64_t out[DRIVER_POOL__KINDS];	/* bytes served to allocations */
	uint64_t level[DRIVER_POOL__KINDS];	/* in - out */
	uint64_t shrunk;			/* bytes its shrinker gave back */
	bool shrunk_known;			/* the kernel side counts them */
};

/*
 * A successful call of class c for size bytes, taking and freeing pages
 * of page_size inside it; is_free: size is what the free released.
 */
void driver_pool__call(struct driver_pool *p, enum umt_class c, bool is_free,
		       uint64_t size, uint64_t taken, uint64_t freed, uint64_t page_size);
/* The shrinker's returns so far, in bytes (the kernel's running count). */
void driver_pool__shrunk(struct driver_pool *p, uint64_t bytes);
/* What went in, came out, and is held; device: count device memory too. */
uint64_t driver_pool__in(const struct driver_pool *p, bool device);
uint64_t driver_pool__out(const struct driver_pool *p, bool device);
uint64_t driver_pool__holds(const struct driver_pool *p, bool device);
/* Anything to show: a free kept pages, or an allocation was served. */
bool driver_pool__seen(const struct driver_pool *p, bool device);

#endif /* UMTRACE_DRIVER_POOL_H */
