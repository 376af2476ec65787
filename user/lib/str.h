/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Small string helpers for the parsers. */
#ifndef UMTRACE_STR_H
#define UMTRACE_STR_H

#include <string.h>

/* s without leading and trailing blanks (spaces and tabs), in place. */
static inline char *str__trim(char *s)
{
	char *end;

	while (*s == ' ' || *s == '\t')
		s++;
	end = s + strlen(s);
	while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
		*--end = '\0';
	return s;
}

#endif /* UMTRACE_STR_H */
