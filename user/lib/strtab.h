/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Interned strings: each distinct one stored once and given an id, 0, 1,
 * 2... in the order first seen, over lib/hashtab.h. The symbolizer's names,
 * a recording's strings and stacks, a stack set's frame names all live in
 * one.
 *
 * Keys are bytes with a length (a stack key is binary); every copy is
 * NUL-terminated as well, so a string's copy is a C string. Copies are
 * packed into large blocks and never move: a pointer from strtab__str()
 * stays valid until strtab__free(). Nothing is removed before that.
 *
 * Zero-initialised it is an empty table. Not thread-safe.
 */
#ifndef UMTRACE_STRTAB_H
#define UMTRACE_STRTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/hashtab.h"

#define STRTAB_NONE	HASHTAB_NONE

struct strtab_ent {
	const char *s;		/* the copy, NUL-terminated */
	uint32_t len;		/* without the NUL */
};

struct strtab_block;

struct strtab {
	struct hashtab index;
	struct strtab_ent *ents;	/* by id */
	uint32_t n, cap;
	struct strtab_block *blocks;
	char *next;			/* free bytes of the newest block */
	size_t room;
	size_t block;			/* the newest block's size */
	size_t bytes;			/* blocks and the entry array */
};

/*
 * The id of the len bytes at key, copied in when new (*fresh says so).
 * 0, or -ENOMEM (nothing added), or -E2BIG (a key of 4 GiB, or 4 billion
 * of them).
 */
int strtab__intern(struct strtab *t, const void *key, size_t len, uint32_t *id, bool *fresh);
/* The copy of the C string s: NULL only when out of memory. */
const char *strtab__intern_str(struct strtab *t, const char *s);
/* The id of the len bytes at key, or STRTAB_NONE. */
uint32_t strtab__find(const struct strtab *t, const void *key, size_t len);
void strtab__free(struct strtab *t);

/* The copy of id (less than strtab__count). */
static inline const char *strtab__str(const struct strtab *t, uint32_t id)
{
	return t->ents[id].s;
}

static inline size_t strtab__len(const struct strtab *t, uint32_t id)
{
	return t->ents[id].len;
}

static inline uint32_t strtab__count(const struct strtab *t)
{
	return t->n;
}

#endif /* UMTRACE_STRTAB_H */
