/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Numbers from the command line, checked for range and junk; and byte
 * counts written for people, in the two styles umtrace shows.
 */
#ifndef UMTRACE_UNITS_H
#define UMTRACE_UNITS_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

/* "4096", "64K", "1536M", "2G", "1T" (binary units). 0 or -EINVAL/-ERANGE. */
int parse_size(const char *s, uint64_t *out);
/* A decimal integer in [min, max]. 0 or -EINVAL/-ERANGE. */
int parse_long(const char *s, long min, long max, long *out);
/* "1.5s", "250ms", "10" (seconds), "2m": 0 or -EINVAL/-ERANGE. */
int parse_duration_ms(const char *s, uint64_t *out_ms);
/*
 * Compact, for table columns and log lines: 1536 MiB -> "1.5G", 64 MiB ->
 * "64M", 512 -> "512B" (one decimal below 10). Always terminated, never
 * longer than len - 1.
 */
const char *fmt_bytes(uint64_t bytes, char *buf, size_t len);
/* The same with a sign: "-64M", and "+64M" where plus asks for one. */
const char *fmt_bytes_signed(int64_t bytes, bool plus, char *buf, size_t len);
/*
 * Spelled out, for the SVG files' titles and tooltips: 1536 MiB ->
 * "1.5 GiB", 64 MiB -> "64.0 MiB", 512 -> "512 B" (always one decimal).
 * Always terminated.
 */
const char *fmt_bytes_iec(uint64_t bytes, char *buf, size_t len);
/* A time ahead, as precise as a forecast is: "2.5 h", "40 min", "17 s". */
const char *fmt_seconds(uint64_t s, char *buf, size_t len);

#endif /* UMTRACE_UNITS_H */
