// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <linux/openat2.h>
#include "lib/out_file.h"

/* Symlinks followed in one path, as the kernel's MAXSYMLINKS. */
#define MAX_LINKS 40

#define TMP_TRIES 100

static int create_tmp(struct out_file *o, const char *path)
{
	struct stat sb;
	unsigned int i;
	int fd = -1;

	/* rename(2) would refuse only at the end, after all the work. */
	if (!lstat(path, &sb) && S_ISDIR(sb.st_mode))
		return -EISDIR;
	/* A name of our own beside path: rename does not cross file systems. */
	for (i = 0; i < TMP_TRIES; i++) {
		free(o->tmp);
		if (asprintf(&o->tmp, "%s.%d.%u.tmp", path, (int)getpid(), i) < 0) {
			o->tmp = NULL;
			return -ENOMEM;
		}
		fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd >= 0 || errno != EEXIST)
			break;
	}
	if (fd < 0) {
		fd = -errno;
		free(o->tmp);
		o->tmp = NULL;
	}
	return fd;
}

static bool special(mode_t m)
{
	return S_ISCHR(m) || S_ISFIFO(m);
}

/*
 * A device or a pipe named as the output (-o /dev/null, a FIFO a reader
 * waits on) is written where it is, as a shell's redirection would: never
 * refused as a file that exists, and never replaced by one (--force
 * renamed a file over /dev/null, for the whole host). A pipe without a
 * reader is an error, not a wait. -ENOENT: path is no such thing.
 */
static int open_special(const char *path)
{
	struct stat sb;
	int fd, fl;

	if (lstat(path, &sb) || !special(sb.st_mode))
		return -ENOENT;
	fd = open(path, O_WRONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno == ENXIO ? -EPIPE : -errno;
	/* Swapped for something else since: refused as any existing file is. */
	if (fstat(fd, &sb) || !special(sb.st_mode)) {
		close(fd);
		return -EEXIST;
	}
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK)) {
		close(fd);
		return -errno;
	}
	return fd;
}

int out_file__open(struct out_file *o, const char *path, bool force)
{
	int fd, err;

	memset(o, 0, sizeof(*o));
	if (!strcmp(path, "-")) {
		o->f = stdout;
		return 0;
	}
	fd = open_special(path);
	if (fd != -ENOENT) {
		if (fd < 0)
			return fd;
		o->path = path;
		o->f = fdopen(fd, "w");
		if (o->f)
			return 0;
		err = -errno;
		close(fd);
		return err;
	}
	if (force) {
		fd = create_tmp(o, path);
	} else {
		/* Never opens what is there, a planted symlink included. */
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd < 0)
			fd = -errno;
	}
	if (fd < 0)
		return fd;
	o->path = path;
	o->created = true;
	o->f = fdopen(fd, "w");
	if (!o->f) {
		err = -errno;
		close(fd);
		out_file__discard(o);
		return err;
	}
	return 0;
}

void out_file__discard(struct out_file *o)
{
	if (o->f && o->f != stdout)
		fclose(o->f);
	o->f = NULL;
	if (o->created)
		unlink(o->tmp ? o->tmp : o->path);
	o->created = false;
	free(o->tmp);
	o->tmp = NULL;
}

int out_file__commit(struct out_file *o)
{
	FILE *f = o->f;
	int err = 0;

	if (!o->path) {
		errno = 0;
		if (fflush(f) || ferror(f))
			err = errno ? -errno : -EIO;
		o->f = NULL;
		return err;
	}
	o->f = NULL;
	errno = 0;
	if (ferror(f) | fclose(f))
		err = errno ? -errno : -EIO;
	/* Replaces a symlink at path rather than following it. */
	if (!err && o->tmp && rename(o->tmp, o->path))
		err = -errno;
	if (err) {
		out_file__discard(o);
		return err;
	}
	o->created = false;
	free(o->tmp);
	o->tmp = NULL;
	return 0;
}

const char *out_file__name(const struct out_file *o)
{
	return o->path ? o->path : "standard output";
}

