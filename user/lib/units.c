// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/units.h"

static int suffix_shift(const char *s, unsigned int *shift)
{
	/* Accept "M", "MB", "MiB" alike: people type all three. */
	static const char units[] = "KMGTP";
	const char *p;

	if (!*s) {
		*shift = 0;
		return 0;
	}
	p = strchr(units, toupper((unsigned char)*s));
	if (!p)
		return -EINVAL;
	*shift = 10 * (unsigned int)(p - units + 1);
	s++;
	if (!*s || !strcasecmp(s, "b") || !strcasecmp(s, "ib"))
		return 0;
	return -EINVAL;
}

int parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned int shift;
	char *end;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -ERANGE;
	if (suffix_shift(end, &shift))
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

int parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtol(s, &end, 10);
	if (*end)
		return -EINVAL;
	if (errno || v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int parse_duration_ms(const char *s, uint64_t *out_ms)
{
	double v, mult = 1000;
	char *end;

	if (!s || !(isdigit((unsigned char)*s) || *s == '.'))
		return -EINVAL;
	/* strtod() would take "0x10" for 16 seconds: decimal only. */
	if (strpbrk(s, "xX"))
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || v < 0)
		return -ERANGE;
	if (!strcmp(end, "ms"))
		mult = 1;
	else if (!strcmp(end, "m"))
		mult = 60000;
	else if (!strcmp(end, "h"))
		mult = 3600000;
	else if (*end && strcmp(end, "s"))
		return -EINVAL;
	if (v * mult > 1e15)
		return -ERANGE;
	*out_ms = (uint64_t)(v * mult + 0.5);
	return 0;
}

/*
 * bytes / 1024^*unit, for the largest *unit (0 bytes .. 6 EiB) that leaves
 * it under 1024: the number both styles print.
 */
static double scale_bytes(uint64_t bytes, unsigned int *unit)
{
	double v = (double)bytes;

	*unit = 0;
	while (v >= 1024 && *unit < 6) {
		v /= 1024;
		(*unit)++;
	}
	return v;
}

const char *fmt_bytes(uint64_t bytes, char *buf, size_t len)
{
	static const char units[] = "BKMGTPE";
	unsigned int i;
	double v = scale_bytes(bytes, &i);

	if (!i)
		snprintf(buf, len, "%lluB", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.*f%c", v < 10 ? 1 : 0, v, units[i]);
	return buf;
}

const char *fmt_bytes_signed(int64_t bytes, bool plus, char *buf, size_t len)
{
	uint64_t mag = bytes < 0 ? (uint64_t)0 - (uint64_t)bytes : (uint64_t)bytes;
	char b[16];

	snprintf(buf, len, "%s%s", bytes < 0 ? "-" : plus ? "+" : "",
		 fmt_bytes(mag, b, sizeof(b)));
	return buf;
}

const char *fmt_bytes_iec(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	unsigned int i;
	double v = scale_bytes(bytes, &i);

	if (!i)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.1f %s", v, units[i]);
	return buf;
}

const char *fmt_seconds(uint64_t s, char *buf, size_t len)
{
	if (s >= 2 * 3600)
		snprintf(buf, len, "%.1f h", s / 3600.0);
	else if (s >= 120)
		snprintf(buf, len, "%llu min", (unsigned long long)(s + 30) / 60);
	else
		snprintf(buf, len, "%llu s", (unsigned long long)s);
	return buf;
}
