/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The commands' JSON lines (trace's totals, report's call sites and
 * recording, status), written member by member as bpftool's json_writer
 * does, so that no command places a comma or a quote by hand. Strings go
 * through json__string() (lib/escape.h): whatever bytes a name holds, the
 * line stays one line of plain ASCII. Numbers keep the forms the commands
 * have always printed.
 *
 * A name of NULL writes a bare value: an array's element.
 */
#ifndef UMTRACE_CMD_JSON_H
#define UMTRACE_CMD_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct jsonw {
	FILE *f;
	bool more;		/* a member was written: the next one needs a comma */
};

/* '{': a line's object. */
void jsonw__open(struct jsonw *w, FILE *f);
/* "}\n": the line ends. */
void jsonw__close(struct jsonw *w);

void jsonw__object(struct jsonw *w, const char *name);
void jsonw__object_end(struct jsonw *w);
void jsonw__array(struct jsonw *w, const char *name);
void jsonw__array_end(struct jsonw *w);

void jsonw__u64(struct jsonw *w, const char *name, uint64_t v);
void jsonw__i64(struct jsonw *w, const char *name, int64_t v);
void jsonw__bool(struct jsonw *w, const char *name, bool v);
/* v with prec digits after the point ("%.*f"). */
void jsonw__float(struct jsonw *w, const char *name, int prec, double v);
/* s as untrusted bytes: json__string(). */
void jsonw__str(struct jsonw *w, const char *name, const char *s);

#endif /* UMTRACE_CMD_JSON_H */
