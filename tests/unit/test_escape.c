// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * lib/escape.c: each format's rule against the names a process can give
 * itself, checked the way that format's reader reads.
 */
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "lib/escape.h"

#define BIG 256

static const char *const hostile[] = {
	"a\n\"b=1\x1b[31m",	/* a forged line, key and colour */
	"\x9b",			/* C1 CSI as a byte */
	"\xc2\x9b",		/* U+009B: xterm's CSI in UTF-8 */
	"\xe2\x80\xae",		/* U+202E RIGHT-TO-LEFT OVERRIDE */
	"\xff\xfe",		/* not UTF-8 */
	"<script>",
	"../..",
	"abcdefghijklmno",	/* the longest comm */
	";",
	"\\",
	"",
	".",
	"..",
	"-rf",
	"a b\tc",
	"caf\xc3\xa9 \xe2\x82\xac",
	"\x7f\x01\x1f",
};

#define N_HOSTILE (sizeof(hostile) / sizeof(hostile[0]))

/* What a terminal shows as it is: valid UTF-8, no C0, DEL, C1 or bidi control. */
static bool printable(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n;

	for (; *s; s += n) {
		n = utf8__len(s);
		if (!n || (n == 1 && (*s < 0x20 || *s == 0x7f)))
			return false;
		if (n == 2 && s[0] == 0xc2 && s[1] < 0xa0)
			return false;
		if (n == 3 && s[0] == 0xe2 && ((s[1] == 0x80 && s[2] >= 0xaa && s[2] <= 0xae) ||
					       (s[1] == 0x81 && s[2] >= 0xa6 && s[2] <= 0xa9)))
			return false;
	}
	return true;
}

/* logfmt's reading: one token in quotes, every '"' inside escaped, no half escape. */
static bool one_kv_token(const char *s)
{
	size_t n = strlen(s), i;

	if (n < 2 || s[0] != '"' || s[n - 1] != '"')
		return false;
	for (i = 1; i < n - 1; i++) {
		if (s[i] == '"')
			return false;
		if (s[i] != '\\')
			continue;
		if (s[i + 1] == '\\' || (s[i + 1] == '"' && i + 1 < n - 1))
			i++;
		else if (s[i + 1] == 'x' && i + 3 < n - 1)
			i += 3;
		else
			return false;
	}
	return true;
}

static bool unescapes_to(const char *form, const char *want)
{
	char back[BIG];
	size_t n = esc__unescape(form, back, sizeof(back));

	return n == strlen(want) && !memcmp(back, want, n);
}

static void test_terminal(void)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{ "a\n\"b=1\x1b[31m", "a\\x0a\"b=1\\x1b[31m" },
		{ "\x9b", "\\x9b" },
		{ "\xc2\x9b", "\\xc2\\x9b" },
		{ "\xe2\x80\xae", "\\xe2\\x80\\xae" },
		{ "\xff\xfe", "\\xff\\xfe" },
		{ "<script>", "<script>" },
		{ "\\", "\\\\" },
		{ "caf\xc3\xa9 \xe2\x82\xac", "caf\xc3\xa9 \xe2\x82\xac" },
		{ "", "" },
	};
	char buf[ESC_TERM_LEN(32)];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		esc__term(cases[i].in, buf, sizeof(buf));
		CHECK(!strcmp(buf, cases[i].want), "term", "case %zu: '%s'", i, buf);
	}
	for (i = 0; i < N_HOSTILE; i++) {
		esc__term(hostile[i], buf, sizeof(buf));
		CHECK(printable(buf), "printable", "input %zu: '%s'", i, buf);
		CHECK(unescapes_to(buf, hostile[i]), "reads back", "input %zu: '%s'", i, buf);
	}
	CHECK(!strcmp(esc__term(NULL, buf, sizeof(buf)), ""), "NULL", "'%s'", buf);
}

static void test_token(void)
{
	char buf[ESC_TERM_LEN(32)];
	size_t i;

	CHECK(!strcmp(esc__token("a b", buf, sizeof(buf)), "a\\x20b"), "space", "'%s'", buf);
	for (i = 0; i < N_HOSTILE; i++) {
		esc__token(hostile[i], buf, sizeof(buf));
		CHECK(printable(buf) && !strchr(buf, ' '), "one token", "input %zu: '%s'", i, buf);
		CHECK(unescapes_to(buf, hostile[i]), "round trip", "input %zu: '%s'", i, buf);
	}
}

