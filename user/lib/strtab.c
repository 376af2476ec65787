// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "lib/strtab.h"

/*
 * Copies go into blocks, 4 KiB doubling up to 64 KiB: one allocation per
 * few thousand names rather than one each, and a table of a few names
 * stays small. A key over an eighth of a block gets a block of its own,
 * and the current block stays in use.
 */
#define BLOCK_MIN	(4 * 1024)
#define BLOCK_MAX	(64 * 1024)

struct strtab_block {
	struct strtab_block *next;
	char data[];
};

static char *copy_room(struct strtab *t, size_t size)
{
	struct strtab_block *b;
	size_t bsize;
	bool big;
	char *p;

	if (size <= t->room) {
		p = t->next;
		t->next += size;
		t->room -= size;
		return p;
	}
	bsize = t->block < BLOCK_MIN ? BLOCK_MIN : t->block < BLOCK_MAX ? t->block * 2 : BLOCK_MAX;
	big = size > bsize / 8;
	if (big)
		bsize = size;
	b = malloc(sizeof(*b) + bsize);
	if (!b)
		return NULL;
	b->next = t->blocks;
	t->blocks = b;
	t->bytes += sizeof(*b) + bsize;
	if (big)
		return b->data;
	t->block = bsize;
	t->next = b->data + size;
	t->room = bsize - size;
	return b->data;
}

static inline uint32_t find(const struct strtab *t, const void *key, size_t len, uint64_t h)
{
	struct hashtab_iter it;
	uint32_t id;

	for (id = hashtab__first(&t->index, h, &it); id != HASHTAB_NONE;
	     id = hashtab__next(&t->index, &it))
		if (t->ents[id].len == len && !memcmp(t->ents[id].s, key, len))
			return id;
	return STRTAB_NONE;
}

uint32_t strtab__find(const struct strtab *t, const void *key, size_t len)
{
	return find(t, key, len, hash__bytes(key, len));
}

static int ents_grow(struct strtab *t)
{
	uint32_t cap = t->cap ? t->cap * 2 : 256;
	struct strtab_ent *e;

	if (t->cap >= STRTAB_NONE / 2)
		return -E2BIG;
	e = realloc(t->ents, (size_t)cap * sizeof(*e));
	if (!e)
		return -ENOMEM;
	t->bytes += (size_t)(cap - t->cap) * sizeof(*e);
	t->ents = e;
	t->cap = cap;
	return 0;
}

int strtab__intern(struct strtab *t, const void *key, size_t len, uint32_t *id, bool *fresh)
{
	uint64_t h = hash__bytes(key, len);
	char *copy;
	int err;

	*id = find(t, key, len, h);
	*fresh = false;
	if (*id != STRTAB_NONE)
		return 0;
	if (len >= UINT32_MAX)
		return -E2BIG;
	if (t->n == t->cap && (err = ents_grow(t)))
		return err;
	/* The index first: the copy's room cannot be given back. */
	err = hashtab__add(&t->index, h, t->n);
	if (err)
		return err;
	copy = copy_room(t, len + 1);
	if (!copy) {
		hashtab__del(&t->index, h, t->n);
		return -ENOMEM;
	}
	memcpy(copy, key, len);
	copy[len] = '\0';
	t->ents[t->n] = (struct strtab_ent){ .s = copy, .len = (uint32_t)len };
	*id = t->n++;
	*fresh = true;
	return 0;
}

const char *strtab__intern_str(struct strtab *t, const char *s)
{
	uint32_t id;
	bool fresh;

	if (strtab__intern(t, s, strlen(s), &id, &fresh))
		return NULL;
	return t->ents[id].s;
}

void strtab__free(struct strtab *t)
{
	struct strtab_block *b, *next;

	for (b = t->blocks; b; b = next) {
		next = b->next;
		free(b);
	}
	hashtab__free(&t->index);
	free(t->ents);
	memset(t, 0, sizeof(*t));
}
