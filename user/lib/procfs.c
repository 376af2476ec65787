// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include "lib/out_file.h"
#include "lib/procfs.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/* The kernel's handle type for a kernfs node: its 64-bit id. */
#define FILEID_KERNFS 0xfe

char *proc__read_fd(int fd, size_t *len)
{
	size_t cap = 64 * 1024, n = 0;
	char *buf = malloc(cap), *nb;
	ssize_t r;
	int err;

	if (!buf)
		return NULL;
	for (;;) {
		if (cap - n < 4096) {
			nb = realloc(buf, cap * 2);
			if (!nb)
				goto err;
			buf = nb;
			cap *= 2;
		}
		r = read(fd, buf + n, cap - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			goto err;
		if (!r)
			break;
		n += (size_t)r;
	}
	buf[n] = '\0';
	*len = n;
	return buf;
err:
	err = errno;
	free(buf);
	errno = err;
	return NULL;
}

char *proc__read_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;
	char *buf;

	if (fd < 0)
		return NULL;
	buf = proc__read_fd(fd, len);
	err = errno;
	close(fd);
	errno = err;
	return buf;
}

char *proc__read_pid_file(pid_t pid, const char *name, size_t *len)
{
	char path[64];

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	else
		snprintf(path, sizeof(path), "/proc/self/%s", name);
	return proc__read_file(path, len);
}

int proc__status_find(const char *text, const char *key, char *buf, size_t len)
{
	size_t klen = strlen(key), n;
	const char *line = text, *end, *v;

	for (; *line; line = *end ? end + 1 : end) {
		end = line + strcspn(line, "\n");
		if (strncmp(line, key, klen) || line[klen] != ':')
			continue;
		v = line + klen + 1;
		v += strspn(v, " \t");
		n = (size_t)(end - v);
		if (n >= len)
			return -ENOSPC;
		memcpy(buf, v, n);
		buf[n] = '\0';
		return 0;
	}
	return -ENOENT;
}

/* The finders' shape: a value of key in text, the file read whole. */
typedef int (*find_fn)(const char *text, size_t text_len, const char *key, char *buf,
		       size_t len);

static int pid_file_find(pid_t pid, const char *file, find_fn find, const char *key,
			 char *buf, size_t len)
{
	size_t n;
	char *text = proc__read_pid_file(pid, file, &n);
	int err;

	if (!text)
		return -errno;
	err = find(text, n, key, buf, len);
	free(text);
	return err;
}

static int status_find(const char *text, size_t text_len, const char *key, char *buf,
		       size_t len)
{
	(void)text_len;	/* a status file holds no NUL */
	return proc__status_find(text, key, buf, len);
}

int proc__status(pid_t pid, const char *key, char *buf, size_t len)
{
	return pid_file_find(pid, "status", status_find, key, buf, len);
}

int proc__cgroup(pid_t pid, char *buf, size_t len)
{
	char path[64], line[4096];
	int err = -ENOENT;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	/* cgroup v2 is the "0::" line. */
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "0::", 3))
			continue;
		line[strcspn(line, "\n")] = '\0';
		if (strlen(line + 3) >= len) {
			err = -ENAMETOOLONG;
			break;
		}
		strcpy(buf, line + 3);
		err = 0;
		break;
	}
	fclose(f);
	return err;
}

char proc__state(pid_t pid)
{
	char path[64], buf[1024], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	/*
	 * Read whole, not by line: the comm may hold spaces, parentheses and
	 * newlines, and the state follows the last ')'.
	 */
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

bool proc__comm(pid_t pid, char *buf, size_t len)
{
	char path[64], name[80];
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	/* Read whole: a name may hold a newline; only the kernel's, the last, goes. */
	n = fread(name, 1, sizeof(name), f);
	fclose(f);
	if (!n)
		return false;
	if (name[n - 1] == '\n')
		n--;
	snprintf(buf, len, "%.*s", (int)n, name);
	return true;
}

int proc__environ_find(const char *env, size_t env_len, const char *name, char *buf,
		       size_t len)
{
	size_t nlen = strlen(name), i = 0, vlen;
	const char *e, *end = env + env_len;

	while (i < env_len) {
		e = env + i;
		vlen = strnlen(e, (size_t)(end - e));
		if (vlen > nlen && e[nlen] == '=' && !memcmp(e, name, nlen)) {
			vlen -= nlen + 1;
			if (len) {
				if (vlen >= len)
					vlen = len - 1;
				memcpy(buf, e + nlen + 1, vlen);
				buf[vlen] = '\0';
			}
			return 0;
		}
		i += vlen + 1;
	}
	return -ENOENT;
}

int proc__environ(pid_t pid, const char *name, char *buf, size_t len)
{
	return pid_file_find(pid, "environ", proc__environ_find, name, buf, len);
}

int proc__open_seen(pid_t pid, int root, const char *mountinfo, const char *path,
		    struct stat *st)
{
	if (mountinfo ? proc__mountinfo_on_fuse(mountinfo, path) : proc__path_on_fuse(pid, path))
		return -EDEADLK;
	if (root >= 0)
		return file__open_under(root, path, st);
	return file__open_in_root(pid, path, st);
}

const char *cgroup2__root(void)
{
	static char root[4096];
	char line[4096], mnt[4096], fstype[64];
	FILE *f;

	if (root[0])
		return root;
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return NULL;
	/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS... - FSTYPE SOURCE SUPER" */
	while (fgets(line, sizeof(line), f)) {
		char *dash = strstr(line, " - ");

		if (!dash || sscanf(dash + 3, "%63s", fstype) != 1 || strcmp(fstype, "cgroup2"))
			continue;
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) == 1) {
			snprintf(root, sizeof(root), "%s", mnt);
			break;
		}
	}
	fclose(f);
	return root[0] ? root : NULL;
}

