/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Finding the libcuda files to probe. A uprobe belongs to a file (an
 * inode), not to a path, so the set is keyed by device and inode: the same
 * library seen through many /proc/PID/root paths is probed once.
 */
#ifndef UMTRACE_LIBCUDA_H
#define UMTRACE_LIBCUDA_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct libcuda {
	char path[PATH_MAX];
	dev_t dev;
	ino_t ino;
	bool probed;	/* the caller has attached to it */
	int n_probed;	/* entry points probed in it */
	bool said;	/* "probing ..." was said */
};

struct libcuda_set {
	struct libcuda *libs;
	size_t n, cap;
};

/* 1 if added, 0 if already known, -errno if the path cannot be used. */
int libcuda_set__add(struct libcuda_set *set, const char *path);
/* The dynamic linker cache, LD_LIBRARY_PATH and the usual driver places. */
void libcuda_set__add_default(struct libcuda_set *set);
/* Every libcuda.so* mapped by a running process; returns how many are new. */
int libcuda_set__scan_proc(struct libcuda_set *set);
/* The same for one process: how many are new, or -errno (no such process). */
int libcuda_set__scan_pid(struct libcuda_set *set, pid_t pid);
void libcuda_set__free(struct libcuda_set *set);

#endif /* UMTRACE_LIBCUDA_H */
