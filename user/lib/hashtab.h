/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The one hash table of umtrace: an open-addressing index from a 64-bit
 * hash to 32-bit ids, the caller's. It holds no keys: the caller keeps
 * its entries in an array (or anything an id can name) and decides which
 * of the ids stored under a hash is the key it looks for, so one table
 * serves interned strings, stacks, cache entries alike.
 *
 * Each slot is 8 bytes: 32 bits of the hash (a tag that rules out nearly
 * every other key without touching the caller's entry) and the id. Linear
 * probing, at most 3/4 full; removal shifts the run back (no tombstones),
 * so a table that churns (a bounded cache) never degrades.
 *
 * Looking up, the caller's equality in its own loop, with no callback:
 *
 *	struct hashtab_iter it;
 *	uint32_t id;
 *
 *	for (id = hashtab__first(t, h, &it); id != HASHTAB_NONE;
 *	     id = hashtab__next(t, &it))
 *		if (equal(&ents[id], key))
 *			return id;
 *
 * Not thread-safe.
 */
#ifndef UMTRACE_HASHTAB_H
#define UMTRACE_HASHTAB_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define HASHTAB_NONE	UINT32_MAX	/* no id; ids are 0 .. HASHTAB_NONE - 1 */

struct hashtab_slot {
	uint32_t tag;		/* the hash's low 32 bits */
	uint32_t id1;		/* id + 1; 0: empty */
};

/* Zero-initialised it is an empty table (no memory until the first add). */
struct hashtab {
	struct hashtab_slot *slots;
	uint32_t mask;		/* slots - 1, a power of two less one */
	uint32_t n;		/* ids held */
};

struct hashtab_iter {
	uint32_t i;		/* the next slot to look at */
	uint32_t tag;
};

/* Room for n ids before the table grows. 0 or -ENOMEM (-EINVAL: too many). */
int hashtab__reserve(struct hashtab *t, size_t n);
/*
 * Store id under hash. The caller has made sure the key is not there
 * already (hashtab__first found no equal): the table keeps duplicates.
 * 0, -ENOMEM (the table is as it was) or -EINVAL (id HASHTAB_NONE).
 */
int hashtab__add(struct hashtab *t, uint64_t hash, uint32_t id);
/* Take id, stored under hash, out. 0 or -ENOENT. */
int hashtab__del(struct hashtab *t, uint64_t hash, uint32_t id);
/* Memory held: the slots. */
size_t hashtab__bytes(const struct hashtab *t);
void hashtab__free(struct hashtab *t);

/* The low bits pick the slot; all 32 rule out other keys in the run. */
static inline uint32_t hashtab__tag(uint64_t hash)
{
	return (uint32_t)hash;
}

/* The next id stored under it->tag, or HASHTAB_NONE at the end of the run. */
static inline uint32_t hashtab__next(const struct hashtab *t, struct hashtab_iter *it)
{
	const struct hashtab_slot *s;

	for (;;) {
		s = &t->slots[it->i];
		it->i = (it->i + 1) & t->mask;
		if (!s->id1)
			return HASHTAB_NONE;
		if (s->tag == it->tag)
			return s->id1 - 1;
	}
}

/* The first id stored under hash (maybe of another key), or HASHTAB_NONE. */
static inline uint32_t hashtab__first(const struct hashtab *t, uint64_t hash,
				      struct hashtab_iter *it)
{
	if (!t->n)
		return HASHTAB_NONE;
	it->tag = hashtab__tag(hash);
	it->i = it->tag & t->mask;
	return hashtab__next(t, it);
}

/*
 * Hashes to key the table with: well mixed in every bit, since the low
 * bits pick the slot.
 */

/* A 64-bit finalizer (MurmurHash3's fmix64). */
static inline uint64_t hash__mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

/* h with v folded in: for keys made of several words. Finish with hash__mix. */
static inline uint64_t hash__add(uint64_t h, uint64_t v)
{
	h = (h ^ v) * 0xff51afd7ed558ccdULL;
	return h ^ (h >> 32);
}

/*
 * len bytes, eight at a time; the last few read as one overlapping word
 * (or two halves, or three bytes), never byte by byte.
 */
static inline uint64_t hash__bytes(const void *key, size_t len)
{
	const uint8_t *b = key;
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ len, v = 0;
	uint32_t lo, hi;

	if (len > 8) {
		for (; len > 8; b += 8, len -= 8) {
			memcpy(&v, b, 8);
			h = (h ^ v) * 0xff51afd7ed558ccdULL;
			h ^= h >> 32;
		}
		memcpy(&v, b + len - 8, 8);
	} else if (len >= 4) {
		memcpy(&lo, b, 4);
		memcpy(&hi, b + len - 4, 4);
		v = (uint64_t)hi << 32 | lo;
	} else if (len) {
		v = (uint64_t)b[0] << 16 | (uint64_t)b[len / 2] << 8 | b[len - 1];
	}
	h = (h ^ v) * 0xc4ceb9fe1a85ec53ULL;
	return h ^ (h >> 29);
}

#endif /* UMTRACE_HASHTAB_H */
