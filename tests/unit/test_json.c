// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * cmd/json.c: the commands' JSON lines, byte for byte, and a hostile name
 * kept inside its string: one line of plain ASCII whatever it holds.
 */
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "cmd/json.h"

/* What a writer wrote, from a memory stream; the caller frees it. */
struct sink {
	FILE *f;
	char *buf;
	size_t len;
};

static bool sink_open(struct sink *s)
{
	memset(s, 0, sizeof(*s));
	s->f = open_memstream(&s->buf, &s->len);
	return s->f;
}

static const char *sink_text(struct sink *s)
{
	fclose(s->f);
	s->f = NULL;
	return s->buf;
}

#define CHECK_TEXT(got, want, name) \
	CHECK(!strcmp(got, want), name, "\n    got  %s\n    want %s", got, want)

static void test_members(void)
{
	struct sink s;
	struct jsonw w;

	if (!CHECK(sink_open(&s), "memstream", "open_memstream failed"))
		return;
	jsonw__open(&w, s.f);
	jsonw__str(&w, "event", "totals");
	jsonw__u64(&w, "records", 18446744073709551615ULL);
	jsonw__i64(&w, "headroom", -4096);
	jsonw__bool(&w, "running", true);
	jsonw__bool(&w, "armed", false);
	jsonw__float(&w, "growth", 0, 1234.5678);
	jsonw__float(&w, "psi", 2, 0.125);
	jsonw__close(&w);
	CHECK_TEXT(sink_text(&s), "{\"event\":\"totals\",\"records\":18446744073709551615,"
		   "\"headroom\":-4096,\"running\":true,\"armed\":false,\"growth\":1235,"
		   "\"psi\":0.12}\n", "members");
	free(s.buf);
}

/* Commas between members and elements, none after an opening bracket. */
static void test_nesting(void)
{
	struct sink s;
	struct jsonw w;
	unsigned int i;

	if (!CHECK(sink_open(&s), "memstream", "open_memstream failed"))
		return;
	jsonw__open(&w, s.f);
	jsonw__array(&w, "empty");
	jsonw__array_end(&w);
	jsonw__array(&w, "pids");
	for (i = 1; i <= 3; i++)
		jsonw__u64(&w, NULL, i);
	jsonw__array_end(&w);
	jsonw__array(&w, "stopped");
	for (i = 0; i < 2; i++) {
		jsonw__object(&w, NULL);
		jsonw__u64(&w, "pid", i);
		jsonw__str(&w, "comm", "x");
		jsonw__object_end(&w);
	}
	jsonw__array_end(&w);
	jsonw__object(&w, "inner");
	jsonw__object_end(&w);
	jsonw__u64(&w, "last", 0);
	jsonw__close(&w);
	/* The writer is ready for the next line. */
	jsonw__open(&w, s.f);
	jsonw__u64(&w, "n", 1);
	jsonw__close(&w);
	CHECK_TEXT(sink_text(&s), "{\"empty\":[],\"pids\":[1,2,3],\"stopped\":[{\"pid\":0,"
		   "\"comm\":\"x\"},{\"pid\":1,\"comm\":\"x\"}],\"inner\":{},\"last\":0}\n"
		   "{\"n\":1}\n", "nesting");
	free(s.buf);
}

/* A name a traced process chose: no quote, backslash or control byte gets out. */
static void test_hostile(void)
{
	static const struct {
		const char *in;
		const char *out;
	} cases[] = {
		{ "a\"},\"pid\":1,\"x\":\"", "\"a\\\"},\\\"pid\\\":1,\\\"x\\\":\\\"\"" },
		{ "line\nforged", "\"line\\u000aforged\"" },
		{ "\x1b[31mred", "\"\\u001b[31mred\"" },
		{ "back\\slash", "\"back\\\\slash\"" },
		{ "\xff\xfe\x7f", "\"\\u00ff\\u00fe\\u007f\"" },
		{ "caf\xc3\xa9", "\"caf\\u00c3\\u00a9\"" },
		{ "", "\"\"" },
	};
	const unsigned char *p;
	struct sink s;
	struct jsonw w;
	const char *text;
	size_t i, want;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (!CHECK(sink_open(&s), "memstream", "open_memstream failed"))
			return;
		jsonw__open(&w, s.f);
		jsonw__str(&w, NULL, cases[i].in);
		jsonw__array(&w, NULL);
		jsonw__str(&w, NULL, cases[i].in);
		jsonw__array_end(&w);
		jsonw__close(&w);
		text = sink_text(&s);
		want = 1 + 2 * strlen(cases[i].out) + 2 + 3;
		CHECK(!strncmp(text + 1, cases[i].out, strlen(cases[i].out)), "escaped",
		      "case %zu: %s", i, text);
		CHECK_EQ(strlen(text), want, "length");
		/* One line of printable ASCII: nothing a terminal or a reader acts on. */
		for (p = (const unsigned char *)text; *p && p[1]; p++)
			if (!CHECK(*p >= 0x20 && *p < 0x7f, "ascii", "case %zu byte 0x%02x", i, *p))
				break;
		free(s.buf);
	}
}

int main(void)
{
	RUN_SUBTEST(test_members);
	RUN_SUBTEST(test_nesting);
	RUN_SUBTEST(test_hostile);
	return CHECK_EXIT();
}
