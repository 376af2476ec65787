/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A growable table of per-process rows, looked up by pid: the one home
 * for what a module keeps per process (top's growth rates, trace's page
 * counts, the summary's held bytes, the guard's pidfds, the symbolizer's
 * modules). A row is any struct whose first member is its uint32_t pid;
 * rows are zeroed when added. The rows lie in one array, in the order
 * added (a removal moves the last row into the gap), with a hashed index
 * beside it: a host may run tens of thousands of processes, each looked
 * up on every record. A row moves when the table grows: a module that
 * hands out pointers kept across additions stores a pointer in its row.
 */
#ifndef UMTRACE_PID_TABLE_H
#define UMTRACE_PID_TABLE_H

#include <stddef.h>
#include <stdint.h>

struct pid_table {
	void *rows;		/* n rows of row_size bytes */
	size_t n, cap;
	size_t row_size;
	uint32_t *index;	/* index_mask + 1 slots: a row number + 1, or 0 */
	size_t index_mask;
};

/* For rows of row_size bytes, each starting with its uint32_t pid. */
void pid_table__init(struct pid_table *t, size_t row_size);
/* The row of pid, added (zeroed, pid set) if new; NULL when out of memory. */
void *pid_table__get(struct pid_table *t, uint32_t pid);
/* Row i, 0 <= i < t->n. */
static inline void *pid_table__row(const struct pid_table *t, size_t i)
{
	return (char *)t->rows + i * t->row_size;
}
/* The row of pid if there is one, else NULL; nothing is added. */
void *pid_table__find(const struct pid_table *t, uint32_t pid);
/* Take pid's row out (the last row takes its place); no-op if none. */
void pid_table__remove(struct pid_table *t, uint32_t pid);
/* Reorder the rows (qsort(3) with cmp); lookups keep working after. */
void pid_table__sort(struct pid_table *t, int (*cmp)(const void *, const void *));
/* A sorted copy of the rows, the caller frees it; NULL when out of memory. */
void *pid_table__sorted_copy(const struct pid_table *t,
			     int (*cmp)(const void *, const void *));
void pid_table__free(struct pid_table *t);

#endif /* UMTRACE_PID_TABLE_H */
