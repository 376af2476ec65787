/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Finding the libraries to probe: libcuda (its allocation entry points)
 * and PyTorch's libc10 (its caching allocator's hook). A uprobe belongs to
 * a file (an inode), not to a path, so the set is keyed by device, inode
 * and kind: the same library seen through many /proc/PID/root paths is
 * probed once.
 *
 * A library found in a container is the container's file: the path is
 * resolved once, inside the container's root, and the file is kept open
 * until it is probed, so that what is read (its symbols) and what is
 * probed are the file found, whatever the container does to the path
 * meanwhile (libcuda__file).
 */
#ifndef UMTRACE_LIBCUDA_H
#define UMTRACE_LIBCUDA_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

enum lib_kind {
	LIB_CUDA,	/* libcuda.so* */
	LIB_C10,	/* libc10.so (PyTorch; wheels keep it in torch/lib) */
	LIB_LOADER,	/* ld-linux*.so*: says when a process maps libraries */
	LIB__KINDS,
};

struct libcuda {
	char name[PATH_MAX];	/* the path found, in the terminal form: for messages */
	int fd;			/* the file, until probed; -1 after */
	enum lib_kind kind;
	dev_t dev;
	ino_t ino;
	bool probed;	/* the caller has attached to it */
	int n_probed;	/* entry points probed in it */
	bool said;	/* "probing ..." was said */
};

struct libcuda_set {
	struct libcuda *libs;
	size_t n, cap;
	unsigned int skip;	/* bit per kind not looked for (named, or not wanted) */
};

/* 1 if added, 0 if already known, -errno if the path cannot be used. */
int libcuda_set__add(struct libcuda_set *set, const char *path, enum lib_kind kind);
/*
 * The path to read and probe lib by: its open file (/proc/self/fd/N),
 * which the kernel resolves to that very file; NULL once closed.
 */
const char *libcuda__file(const struct libcuda *lib, char *buf, size_t len);
/* Done with reading and probing it: its file is closed. */
void libcuda__close(struct libcuda *lib);
/*
 * The dynamic linker cache and LD_LIBRARY_PATH, for libcuda the usual
 * driver places, for the loader its usual paths.
 */
void libcuda_set__add_default(struct libcuda_set *set);
/* Every library looked for mapped by a running process; returns how many are new. */
int libcuda_set__scan_proc(struct libcuda_set *set);
/* The same for one process: how many are new, or -errno (no such process). */
int libcuda_set__scan_pid(struct libcuda_set *set, pid_t pid);
void libcuda_set__free(struct libcuda_set *set);
/* How many of the set are of this kind. */
size_t libcuda_set__count(const struct libcuda_set *set, enum lib_kind kind);
/* Which kind a file name (a path's last part) is, or -1: neither. */
int lib_kind__of(const char *path);

#endif /* UMTRACE_LIBCUDA_H */
