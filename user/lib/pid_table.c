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

static int grow(struct pid_table *t)
{
	size_t cap = t->cap ? t->cap * 2 : 64;
	void *v = realloc(t->rows, cap * t->row_size);

	if (!v)
		return -ENOMEM;
	t->rows = v;
	t->cap = cap;
	return 0;
}

void *pid_table__find(const struct pid_table *t, uint32_t pid)
{
	uint32_t *row;
	size_t i;

	for (i = 0; i < t->n; i++) {
		row = pid_table__row(t, i);
		if (*row == pid)
			return row;
	}
	return NULL;
}

void pid_table__remove(struct pid_table *t, uint32_t pid)
{
	void *row = pid_table__find(t, pid), *last;

	if (!row)
		return;
	last = pid_table__row(t, t->n - 1);
	if (row != last)
		memcpy(row, last, t->row_size);
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
	return row;
}

void pid_table__free(struct pid_table *t)
{
	free(t->rows);
	memset(t, 0, sizeof(*t));
}
