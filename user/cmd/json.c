// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include "cmd/json.h"
#include "lib/escape.h"

/* The comma before every member but the first, then its name, if any. */
static void member(struct jsonw *w, const char *name)
{
	if (w->more)
		fputc(',', w->f);
	w->more = true;
	if (!name)
		return;
	json__string(w->f, name);
	fputc(':', w->f);
}

static void open_with(struct jsonw *w, const char *name, char c)
{
	member(w, name);
	fputc(c, w->f);
	w->more = false;
}

static void close_with(struct jsonw *w, char c)
{
	fputc(c, w->f);
	w->more = true;
}

void jsonw__open(struct jsonw *w, FILE *f)
{
	w->f = f;
	w->more = false;
	fputc('{', f);
}

void jsonw__close(struct jsonw *w)
{
	fputs("}\n", w->f);
	w->more = false;
}

void jsonw__object(struct jsonw *w, const char *name)
{
	open_with(w, name, '{');
}

void jsonw__object_end(struct jsonw *w)
{
	close_with(w, '}');
}

void jsonw__array(struct jsonw *w, const char *name)
{
	open_with(w, name, '[');
}

void jsonw__array_end(struct jsonw *w)
{
	close_with(w, ']');
}

void jsonw__u64(struct jsonw *w, const char *name, uint64_t v)
{
	member(w, name);
	fprintf(w->f, "%llu", (unsigned long long)v);
}

void jsonw__i64(struct jsonw *w, const char *name, int64_t v)
{
	member(w, name);
	fprintf(w->f, "%lld", (long long)v);
}

void jsonw__bool(struct jsonw *w, const char *name, bool v)
{
	member(w, name);
	fputs(v ? "true" : "false", w->f);
}

void jsonw__float(struct jsonw *w, const char *name, int prec, double v)
{
	member(w, name);
	fprintf(w->f, "%.*f", prec, v);
}

void jsonw__str(struct jsonw *w, const char *name, const char *s)
{
	member(w, name);
	json__string(w->f, s);
}
