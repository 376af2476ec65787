/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Untrusted bytes at their sink. Everything a traced process chooses (its
 * name, its symbols, its perf map, its paths, its cgroup, its environment)
 * is bytes, not text: a name can hold a newline, a quote, a terminal's
 * escape sequence or invalid UTF-8. Each output format has one function
 * here that writes such bytes so that they stay inside their field: no
 * forged line, no split row, no control code on root's terminal. Every
 * format's rule is here, and only here.
 */
#ifndef UMTRACE_ESCAPE_H
#define UMTRACE_ESCAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/*
 * The length of the valid UTF-8 character at s (1 for ASCII, NUL
 * included), 0 for a byte that starts none: stray continuation bytes,
 * overlong forms, surrogates, code points past U+10FFFF. Never reads past
 * a NUL.
 */
size_t utf8__len(const unsigned char *s);
/*
 * The valid character of n bytes at s is one a terminal or a browser
 * acts on rather than shows: C0, DEL, C1 (U+0080..U+009F: xterm takes
 * U+009B as CSI even in UTF-8), and the bidirectional embeddings,
 * overrides and isolates (U+202A..U+202E, U+2066..U+2069), which make a
 * name read as another. Every format leaves them out, each its own way.
 */
bool utf8__is_control(const unsigned char *s, size_t n);

/* Room for n bytes written in the terminal form, whatever they are. */
#define ESC_TERM_LEN(n) (4 * (n) + 1)

/*
 * Terminal text (trace's table, report, top, status, log messages, the
 * hooks' environment): src with each byte that is not part of a valid,
 * printable UTF-8 character written as \xNN (the C0 and C1 controls, DEL,
 * invalid bytes, and the bidirectional overrides that reorder what a
 * reader sees), and '\' as "\\", so the form reads back to the bytes. A
 * name of printable text is unchanged. Cut at a whole escape to fit len
 * (at least 1); returns dst.
 */
const char *esc__term(const char *src, char *dst, size_t len);
/* The same to a stream, for a string of no known bound. */
void esc__term_f(FILE *f, const char *s);

/*
 * One whitespace-free token of a line format (the guard's state file):
 * the terminal form with ' ' also written as \x20. ESC_TERM_LEN(n) holds
 * it. esc__unescape() gives the bytes back. Returns dst.
 */
const char *esc__token(const char *src, char *dst, size_t len);

/*
 * The bytes a terminal form or a token stands for: \xNN and \\ read back,
 * anything else kept as it is. Cut to fit len (at least 1), NUL-terminated;
 * returns the bytes written, NUL excluded (a \x00 makes strlen() shorter).
 * Never longer than src.
 */
size_t esc__unescape(const char *src, char *dst, size_t len);

/* Room for n bytes as a key=value log value: the terminal form, quoted. */
#define ESC_KV_LEN(n) (4 * (n) + 3)

/*
 * A key=value log line's value (the guard's stop lines, the journal):
 * the terminal form in double quotes, with '"' written as \", so the
 * value is one token on one line that no name can end early or forge a
 * key in. Read back as C reads a string (\" a quote, \\ a backslash,
 * \xNN a byte), it gives the bytes exactly; a logfmt reader, which knows
 * no \xNN, gives the terminal form with its backslashes undoubled.
 * Returns dst.
 */
const char *esc__kv(const char *src, char *dst, size_t len);

/*
 * A Prometheus label value, between its quotes: the terminal form (so
 * the value is valid UTF-8, which node_exporter needs to keep the file,
 * and holds no newline), with '\' and '"' escaped as the exposition
 * format asks: the value read back is the terminal form.
 */
void esc__prom_label(FILE *f, const char *s);

/*
 * XML character data or an attribute's value (the SVGs): '&', '<', '>',
 * '"' and '\'' as entities. s must be text already (text__clean()): XML
 * has no way to carry a control character at all.
 */
void esc__xml(FILE *f, const char *s);
void esc__xml_n(FILE *f, const char *s, size_t n);

/*
 * A folded stack's frame: ';' separates frames and a newline ends the
 * stack, so ';' is written as ':' and any control character as a space.
 * Spaces stay: readers take the count after the last space.
 */
void esc__folded_frame(FILE *f, const char *s);

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

#endif /* UMTRACE_ESCAPE_H */
