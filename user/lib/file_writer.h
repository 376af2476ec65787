/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Files a loop rewrites now and then (the guard's state file and
 * metrics), written by a thread of their own so that a slow or hung disk
 * never stalls the loop. Each put replaces the file's content whole
 * (out_file__replace); a newer content for a path that is still waiting
 * replaces the waiting one, so the thread only ever writes the newest.
 */
#ifndef UMTRACE_FILE_WRITER_H
#define UMTRACE_FILE_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FILE_WRITER_MAX 8	/* distinct paths */

struct file_writer;

struct file_writer *file_writer__new(void);
/*
 * Write buf (taken: freed by the writer) to path with mode; mkdir: make
 * the parent directory 0700 first when it is missing. 0, or -ENOSPC when
 * FILE_WRITER_MAX other paths are in use (buf is freed).
 */
int file_writer__put(struct file_writer *w, const char *path, char *buf, size_t len,
		     mode_t mode, bool mkdir);
/* The last write's result for path: 0, -errno, or 1 when none ended yet. */
int file_writer__result(struct file_writer *w, const char *path);
struct file_writer_stats {
	uint64_t puts;
	uint64_t written;
	uint64_t replaced;	/* contents superseded before they were written */
	uint64_t failed;
};
void file_writer__stats(struct file_writer *w, struct file_writer_stats *st);
/*
 * Write what waits, for at most timeout_ms, then stop the thread. A
 * thread stuck on the disk is left behind. Returns the contents that
 * were never written.
 */
unsigned int file_writer__free(struct file_writer *w, unsigned int timeout_ms);

#endif /* UMTRACE_FILE_WRITER_H */
