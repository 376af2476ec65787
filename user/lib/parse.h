/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What the option and config parsers share: trimming a token, a word
 * from a fixed list, and a one-line error message into the caller's
 * buffer.
 */
#ifndef UMTRACE_PARSE_H
#define UMTRACE_PARSE_H

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
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

/* The index of s in names[0..n), or -EINVAL: for words that name an enum's values. */
static inline int str__index(const char *s, const char *const *names, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(s, names[i]))
			return (int)i;
	return -EINVAL;
}

/* The message into err (which may be NULL). */
static inline void errbuf__set(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static inline void errbuf__set(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

#endif /* UMTRACE_PARSE_H */
