// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <stdbool.h>
#include <string.h>
#include "lib/escape.h"

size_t utf8__len(const unsigned char *s)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n, i;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		n = 2;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		n = 3;
		if (s[0] == 0xe0)
			lo = 0xa0;	/* overlong */
		else if (s[0] == 0xed)
			hi = 0x9f;	/* UTF-16 surrogates */
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		n = 4;
		if (s[0] == 0xf0)
			lo = 0x90;	/* overlong */
		else if (s[0] == 0xf4)
			hi = 0x8f;	/* past U+10FFFF */
	} else {
		return 0;
	}
	/* A NUL fails these tests, so nothing past the string is read. */
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (i = 2; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

bool utf8__is_control(const unsigned char *s, size_t n)
{
	if (n == 1)
		return s[0] < 0x20 || s[0] == 0x7f;
	if (n == 2)
		return s[0] == 0xc2 && s[1] < 0xa0;
	if (n == 3 && s[0] == 0xe2 && s[1] == 0x80)
		return s[2] >= 0xaa && s[2] <= 0xae;
	if (n == 3 && s[0] == 0xe2 && s[1] == 0x81)
		return s[2] >= 0xa6 && s[2] <= 0xa9;
	return false;
}

/* Where a form goes: a buffer of len bytes, or a stream. */
struct sink {
	char *dst;
	size_t len, o;
	bool full;
	FILE *f;
	bool prom;	/* to f, with '\\' and '"' escaped once more */
};

/* Append n bytes whole, or nothing once they no longer fit. */
static void put(struct sink *k, const char *s, size_t n)
{
	size_t i;

	if (k->f) {
		for (i = 0; i < n; i++) {
			if (k->prom && (s[i] == '\\' || s[i] == '"'))
				fputc('\\', k->f);
			fputc(s[i], k->f);
		}
		return;
	}
	if (k->full || k->o + n >= k->len) {
		k->full = true;
		return;
	}
	memcpy(k->dst + k->o, s, n);
	k->o += n;
}

static void put_hex(struct sink *k, const unsigned char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	char e[16];
	size_t i;

	for (i = 0; i < n; i++) {
		e[4 * i] = '\\';
		e[4 * i + 1] = 'x';
		e[4 * i + 2] = hex[s[i] >> 4];
		e[4 * i + 3] = hex[s[i] & 0xf];
	}
	put(k, e, 4 * n);
}

/*
 * The terminal form and its two variants: a key=value value ('"' also
 * written as \") and a token (' ' also written as \x20).
 */
enum term_form { TERM_PLAIN, TERM_KV, TERM_TOKEN };

static void put_term(struct sink *k, const char *src, enum term_form form)
{
	const unsigned char *s = (const unsigned char *)(src ? src : "");
	size_t n;

	while (*s && !k->full) {
		n = utf8__len(s);
		if (*s == '\\' || (form == TERM_KV && *s == '"')) {
			char e[2] = { '\\', (char)*s };

			put(k, e, 2);
			n = 1;
		} else if (!n || (form == TERM_TOKEN && *s == ' ')) {
			put_hex(k, s, 1);
			n = 1;
		} else if (utf8__is_control(s, n)) {
			put_hex(k, s, n);
		} else {
			put(k, (const char *)s, n);
		}
		s += n;
	}
}

static const char *term_buf(const char *src, char *dst, size_t len, enum term_form form)
{
	struct sink k = { .dst = dst, .len = len };

	if (!len)
		return dst;
	put_term(&k, src, form);
	dst[k.o] = '\0';
	return dst;
}

const char *esc__term(const char *src, char *dst, size_t len)
{
	return term_buf(src, dst, len, TERM_PLAIN);
}

void esc__term_f(FILE *f, const char *s)
{
	struct sink k = { .f = f };

	put_term(&k, s, TERM_PLAIN);
}

const char *esc__token(const char *src, char *dst, size_t len)
{
	return term_buf(src, dst, len, TERM_TOKEN);
}

static int hex_val(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

size_t esc__unescape(const char *src, char *dst, size_t len)
{
	size_t o = 0;
	int hi, lo;

	if (!len)
		return 0;
	while (*src && o + 1 < len) {
		if (src[0] == '\\' && src[1] == '\\') {
			dst[o++] = '\\';
			src += 2;
		} else if (src[0] == '\\' && src[1] == 'x' && (hi = hex_val(src[2])) >= 0 &&
			   (lo = hex_val(src[3])) >= 0) {
			dst[o++] = (char)(hi << 4 | lo);
			src += 4;
		} else {
			/* Not an escape this form makes: kept as it is. */
			dst[o++] = *src++;
		}
	}
	dst[o] = '\0';
	return o;
}

const char *esc__kv(const char *src, char *dst, size_t len)
{
	struct sink k = { .dst = dst, .len = len };

	if (len < 3) {
		if (len)
			dst[0] = '\0';
		return dst;
	}
	/* The closing quote's room is kept back, so the value always ends. */
	k.len = len - 1;
	put(&k, "\"", 1);
	put_term(&k, src, TERM_KV);
	dst[k.o++] = '"';
	dst[k.o] = '\0';
	return dst;
}

void esc__prom_label(FILE *f, const char *s)
{
	struct sink k = { .f = f, .prom = true };

	/* The terminal form holds no newline: the format's "\n" is never needed. */
	put_term(&k, s, TERM_PLAIN);
}

void esc__xml_n(FILE *f, const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n && s[i]; i++) {
		switch (s[i]) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&apos;", f); break;
		default: fputc(s[i], f);
		}
	}
}

void esc__xml(FILE *f, const char *s)
{
	esc__xml_n(f, s, strlen(s));
}

void esc__folded_frame(FILE *f, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n;

	while (*p) {
		n = utf8__len(p);
		if (!n)
			n = 1;	/* cleaned text has none: kept as it is */
		if (*p == ';')
			fputc(':', f);
		else if (utf8__is_control(p, n))
			fputc(' ', f);
		else
			fwrite(p, 1, n, f);
		p += n;
	}
}

/* --- JSON --- */

static void put_json(FILE *f, const char *s, bool ascii)
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
	put_json(f, s, true);
}

void json__utf8_string(FILE *f, const char *s)
{
	put_json(f, s, false);
}
