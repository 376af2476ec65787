/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* What /proc says of one process. */
#ifndef UMTRACE_PROCFS_H
#define UMTRACE_PROCFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* The process's cgroup v2 path relative to the root ("/a/b"). 0 or -errno. */
int proc__cgroup(pid_t pid, char *buf, size_t len);
/* 'T' (stopped), 't', 'R', 'S', 'D', 'Z'...; 0 if the process is gone. */
char proc__state(pid_t pid);
/*
 * Its name (its main thread's comm), without the newline the kernel ends
 * it with (one inside the name stays: escape it at the sink); false if gone.
 */
bool proc__comm(pid_t pid, char *buf, size_t len);

/*
 * The value of the variable name in the process's environment as it was
 * at exec (/proc/PID/environ: root, or the process's owner). 0, -ENOENT
 * when it is not set, or -errno when the environment cannot be read.
 */
int proc__environ(pid_t pid, const char *name, char *buf, size_t len);
/* The same over an environ file's text: NUL-separated NAME=VALUE. */
int proc__environ_find(const char *env, size_t env_len, const char *name, char *buf,
		       size_t len);

/*
 * The value of key in /proc/PID/status (pid 0: this process): the text
 * after "key:" and its tabs, to the line's end ("1000\t1000\t..." for
 * Uid). The kernel escapes a newline in the name it shows, so a line is
 * the kernel's own. 0, -ENOENT when no line has that key, -ENOSPC when
 * the value does not fit, or -errno.
 */
int proc__status(pid_t pid, const char *key, char *buf, size_t len);
/* The same over a status file's text. */
int proc__status_find(const char *text, const char *key, char *buf, size_t len);

/*
 * fn for every process in /proc, until it returns non-zero: that, 0
 * after the last, or -errno when /proc cannot be read.
 */
int proc__each_pid(int (*fn)(pid_t pid, void *arg), void *arg);

/* One line of /proc/PID/maps. */
struct maps_ent {
	uint64_t lo, hi;	/* the range, [lo, hi) */
	char perms[5];		/* "r-xp" */
	uint64_t offset;
	unsigned long ino;
	const char *path;	/* in the line: a file, "[vdso]", or "" */
	size_t path_len;	/* to the line's end, its newline left out */
	const char *next;	/* the next line, or the text's NUL */
};

/*
 * Parse the line at line (to its newline or NUL), so that a whole file's
 * text is walked a line at a time: for (l = text; *l; l = e.next). false
 * if it is no maps line (e->next is set all the same).
 */
bool proc__maps_parse(const char *line, struct maps_ent *e);

/*
 * The file a /proc/PID/maps path names: the kernel writes a newline in
 * it as \012 (and nothing else escaped, so a name holding those four
 * characters reads the same: try the path as it is too). dst gets the
 * name; true if it differs from src.
 */
bool proc__maps_path(const char *src, char *dst, size_t len);

/*
 * path (as /proc/PID/maps names it) lies on a FUSE filesystem in the
 * process's mount namespace: the longest mount point of its mountinfo
 * that holds it is fuse's. Such a file is served by a process, perhaps
 * the traced one: any lookup, open or read of it may wait as long as that
 * process likes, so it is never touched. Decided from /proc alone. A
 * mountinfo that cannot be read says nothing: false.
 */
bool proc__path_on_fuse(pid_t pid, const char *path);
/* The same over a mountinfo file's text. */
bool proc__mountinfo_on_fuse(const char *mountinfo, const char *path);

/*
 * Open path (as /proc/PID/maps names it) as the process sees it: under
 * root, its root directory held open (file__open_under), or when root is
 * -1 under /proc/PID/root (file__open_in_root); never through a symlink,
 * and never on a FUSE mount of its mountinfo (NULL: read it now):
 * -EDEADLK. fd or -errno; -EACCES or -EPERM: its root may not be entered.
 */
int proc__open_seen(pid_t pid, int root, const char *mountinfo, const char *path,
		    struct stat *st);

/*
 * Where cgroup v2 is mounted: /sys/fs/cgroup on unified hosts,
 * /sys/fs/cgroup/unified on hybrid ones; NULL if nowhere.
 */
const char *cgroup2__root(void);
/*
 * A cgroup v2 directory's path below the root ("/a/b", "/" for the root)
 * from its id (the directory's inode, a kernfs node id, as BPF sees it),
 * through a file handle (needs CAP_DAC_READ_SEARCH). 0 or -errno.
 */
int cgroup2__path(uint64_t id, char *buf, size_t len);

/*
 * All of fd to its end (a /proc file, a BPF iterator), NUL-terminated for
 * text; *len excludes the NUL. Such files grow with the host (a line per
 * mapping, a pageset per CPU) and give no size up front. NULL with errno
 * set; the buffer is the caller's to free.
 */
char *proc__read_fd(int fd, size_t *len);
char *proc__read_file(const char *path, size_t *len);
/* The same for /proc/PID/name; pid 0: this process's. */
char *proc__read_pid_file(pid_t pid, const char *name, size_t *len);

/*
 * The text of the loaded modules named in mods, one [start, end) range a
 * module into ranges (at most max), from /proc/kallsyms: end is just past
 * its last function's start, so a function pointer into the module falls
 * inside. Needs the addresses (root); how many ranges, or -errno.
 */
int proc__module_text(const char *const *mods, size_t n_mods, uint64_t (*ranges)[2],
		      size_t max);
/* Is a module of that name loaded (/proc/modules)? */
bool proc__module_loaded(const char *name);

/*
 * pidfd_open(2), or -errno: a handle that names this process and no later
 * one with its pid, for signals and for a poll that wakes at its exit.
 */
int pidfd__open(pid_t pid);

#endif /* UMTRACE_PROCFS_H */
