/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Files made and opened safely in shared directories. An output file is
 * never an existing file, never reached through a symlink planted there;
 * with --force it is written beside its path and renamed over it, so a
 * reader never sees half of it. A file read is opened only if it is a
 * regular file: a traced process's inside its root, through no link
 * (file__open_in_root); one root's word rests on, only if no other user
 * could have made it (file__open_trusted).
 */
#ifndef UMTRACE_OUT_FILE_H
#define UMTRACE_OUT_FILE_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

struct out_file {
	FILE *f;
	const char *path;	/* NULL: stdout */
	char *tmp;		/* --force: written here, renamed over path */
	bool created;		/* path is ours to remove on failure */
};

/*
 * "-" is stdout. Otherwise create path 0644 (less the umask) with
 * O_CREAT | O_EXCL | O_NOFOLLOW: an existing file, or a symlink, is never
 * opened; with force, a temporary file beside it. A character device or
 * a FIFO is written in place, never replaced (-EPIPE: a FIFO without a
 * reader). 0 or -errno.
 */
int out_file__open(struct out_file *o, const char *path, bool force);
/* Flush and close; with force rename into place. 0 or -errno (then as discard). */
int out_file__commit(struct out_file *o);
/* Close and remove what was created. */
void out_file__discard(struct out_file *o);
/* The name for messages: the path, or "standard output". */
const char *out_file__name(const struct out_file *o);

/*
 * Replace path's content with buf: written to a hidden temporary file in
 * the same directory, given mode whatever the umask, renamed over path.
 * Readers see the old file or the new one; a symlink at path is replaced,
 * not written through. No fsync: files rewritten every few seconds do not
 * need one, and under memory pressure it can stall the caller when it
 * matters most. 0 or -errno.
 */
int out_file__replace(const char *path, const void *buf, size_t len, mode_t mode);
/* Make path's directory, 0700, when it is missing. 0 or -errno. */
int file__make_parent(const char *path);

struct stat;

/*
 * Open a path a traced process names (a /proc/PID/maps line: a path as
 * the kernel writes it, with no symlink in it) inside that process's
 * root, /proc/PID/root, for reading, only if it is a regular file. The
 * process's files are its own to arrange: the path is resolved as if
 * that root were /, a symlink anywhere in it is refused rather than
 * followed (one could lead out, to a file of the host), and a FIFO never
 * blocks the open. pid 0: the path in our own root, the same way. fd or
 * -errno (-ELOOP: a symlink on the way).
 */
int file__open_in_root(pid_t pid, const char *path, struct stat *st);
/* The same below the directory root ("/proc/PID/root"). */
int file__open_below(const char *root, const char *path, struct stat *st);
/*
 * The same below an open directory: a process's root held open while it
 * lived still resolves its paths once it has exited.
 */
int file__open_under(int dir, const char *path, struct stat *st);

/*
 * path (absolute), below the directory root, opened O_PATH the way the
 * kernel would resolve it there, symlinks included (an absolute one from
 * root again), only if it and every directory passed through are root's
 * and not writable by group or others: a file no user but root could
 * have put there or changed. The fd, or -errno with why (the first
 * component that fails, and how) in why.
 */
int file__open_trusted(int root, const char *path, char *why, size_t len);

#endif /* UMTRACE_OUT_FILE_H */
