// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include "lib/hashtab.h"

#define MIN_SLOTS	16
/* 2^31 slots: ids are 32-bit, and 3/4 of that is more than any table here holds. */
#define MAX_SLOTS	(1ULL << 31)

static size_t slots_for(size_t n)
{
	size_t slots = MIN_SLOTS;

	/* At most 3/4 full: a probe run stays within a cache line or two. */
	while (slots < MAX_SLOTS && n > slots / 4 * 3)
		slots *= 2;
	return slots;
}

static void put(struct hashtab_slot *slots, uint32_t mask, uint32_t tag, uint32_t id1)
{
	uint32_t i = tag & mask;

	while (slots[i].id1)
		i = (i + 1) & mask;
	slots[i].tag = tag;
	slots[i].id1 = id1;
}

static int resize(struct hashtab *t, size_t n_slots)
{
	struct hashtab_slot *slots;
	uint32_t mask = (uint32_t)(n_slots - 1);
	size_t i;

	slots = calloc(n_slots, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	if (t->slots) {
		for (i = 0; i <= t->mask; i++)
			if (t->slots[i].id1)
				put(slots, mask, t->slots[i].tag, t->slots[i].id1);
	}
	free(t->slots);
	t->slots = slots;
	t->mask = mask;
	return 0;
}

int hashtab__reserve(struct hashtab *t, size_t n)
{
	size_t want = slots_for(n);

	if (n > MAX_SLOTS / 4 * 3)
		return -EINVAL;
	if (t->slots && want <= (size_t)t->mask + 1)
		return 0;
	return resize(t, want);
}

int hashtab__add(struct hashtab *t, uint64_t hash, uint32_t id)
{
	int err;

	if (id == HASHTAB_NONE)
		return -EINVAL;
	if (!t->slots || t->n + 1 > ((size_t)t->mask + 1) / 4 * 3) {
		err = hashtab__reserve(t, (size_t)t->n + 1);
		if (err)
			return err;
	}
	put(t->slots, t->mask, hashtab__tag(hash), id + 1);
	t->n++;
	return 0;
}

/*
 * Whether the slot at i, empty now, must be filled from j, whose entry
 * belongs at home: it must when home is not cyclically within (i, j],
 * else a lookup starting at home would stop at the hole before reaching j.
 */
static bool must_shift(uint32_t i, uint32_t j, uint32_t home)
{
	if (i <= j)
		return home <= i || home > j;
	return home <= i && home > j;
}

int hashtab__del(struct hashtab *t, uint64_t hash, uint32_t id)
{
	uint32_t tag = hashtab__tag(hash), i, j;

	if (!t->n)
		return -ENOENT;
	for (i = tag & t->mask; t->slots[i].id1 != id + 1 || t->slots[i].tag != tag;
	     i = (i + 1) & t->mask)
		if (!t->slots[i].id1)
			return -ENOENT;
	/* Backward shift: move up what would be cut off from its home. */
	for (j = (i + 1) & t->mask; t->slots[j].id1; j = (j + 1) & t->mask) {
		if (!must_shift(i, j, t->slots[j].tag & t->mask))
			continue;
		t->slots[i] = t->slots[j];
		i = j;
	}
	t->slots[i].id1 = 0;
	t->slots[i].tag = 0;
	t->n--;
	return 0;
}

size_t hashtab__bytes(const struct hashtab *t)
{
	return t->slots ? ((size_t)t->mask + 1) * sizeof(*t->slots) : 0;
}

void hashtab__free(struct hashtab *t)
{
	free(t->slots);
	memset(t, 0, sizeof(*t));
}