static int write_all(int fd, const char *p, size_t len)
{
	ssize_t w;

	while (len) {
		w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

static int open_dir_of(const char *path, const char **base)
{
	const char *slash = strrchr(path, '/');
	char *dir;
	int dfd;

	*base = slash ? slash + 1 : path;
	if (!**base)
		return -EISDIR;
	if (!slash)
		dir = strdup(".");
	else if (slash == path)
		dir = strdup("/");
	else
		dir = strndup(path, (size_t)(slash - path));
	if (!dir)
		return -ENOMEM;
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(dir);
	return dfd < 0 ? -errno : dfd;
}

int out_file__replace(const char *path, const void *buf, size_t len, mode_t mode)
{
	static unsigned int seq;
	char tmp[NAME_MAX + 1];
	const char *base;
	int dfd, fd = -1, err, i;

	dfd = open_dir_of(path, &base);
	if (dfd < 0)
		return dfd;
	/*
	 * Hidden and not named like the file, so that a collector reading
	 * *.prom skips it; O_EXCL never opens what is there, a planted
	 * symlink included.
	 */
	for (i = 0; i < TMP_TRIES; i++) {
		if (snprintf(tmp, sizeof(tmp), ".%s.%d.%u.tmp", base, (int)getpid(),
			     __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED)) >= (int)sizeof(tmp)) {
			err = -ENAMETOOLONG;
			goto out_close_dir;
		}
		fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			    mode);
		if (fd >= 0 || errno != EEXIST)
			break;
	}
	if (fd < 0) {
		err = -errno;
		goto out_close_dir;
	}
	err = fchmod(fd, mode) ? -errno : write_all(fd, buf, len);
	if (close(fd) && !err)
		err = -errno;
	if (!err && renameat(dfd, tmp, dfd, base))
		err = -errno;
	if (err)
		unlinkat(dfd, tmp, 0);
out_close_dir:
	close(dfd);
	return err;
}

int file__make_parent(const char *path)
{
	char *dir = strdup(path), *slash;
	int err = 0;

	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		if (mkdir(dir, 0700) && errno != EEXIST)
			err = -errno;
	}
	free(dir);
	return err;
}

static int openat2_nofollow(int dir, const char *path)
{
	struct open_how how = {
		.flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS,
	};
	long fd = syscall(SYS_openat2, dir, path, &how, sizeof(how));

	return fd < 0 ? -errno : (int)fd;
}

/*
 * Where openat2 is refused (a seccomp profile from before Linux 5.6):
 * the last component at least is never followed.
 */
static int open_nofollow(int dir, const char *path)
{
	int fd = openat(dir, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW);

	return fd < 0 ? -errno : fd;
}

int file__open_in_root(pid_t pid, const char *path, struct stat *st)
{
	char root[32];

	snprintf(root, sizeof(root), pid ? "/proc/%d/root" : "/", (int)pid);
	return file__open_below(root, path, st);
}

int file__open_below(const char *root, const char *path, struct stat *st)
{
	int dir, fd;

	dir = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return -errno;
	fd = file__open_under(dir, path, st);
	close(dir);
	return fd;
}

