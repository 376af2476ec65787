/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The page size, asked of the system once: records and the kernel count
 * pages, people read bytes.
 */
#ifndef UMTRACE_PAGE_H
#define UMTRACE_PAGE_H

#include <stdint.h>

/* sysconf's answer, or 4096 where it has none. */
uint64_t page__size(void);
/* log2 of page__size(). */
unsigned int page__shift(void);

#endif /* UMTRACE_PAGE_H */