/* mountinfo's octal escapes (\040 for a space) read back, in place. */
static void unoctal(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
			continue;
		}
		*o++ = *s;
	}
	*o = '\0';
}

/* The length of mnt if it holds path ("/" holds all, "/a" holds "/a/b"), else 0. */
static size_t holds(const char *mnt, const char *path)
{
	size_t n = strlen(mnt);

	if (n == 1 && mnt[0] == '/')
		return 1;
	if (strncmp(path, mnt, n) || (path[n] && path[n] != '/'))
		return 0;
	return n;
}

bool proc__mountinfo_on_fuse(const char *mountinfo, const char *path)
{
	char mnt[4096], fstype[64];
	const char *line, *dash;
	size_t best = 0, n;
	bool fuse = false;

	/* "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS... - FSTYPE SOURCE SUPER" */
	for (line = mountinfo; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		dash = strstr(line, " - ");
		if (!dash || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 ||
		    sscanf(dash + 3, "%63s", fstype) != 1)
			continue;
		unoctal(mnt);
		n = holds(mnt, path);
		if (n && n >= best) {
			best = n;
			fuse = !strncmp(fstype, "fuse", 4);
		}
	}
	return fuse;
}

bool proc__path_on_fuse(pid_t pid, const char *path)
{
	size_t len;
	char *text = proc__read_pid_file(pid, "mountinfo", &len);
	bool fuse;

	if (!text)
		return false;
	fuse = proc__mountinfo_on_fuse(text, path);
	free(text);
	return fuse;
}

int proc__each_pid(int (*fn)(pid_t pid, void *arg), void *arg)
{
	struct dirent *de;
	int ret = 0;
	DIR *d;

	d = opendir("/proc");
	if (!d)
		return -errno;
	while (!ret && (de = readdir(d)))
		if (isdigit((unsigned char)de->d_name[0]))
			ret = fn((pid_t)atoi(de->d_name), arg);
	closedir(d);
	return ret;
}

/* A number in base 10 or 16 at *p, before end; *p moves past it. */
static bool maps_num(const char **p, const char *end, unsigned int base, uint64_t *v)
{
	const char *s = *p;
	unsigned int d;
	uint64_t x = 0;

	for (; s < end; s++) {
		if (*s >= '0' && *s <= '9')
			d = (unsigned int)(*s - '0');
		else if (base == 16 && (*s | 0x20) >= 'a' && (*s | 0x20) <= 'f')
			d = (unsigned int)((*s | 0x20) - 'a' + 10);
		else
			break;
		x = x * base + d;
	}
	if (s == *p)
		return false;
	*p = s;
	*v = x;
	return true;
}

/* One or more blanks at *p; *p moves past them. */
static bool maps_blanks(const char **p, const char *end)
{
	const char *s = *p;

	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	if (s == *p)
		return false;
	*p = s;
	return true;
}

/* The length of the field at p: up to a blank or end. */
static size_t maps_word(const char *p, const char *end)
{
	const char *s = p;

	while (s < end && *s != ' ' && *s != '\t')
		s++;
	return (size_t)(s - p);
}

/*
 * Read within the line only: sscanf would measure the whole rest of the
 * text at every line, and a walk over a large maps file would cost its
 * square (tests/bench/maps_walk.c).
 */
bool proc__maps_parse(const char *line, struct maps_ent *e)
{
	const char *end = strchrnul(line, '\n'), *p = line;
	uint64_t ino;
	size_t n;

	memset(e, 0, sizeof(*e));
	e->next = *end ? end + 1 : end;
	/* address perms offset dev inode path */
	if (!maps_num(&p, end, 16, &e->lo) || p == end || *p++ != '-' ||
	    !maps_num(&p, end, 16, &e->hi) || !maps_blanks(&p, end))
		return false;
	n = maps_word(p, end);
	if (!n || n >= sizeof(e->perms))
		return false;
	memcpy(e->perms, p, n);
	p += n;
	if (!maps_blanks(&p, end) || !maps_num(&p, end, 16, &e->offset) ||
	    !maps_blanks(&p, end))
		return false;
	n = maps_word(p, end);
	p += n;
	if (!n || !maps_blanks(&p, end) || !maps_num(&p, end, 10, &ino))
		return false;
	if (p < end && !maps_blanks(&p, end))
		return false;
	e->ino = (unsigned long)ino;
	e->path = p;
	e->path_len = (size_t)(end - p);
	return true;
}

