/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * user/lib: the bottom layer, what every other folder may use and which
 * uses nothing of umtrace: the log (log.c), the clock and the page size
 * (sys.c), memory locked (sys.c), numbers and byte counts (units.c),
 * untrusted names escaped for every output format (escape.c), /proc
 * readers (procfs.c, meminfo.c, numa.c), files made safely and written
 * off a loop (out_file.c, file_writer.c), and the tables others build on
 * (strtab.c, hashtab.c, pid_table.c).
 */
/*
 * Diagnostics go to stderr, data to stdout.
 *
 * By default a line is written at once. A daemon that must never block
 * on its log (the guard: under systemd stderr is a stream to journald,
 * which can stall) calls log__queue() and log__start_writer(): from
 * then on a line is queued and written by a thread of its own; when the
 * queue is full the oldest ordinary line is dropped first, a stop line
 * last, and the count of dropped lines is written once stderr takes
 * lines again.
 */
#ifndef UMTRACE_LOG_H
#define UMTRACE_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* -v: umtrace says what it finds and attaches; -vv: libbpf's debug log too. */
extern int log_verbose;

enum log_prio {
	LOG_PRIO_INFO,		/* dropped first when the queue is full */
	LOG_PRIO_STOP,		/* a stop or resume: dropped last */
};

void log__printf(enum log_prio prio, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void log__vprintf(enum log_prio prio, const char *fmt, va_list ap);

#define elog(fmt, ...) log__printf(LOG_PRIO_INFO, "umtrace: " fmt "\n", ##__VA_ARGS__)
#define wlog(fmt, ...) log__printf(LOG_PRIO_INFO, "umtrace: warning: " fmt "\n", ##__VA_ARGS__)
#define vlog(fmt, ...)							\
	do {								\
		if (log_verbose)					\
			elog(fmt, ##__VA_ARGS__);			\
	} while (0)
/* A stop or a resume: the line an operator must not lose. */
#define slog(fmt, ...) log__printf(LOG_PRIO_STOP, "umtrace: " fmt "\n", ##__VA_ARGS__)

/*
 * Queue up to max_lines lines (never written) from log__queue() on;
 * they are written once log__start_writer() has started the thread that
 * writes them. A daemon queues from its first line and starts the writer
 * once it has dropped its capabilities, so that the thread never holds
 * them. 0 or -errno.
 */
int log__queue(unsigned int max_lines);
int log__start_writer(void);
/*
 * Write what is queued, waiting at most timeout_ms for stderr, and go
 * back to writing at once. Returns how many lines were never written.
 */
uint64_t log__stop_async(unsigned int timeout_ms);

struct log_stats {
	uint64_t queued;	/* lines handed to the queue */
	uint64_t written;	/* of those lines */
	uint64_t dropped;	/* lines the full queue had no room for */
	uint64_t dropped_stops;	/* of which stop lines */
};
void log__stats(struct log_stats *st);

/*
 * A condition that may hold at every sample: logged when it starts, then
 * at most once per LOG_REPEAT_MS with how often it held meanwhile, and
 * once when it ends. One struct per condition; not thread-safe.
 */
#define LOG_REPEAT_MS 60000

struct log_repeat {
	const char *what;	/* names it in the line that ends it */
	uint64_t last_ms;	/* when it was last logged */
	uint64_t held;		/* times it held since that line */
	uint64_t total;		/* times it held since it started */
	bool active;
};

void log__repeat(struct log_repeat *r, uint64_t now_ms, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void log__repeat_end(struct log_repeat *r);

#endif /* UMTRACE_LOG_H */
