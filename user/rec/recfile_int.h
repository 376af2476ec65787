/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What the recfile writer (recfile_write.c) and reader (recfile_read.c)
 * share: the magic numbers and little-endian fields of the layout in
 * rec/recfile.h, and a buffer that grows.
 */
#ifndef UMTRACE_RECFILE_INT_H
#define UMTRACE_RECFILE_INT_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include "rec/recfile.h"

#define HDR_MAGIC	"\x89UMTREC\n"
#define HDR_MAGIC_LEN	8
#define CHUNK_MAGIC	"UMTC"

static inline void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline void put_le64(uint8_t *p, uint64_t v)
{
	put_le32(p, (uint32_t)v);
	put_le32(p + 4, (uint32_t)(v >> 32));
}

static inline uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t get_le64(const uint8_t *p)
{
	return (uint64_t)get_le32(p) | (uint64_t)get_le32(p + 4) << 32;
}

/* *buf at least need bytes, doubling from *cap. 0 or -ENOMEM. */
static inline int recfile__grow(uint8_t **buf, size_t *cap, size_t need)
{
	size_t n = *cap ? *cap : 4096;
	uint8_t *p;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	p = realloc(*buf, n);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = n;
	return 0;
}

#endif /* UMTRACE_RECFILE_INT_H */