bool proc__maps_path(const char *src, char *dst, size_t len)
{
	bool changed = false;
	size_t o = 0;

	if (!len)
		return false;
	while (*src && o + 1 < len) {
		if (!strncmp(src, "\\012", 4)) {
			dst[o++] = '\n';
			src += 4;
			changed = true;
			continue;
		}
		dst[o++] = *src++;
	}
	dst[o] = '\0';
	return changed;
}

int pidfd__open(pid_t pid)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);

	return fd < 0 ? -errno : fd;
}

static int module_index(const char *const *mods, size_t n, const char *tag)
{
	size_t i, len = strcspn(tag, "]");

	if (tag[len] != ']')
		return -1;
	for (i = 0; i < n; i++)
		if (strlen(mods[i]) == len && !strncmp(mods[i], tag, len))
			return (int)i;
	return -1;
}

/* "ffffffffc0a01000 t scan_fn\t[nvidia]": a function of a named module. */
static void kallsyms_line(const char *line, const char *const *mods, size_t n,
			  uint64_t (*lo_hi)[2])
{
	unsigned long long addr;
	const char *tag;
	char type;
	int i;

	if (sscanf(line, "%llx %c", &addr, &type) != 2 || !addr)
		return;
	if (type != 't' && type != 'T')
		return;
	tag = strchr(line, '[');
	if (!tag)
		return;
	i = module_index(mods, n, tag + 1);
	if (i < 0)
		return;
	if (!lo_hi[i][0] || addr < lo_hi[i][0])
		lo_hi[i][0] = addr;
	if (addr + 1 > lo_hi[i][1])
		lo_hi[i][1] = addr + 1;
}

int proc__module_text(const char *const *mods, size_t n_mods, uint64_t (*ranges)[2],
		      size_t max)
{
	uint64_t (*lo_hi)[2];
	FILE *f = fopen("/proc/kallsyms", "re");
	char *line = NULL;
	size_t cap = 0, i, k = 0;

	if (!f)
		return -errno;
	lo_hi = calloc(n_mods ? n_mods : 1, sizeof(*lo_hi));
	if (!lo_hi) {
		fclose(f);
		return -ENOMEM;
	}
	while (getline(&line, &cap, f) > 0)
		kallsyms_line(line, mods, n_mods, lo_hi);
	free(line);
	fclose(f);
	for (i = 0; i < n_mods && k < max; i++)
		if (lo_hi[i][0]) {
			ranges[k][0] = lo_hi[i][0];
			ranges[k++][1] = lo_hi[i][1];
		}
	free(lo_hi);
	return (int)k;
}

bool proc__module_loaded(const char *name)
{
	size_t len, n = strlen(name);
	char *text = proc__read_file("/proc/modules", &len), *line;
	bool found = false;

	for (line = text; line && *line && !found; line = strchr(line, '\n')) {
		if (*line == '\n')
			line++;
		found = !strncmp(line, name, n) && line[n] == ' ';
	}
	free(text);
	return found;
}

/* The cgroup directory of a handle: open it, and read the path back. */
static int cgroup2__open_id(const char *root, uint64_t id)
{
	union {
		struct file_handle fh;
		char b[sizeof(struct file_handle) + sizeof(uint64_t)];
	} h;
	int mfd, fd, err;

	mfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (mfd < 0)
		return -errno;
	h.fh.handle_bytes = sizeof(id);
	h.fh.handle_type = FILEID_KERNFS;
	memcpy(h.fh.f_handle, &id, sizeof(id));
	fd = open_by_handle_at(mfd, &h.fh, O_RDONLY | O_CLOEXEC);
	err = fd < 0 ? -errno : fd;
	close(mfd);
	return err;
}

int cgroup2__path(uint64_t id, char *buf, size_t len)
{
	const char *root = cgroup2__root();
	char link[64], path[4096];
	size_t rlen;
	ssize_t n;
	int fd;

	if (!root)
		return -ENOENT;
	fd = cgroup2__open_id(root, id);
	if (fd < 0)
		return fd;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	close(fd);
	if (n < 0)
		return -errno;
	path[n] = '\0';
	rlen = strlen(root);
	if (strncmp(path, root, rlen) || (path[rlen] && path[rlen] != '/'))
		return -ENOENT;
	if (snprintf(buf, len, "%s", path[rlen] ? path + rlen : "/") >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}