int file__open_under(int dir, const char *path, struct stat *st)
{
	struct stat b;
	int fd;

	while (*path == '/')
		path++;
	fd = openat2_nofollow(dir, path);
	if (fd == -ENOSYS || fd == -EPERM)
		fd = open_nofollow(dir, path);
	if (fd < 0)
		return fd;
	if (fstat(fd, &b) || !S_ISREG(b.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	if (st)
		*st = b;
	return fd;
}

/* No user but root may change it, or what is in it. */
static bool root_only_writes(const struct stat *st)
{
	return st->st_uid == 0 && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

static const char *describe_owner(const struct stat *st)
{
	if (st->st_uid)
		return "is not owned by root";
	return "is writable by group or others";
}

/*
 * One step of the walk: name (a component) in dir. A symlink's target
 * is put in front of the rest (an absolute one restarts at the root),
 * as the kernel would resolve it there. *fd gets the next directory, or
 * the file. 1: go on; 0: the file is open in *fd; -errno: why says.
 */
struct walk {
	int root, dir;
	char rest[PATH_MAX];
	unsigned int links;
	char why[PATH_MAX + 64];
};

static int walk_step(struct walk *w, const char *comp, bool last, int *fd)
{
	char target[PATH_MAX], tail[PATH_MAX];
	struct stat st;
	ssize_t n;

	if (fstatat(w->dir, comp, &st, AT_SYMLINK_NOFOLLOW)) {
		snprintf(w->why, sizeof(w->why), "%s: %s", comp, strerror(errno));
		return -errno;
	}
	if (S_ISLNK(st.st_mode)) {
		/* A link in a directory only root may write was made by root. */
		n = readlinkat(w->dir, comp, target, sizeof(target) - 1);
		if (n <= 0 || ++w->links > MAX_LINKS) {
			snprintf(w->why, sizeof(w->why), "%s: cannot follow the link", comp);
			return -ELOOP;
		}
		target[n] = '\0';
		snprintf(tail, sizeof(tail), "%s", w->rest);
		if (snprintf(w->rest, sizeof(w->rest), "%s/%s", target, tail) >=
		    (int)sizeof(w->rest))
			return -ENAMETOOLONG;
		if (target[0] == '/') {
			close(w->dir);
			w->dir = dup(w->root);
			if (w->dir < 0)
				return -errno;
		}
		return 1;
	}
	if (!root_only_writes(&st)) {
		snprintf(w->why, sizeof(w->why), "%s %s", comp, describe_owner(&st));
		return -EPERM;
	}
	if (last && !S_ISREG(st.st_mode)) {
		snprintf(w->why, sizeof(w->why), "%s is not a regular file", comp);
		return -EINVAL;
	}
	if (!last && !S_ISDIR(st.st_mode)) {
		snprintf(w->why, sizeof(w->why), "%s is not a directory", comp);
		return -ENOTDIR;
	}
	*fd = openat(w->dir, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC | (last ? 0 : O_DIRECTORY));
	if (*fd < 0) {
		snprintf(w->why, sizeof(w->why), "%s: %s", comp, strerror(errno));
		return -errno;
	}
	return last ? 0 : 1;
}

/* The next component of w->rest into comp; false when none is left. */
static bool next_comp(struct walk *w, char *comp, size_t len, bool *last)
{
	char *p = w->rest, *end;
	size_t n;

	while (*p == '/')
		p++;
	if (!*p)
		return false;
	end = strchrnul(p, '/');
	n = (size_t)(end - p) < len - 1 ? (size_t)(end - p) : len - 1;
	memcpy(comp, p, n);
	comp[n] = '\0';
	memmove(w->rest, end, strlen(end) + 1);
	for (p = w->rest; *p == '/'; p++)
		;
	*last = !*p;
	return true;
}

int file__open_trusted(int root, const char *path, char *why, size_t len)
{
	struct walk w = { .root = root };
	char comp[NAME_MAX + 1];
	struct stat st;
	bool last;
	int fd = -1, ret;

	snprintf(w.rest, sizeof(w.rest), "%s", path);
	if (fstat(root, &st) || !root_only_writes(&st)) {
		snprintf(why, len, "/ %s", describe_owner(&st));
		return -EPERM;
	}
	w.dir = dup(root);
	if (w.dir < 0)
		return -errno;
	ret = -ENOENT;
	snprintf(w.why, sizeof(w.why), "no file named");
	while (next_comp(&w, comp, sizeof(comp), &last)) {
		if (!strcmp(comp, ".") && !last)
			continue;
		ret = walk_step(&w, comp, last, &fd);
		if (ret <= 0)
			break;
		if (fd >= 0) {
			close(w.dir);
			w.dir = fd;
			fd = -1;
		}
		ret = -ENOENT;
	}
	close(w.dir);
	if (ret < 0) {
		snprintf(why, len, "%s", w.why);
		return ret;
	}
	return fd;
}
