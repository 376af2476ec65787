/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* A one-line error message into a caller's buffer (err may be NULL). */
#ifndef UMTRACE_ERRBUF_H
#define UMTRACE_ERRBUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

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

#endif /* UMTRACE_ERRBUF_H */
