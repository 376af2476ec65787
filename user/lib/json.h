/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * JSON strings, for every writer of JSON (trace's lines, report, the
 * guard's status, speedscope files): one home for the escaping, so that a
 * comm or a path reads back the same from any of them.
 */
#ifndef UMTRACE_JSON_H
#define UMTRACE_JSON_H

#include <stdio.h>

/*
 * s as a quoted JSON string, for bytes from the kernel or /proc (a comm is
 * bytes, not UTF-8): '"' and '\\' escaped, every byte below 0x20 or from
 * 0x7f up written as \u00XX, so the line is plain ASCII whatever s holds.
 */
void json__string(FILE *f, const char *s);
/*
 * The same for s already valid UTF-8 (text__clean() names): bytes from
 * 0x80 up are kept, so that names read as they were; only '"', '\\' and
 * control characters (below 0x20, and 0x7f) are escaped.
 */
void json__utf8_string(FILE *f, const char *s);

#endif /* UMTRACE_JSON_H */
