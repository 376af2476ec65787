// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <stdbool.h>
#include "lib/json.h"

static void put_string(FILE *f, const char *s, bool ascii)
{
	const unsigned char *p;

	fputc('"', f);
	for (p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f || (ascii && *p > 0x7f))
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

void json__string(FILE *f, const char *s)
{
	put_string(f, s, true);
}

void json__utf8_string(FILE *f, const char *s)
{
	put_string(f, s, false);
}
