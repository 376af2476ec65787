// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "model/driver_pool.h"

static int kind_of(enum umt_class c)
{
	switch (c) {
	case UMT_CLASS_DEVICE:
	case UMT_CLASS_VMM_PHYS:
		return DRIVER_POOL_DEVICE;
	case UMT_CLASS_PINNED:
		return DRIVER_POOL_HOST;
	default:
		return -1;
	}
}

/*
 * The driver takes whole pages: a size rounds up to the base page. Pages
 * moving the other way inside the call (a retry's, a reclaim's) are netted.
 */
static uint64_t unmoved(uint64_t size, uint64_t moved, uint64_t back, uint64_t page_size)
{
	uint64_t bytes = (size + page_size - 1) / page_size * page_size;
	uint64_t net = moved > back ? (moved - back) * page_size : 0;

	return net < bytes ? bytes - net : 0;
}

void driver_pool__call(struct driver_pool *p, enum umt_class c, bool is_free,
		       uint64_t size, uint64_t taken, uint64_t freed, uint64_t page_size)
{
	int k = kind_of(c);
	uint64_t n;

	if (k < 0 || !size || !page_size)
		return;
	if (is_free) {
		n = unmoved(size, freed, taken, page_size);
		p->in[k] += n;
		p->level[k] += n;
		return;
	}
	n = unmoved(size, taken, freed, page_size);
	if (n > p->level[k])
		n = p->level[k];
	p->out[k] += n;
	p->level[k] -= n;
}

void driver_pool__shrunk(struct driver_pool *p, uint64_t bytes)
{
	p->shrunk = bytes;
	p->shrunk_known = true;
}

uint64_t driver_pool__in(const struct driver_pool *p, bool device)
{
	return p->in[DRIVER_POOL_HOST] + (device ? p->in[DRIVER_POOL_DEVICE] : 0);
}

uint64_t driver_pool__out(const struct driver_pool *p, bool device)
{
	return p->out[DRIVER_POOL_HOST] + (device ? p->out[DRIVER_POOL_DEVICE] : 0);
}

/* The shrinker's returns are not told by kind: they come off the whole. */
uint64_t driver_pool__holds(const struct driver_pool *p, bool device)
{
	uint64_t level = p->level[DRIVER_POOL_HOST] + (device ? p->level[DRIVER_POOL_DEVICE] : 0);

	return level > p->shrunk ? level - p->shrunk : 0;
}

bool driver_pool__seen(const struct driver_pool *p, bool device)
{
	return driver_pool__in(p, device) || p->shrunk;
}
