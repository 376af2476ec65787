/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What the writer (recording_write.c) and the reader (recording_read.c)
 * of a recording's records share: the encoding of integers and the bits
 * of the records (the format itself: rec/recording.h).
 */
#ifndef UMTRACE_RECORDING_INT_H
#define UMTRACE_RECORDING_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "rec/recording.h"

/* CALL's present bits: fields that are mostly 0 are left out when they are. */
#define CALL_IS_FREE	(1u << 0)
#define CALL_PCOMM	(1u << 1)	/* pcomm differs from comm: its id follows */
#define CALL_FLAGS	(1u << 2)
#define CALL_AUX	(1u << 3)
#define CALL_RET	(1u << 4)
#define CALL_END	(1u << 5)
#define CALL_FREED	(1u << 6)
#define CALL_FAULTED	(1u << 7)
#define CALL_DEVICE	(1u << 8)

#define SAMPLE_PSI	(1u << 0)
#define SAMPLE_SHRUNK	(1u << 1)	/* driver_shrunk follows the direct reclaim figures */

/* ---- LEB128 varints; "s": zigzag-signed ---- */

static inline size_t put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

static inline uint64_t zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t unzigzag(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* A body being encoded: the caller makes sure it has room. */
struct enc {
	uint8_t *p;
	size_t len;
};

static inline void enc_u(struct enc *e, uint64_t v)
{
	e->len += put_varint(e->p + e->len, v);
}

static inline void enc_s(struct enc *e, int64_t v)
{
	enc_u(e, zigzag(v));
}

/* A body being decoded: reading past its end sets bad and gives 0. */
struct dec {
	const uint8_t *p, *end;
	bool bad;
};

static inline uint64_t dec_u(struct dec *d)
{
	uint64_t v = 0;
	unsigned int shift = 0;
	uint8_t b;

	do {
		if (d->p == d->end || shift > 63) {
			d->bad = true;
			return 0;
		}
		b = *d->p++;
		v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	return v;
}

static inline int64_t dec_s(struct dec *d)
{
	return unzigzag(dec_u(d));
}

static inline uint32_t dec_u32(struct dec *d)
{
	uint64_t v = dec_u(d);

	if (v > UINT32_MAX)
		d->bad = true;
	return (uint32_t)v;
}

#endif /* UMTRACE_RECORDING_INT_H */
