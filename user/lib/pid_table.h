/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A growable table of per-process rows, looked up by pid: what top keeps
 * per process for its growth rates and trace keeps per process for its
 * page counts. A row is any struct whose first member is its uint32_t
 * pid; rows are zeroed when added. Lookups are linear: the tables hold
 * the processes seen on one host, and are walked whole at every refresh
 * anyway. The rows may be reordered in place (qsort) between lookups.
 */
#ifndef UMTRACE_PID_TABLE_H
#define UMTRACE_PID_TABLE_H

#include <stddef.h>
#include <stdint.h>

struct pid_table {
	void *rows;		/* n rows of row_size bytes */
	size_t n, cap;
	size_t row_size;
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
void pid_table__free(struct pid_table *t);

#endif /* UMTRACE_PID_TABLE_H */
