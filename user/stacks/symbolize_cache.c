// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The symbolizer's answers, per mapped file rather than per process: a
 * thousand workers of one image map the same libraries, and each address
 * is looked up in a symbol table once for all of them. Bounded: the least
 * recently used answer goes first.
 */
#include <errno.h>
#include <stdlib.h>
#include "stacks/symbolize_int.h"

int sym_cache__init(struct sym_cache *c, size_t cap)
{
	int err;

	if (!cap || cap > (1U << 30))
		return -EINVAL;
	c->ents = calloc(cap, sizeof(*c->ents));
	if (!c->ents)
		return -ENOMEM;
	/* Sized once: it never holds more than cap. */
	err = hashtab__reserve(&c->index, cap);
	if (err)
		return err;
	c->cap = cap;
	c->head = c->tail = SYM_NIL;
	return 0;
}

/* Take the least recently used entry out of the index and the list. */
static uint32_t cache_evict(struct sym_cache *c)
{
	uint32_t i = c->tail;
	struct cache_ent *e = &c->ents[i];

	hashtab__del(&c->index, sym_cache__hash(e->file, e->rel), i);
	sym_cache__unlink(c, i);
	return i;
}

void sym_cache__insert(struct symbolizer *s, uint32_t file, uint64_t rel, const char *func,
		       uint64_t offset)
{
	struct sym_cache *c = &s->cache;
	struct cache_ent *e;
	uint32_t i;

	if (c->used < c->cap) {
		i = c->used++;
	} else {
		i = cache_evict(c);
		s->st.evictions++;
	}
	e = &c->ents[i];
	e->file = file;
	e->rel = rel;
	e->func = func;
	e->offset = offset;
	/* Reserved for cap entries at init: this never allocates. */
	hashtab__add(&c->index, sym_cache__hash(file, rel), i);
	sym_cache__push(c, i);
}

void sym_cache__free(struct sym_cache *c)
{
	free(c->ents);
	hashtab__free(&c->index);
}

uint32_t sym_files__get(struct symbolizer *s, const void *key, size_t len)
{
	uint32_t id;
	bool fresh;

	if (strtab__intern(&s->files, key, len, &id, &fresh))
		return NO_FILE;
	return id;
}