static void test_kv(void)
{
	char buf[ESC_KV_LEN(32)];
	size_t i;

	esc__kv("a\n\"b=1\x1b[31m", buf, sizeof(buf));
	CHECK(!strcmp(buf, "\"a\\x0a\\\"b=1\\x1b[31m\""), "kv", "'%s'", buf);
	CHECK(!strcmp(esc__kv("", buf, sizeof(buf)), "\"\""), "empty", "'%s'", buf);
	for (i = 0; i < N_HOSTILE; i++) {
		esc__kv(hostile[i], buf, sizeof(buf));
		CHECK(printable(buf) && one_kv_token(buf), "kv token", "input %zu: '%s'", i, buf);
	}
}

static void test_prom_label(void)
{
	char term[ESC_TERM_LEN(32)], *text, *o;
	const char *p;
	size_t len, i;
	FILE *f;

	for (i = 0; i < N_HOSTILE; i++) {
		text = NULL;
		f = open_memstream(&text, &len);
		if (!CHECK(f != NULL, "memstream", "failed"))
			return;
		esc__prom_label(f, hostile[i]);
		fclose(f);
		/* The exposition format's reading: \\ and \" (no newline can be there). */
		for (p = o = text; *p; p++) {
			if (*p == '\\' && (p[1] == '\\' || p[1] == '"'))
				p++;
			else
				CHECK(*p != '"' && *p != '\n', "label", "input %zu: '%s'", i, text);
			*o++ = *p;
		}
		*o = '\0';
		esc__term(hostile[i], term, sizeof(term));
		CHECK(!strcmp(text, term), "reads as the terminal form", "input %zu: '%s'", i,
		      text);
		free(text);
	}
}

static void test_xml_folded(void)
{
	char *text = NULL;
	size_t len;
	FILE *f = open_memstream(&text, &len);

	if (!CHECK(f != NULL, "memstream", "failed"))
		return;
	esc__xml(f, "<script>&\"'");
	fputc('|', f);
	esc__xml_n(f, "<ab", 2);
	fputc('|', f);
	esc__folded_frame(f, "a;b\nc d\x7f");
	fclose(f);
	CHECK(!strcmp(text, "&lt;script&gt;&amp;&quot;&apos;|&lt;a|a:b c d "), "xml, folded",
	      "'%s'", text);
	free(text);
}

/*
 * Cut at every length: NUL-terminated inside the buffer, and what is kept
 * is the form of a prefix of the input, never half an escape.
 */
static void check_cuts(const char *(*form)(const char *, char *, size_t), const char *name)
{
	char buf[BIG], again[BIG], back[BIG];
	size_t i, len, n;

	for (i = 0; i < N_HOSTILE; i++) {
		for (len = 1; len <= ESC_TERM_LEN(strlen(hostile[i])); len++) {
			memset(buf, 'Z', sizeof(buf));
			form(hostile[i], buf, len);
			if (!CHECK(memchr(buf, '\0', len), name, "input %zu len %zu: no NUL", i,
				   len))
				continue;
			n = esc__unescape(buf, back, sizeof(back));
			form(back, again, sizeof(again));
			CHECK(!strncmp(back, hostile[i], n) && !strcmp(again, buf), name,
			      "input %zu len %zu: '%s'", i, len, buf);
		}
	}
}

static void test_truncation(void)
{
	char buf[16];
	size_t len;

	check_cuts(esc__term, "term cut");
	check_cuts(esc__token, "token cut");
	CHECK(!strcmp(esc__term("\x1b\x1b", buf, 6), "\\x1b"), "whole escape", "'%s'", buf);
	CHECK(!strcmp(esc__term("\xe2\x82\xac", buf, 3), ""), "whole character", "'%s'", buf);
	CHECK(!strcmp(esc__term("ab", buf, 1), ""), "len 1", "'%s'", buf);
	for (len = 3; len <= ESC_KV_LEN(3); len++) {
		esc__kv("\x1b\"x", buf, len);
		CHECK(strlen(buf) < len && one_kv_token(buf), "kv cut", "len %zu: '%s'", len, buf);
	}
	CHECK_EQ(esc__unescape("abcdef", buf, 3), 2, "unescape cut");
	CHECK(!strcmp(buf, "ab"), "unescape cut", "'%s'", buf);
	CHECK_EQ(esc__unescape("\\x4", buf, sizeof(buf)), 3, "half escape kept");
	CHECK(!strcmp(buf, "\\x4"), "half escape kept", "'%s'", buf);
}

int main(void)
{
	RUN_SUBTEST(test_terminal);
	RUN_SUBTEST(test_token);
	RUN_SUBTEST(test_kv);
	RUN_SUBTEST(test_prom_label);
	RUN_SUBTEST(test_xml_folded);
	RUN_SUBTEST(test_truncation);
	return CHECK_EXIT();
}
