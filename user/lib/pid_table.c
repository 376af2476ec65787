// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "lib/pid_table.h"

void pid_table__init(struct pid_table *t, size_t row_size)
{
	memset(t, 0, sizeof(*t));
	t->row_size = row_size;
}

static uint32_t row_pid(const struct pid_table *t, size_t i)
{
	return *(const uint32_t *)pid_table__row(t, i);
}

/* Pids come in runs: spread them so that linear probing stays short. */
static size_t home(const struct pid_table *t, uint32_t pid)
{
	uint32_t h = pid * 2654435761u;

	return (h ^ (h >> 16)) & t->index_mask;
}

/* The index slot of pid, or of the empty slot where it would go. */
static size_t slot_of(const struct pid_table *t, uint32_t pid)
{
	size_t s = home(t, pid);

	while (t->index[s] && row_pid(t, t->index[s] - 1) != pid)
		s = (s + 1) & t->index_mask;
	return s;
}

static void index_rebuild(struct pid_table *t)
{
	size_t i;

	memset(t->index, 0, (t->index_mask + 1) * sizeof(*t->index));
	for (i = 0; i < t->n; i++)
		t->index[slot_of(t, row_pid(t, i))] = (uint32_t)i + 1;
}

/* The index keeps at least half its slots empty. */
static int grow(struct pid_table *t)
{
	size_t cap = t->cap ? t->cap * 2 : 64;
	uint32_t *index;
	void *v;

	if (cap > UINT32_MAX / 2)
		return -ENOMEM;
	index = calloc(cap * 2, sizeof(*index));
	if (!index)
		return -ENOMEM;
	v = realloc(t->rows, cap * t->row_size);
	if (!v) {
		free(index);
		return -ENOMEM;
	}
	free(t->index);
	t->rows = v;
	t->cap = cap;
	t->index = index;
	t->index_mask = cap * 2 - 1;
	index_rebuild(t);
	return 0;
}

void *pid_table__find(const struct pid_table *t, uint32_t pid)
{
	size_t s;

	if (!t->n)
		return NULL;
	s = slot_of(t, pid);
	return t->index[s] ? pid_table__row(t, t->index[s] - 1) : NULL;
}

/*
 * Empty slot s, shifting back the entries after it that probed past it,
 * so that no lookup stops short at the gap (no tombstones to sweep).
 */
static void slot_clear(struct pid_table *t, size_t s)
{
	size_t next = s, h;

	for (;;) {
		t->index[s] = 0;
		for (;;) {
			next = (next + 1) & t->index_mask;
			if (!t->index[next])
				return;
			h = home(t, row_pid(t, t->index[next] - 1));
			/* Stays if its home lies cyclically in (s, next]. */
			if (s <= next ? (s < h && h <= next) : (s < h || h <= next))
				continue;
			break;
		}
		t->index[s] = t->index[next];
		s = next;
	}
}

void pid_table__remove(struct pid_table *t, uint32_t pid)
{
	size_t s, last, i;

	if (!t->n)
		return;
	s = slot_of(t, pid);
	if (!t->index[s])
		return;
	i = t->index[s] - 1;
	slot_clear(t, s);
	last = t->n - 1;
	if (i != last) {
		t->index[slot_of(t, row_pid(t, last))] = (uint32_t)i + 1;
		memcpy(pid_table__row(t, i), pid_table__row(t, last), t->row_size);
	}
	t->n--;
}

void *pid_table__get(struct pid_table *t, uint32_t pid)
{
	uint32_t *row = pid_table__find(t, pid);

	if (row)
		return row;
	if (t->n == t->cap && grow(t))
		return NULL;
	row = pid_table__row(t, t->n++);
	memset(row, 0, t->row_size);
	*row = pid;
	t->index[slot_of(t, pid)] = (uint32_t)t->n;
	return row;
}

void pid_table__sort(struct pid_table *t, int (*cmp)(const void *, const void *))
{
	if (!t->n)	/* rows may be NULL, which qsort may not get */
		return;
	qsort(t->rows, t->n, t->row_size, cmp);
	index_rebuild(t);
}

void *pid_table__sorted_copy(const struct pid_table *t,
			     int (*cmp)(const void *, const void *))
{
	void *v = calloc(t->n + 1, t->row_size);

	if (!v || !t->n)
		return v;
	memcpy(v, t->rows, t->n * t->row_size);
	qsort(v, t->n, t->row_size, cmp);
	return v;
}

void pid_table__free(struct pid_table *t)
{
	free(t->rows);
	free(t->index);
	pid_table__init(t, t->row_size);
}
