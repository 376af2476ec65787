// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include "attach/libcuda.h"
#include "lib/escape.h"
#include "lib/log.h"
#include "lib/out_file.h"
#include "lib/procfs.h"

/* Where NVIDIA's installers and container runtimes put the driver library. */
static const char *const driver_dirs[] = {
	"/usr/lib/x86_64-linux-gnu",
	"/usr/lib/aarch64-linux-gnu",
	"/usr/lib/aarch64-linux-gnu/nvidia",
	"/usr/lib/aarch64-linux-gnu/tegra",
	"/usr/lib64",
	"/usr/lib",
	"/usr/local/nvidia/lib64",
	"/usr/lib/wsl/lib",
};

/* The file names looked for, as in LD_LIBRARY_PATH and the linker cache. */
static const char *const lib_names[LIB__KINDS] = {
	[LIB_CUDA] = "libcuda.so.1",
	[LIB_C10] = "libc10.so",
};

/*
 * The host's dynamic loader (the PT_INTERP of this architecture's
 * programs); containers' and others are found mapped by a process.
 */
static const char *const loaders[] = {
#if defined(__x86_64__)
	"/lib64/ld-linux-x86-64.so.2",
#elif defined(__aarch64__)
	"/lib/ld-linux-aarch64.so.1",
#endif
};

static bool wanted(const struct libcuda_set *set, enum lib_kind kind)
{
	return !(set->skip & (1U << kind));
}

/* Keep fd (of st, found as path) in the set, or close it: 1, 0 (known), -errno. */
static int add_open(struct libcuda_set *set, int fd, const struct stat *st, const char *path,
		    enum lib_kind kind)
{
	struct libcuda *lib;
	size_t i;

	for (i = 0; i < set->n; i++) {
		if (set->libs[i].dev == st->st_dev && set->libs[i].ino == st->st_ino &&
		    set->libs[i].kind == kind) {
			close(fd);
			return 0;
		}
	}
	if (set->n == set->cap) {
		size_t cap = set->cap ? set->cap * 2 : 8;
		struct libcuda *v = realloc(set->libs, cap * sizeof(*v));

		if (!v) {
			close(fd);
			return -ENOMEM;
		}
		set->libs = v;
		set->cap = cap;
	}
	lib = &set->libs[set->n++];
	memset(lib, 0, sizeof(*lib));
	/* A container names its files as it likes. */
	esc__term(path, lib->name, sizeof(lib->name));
	lib->fd = fd;
	lib->kind = kind;
	lib->dev = st->st_dev;
	lib->ino = st->st_ino;
	return 1;
}

/* A path of the operator's or of this host's: any regular file, links followed. */
int libcuda_set__add(struct libcuda_set *set, const char *path, enum lib_kind kind)
{
	struct stat st;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EISDIR;
	}
	return add_open(set, fd, &st, path, kind);
}

const char *libcuda__file(const struct libcuda *lib, char *buf, size_t len)
{
	if (lib->fd < 0)
		return NULL;
	snprintf(buf, len, "/proc/self/fd/%d", lib->fd);
	return buf;
}

void libcuda__close(struct libcuda *lib)
{
	if (lib->fd >= 0)
		close(lib->fd);
	lib->fd = -1;
}

static void add_from_dir(struct libcuda_set *set, const char *dir, enum lib_kind kind)
{
	char path[PATH_MAX];

	if (!wanted(set, kind) || !lib_names[kind])
		return;
	if (snprintf(path, sizeof(path), "%s/%s", dir, lib_names[kind]) >= (int)sizeof(path))
		return;
	if (libcuda_set__add(set, path, kind) > 0)
		vlog("found %s", path);
}

/*
 * Distributions ship libc10 under a versioned name (libc10.so.2.6), with
 * or without the bare name beside it: every libc10.so* in dir.
 */
static void add_c10_from_dir(struct libcuda_set *set, const char *dir)
{
	char path[PATH_MAX];
	struct dirent *e;
	DIR *d;

	if (!wanted(set, LIB_C10) || !(d = opendir(dir)))
		return;
	while ((e = readdir(d))) {
		if (lib_kind__of(e->d_name) != LIB_C10)
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path))
			continue;
		if (libcuda_set__add(set, path, LIB_C10) > 0)
			vlog("found %s", set->libs[set->n - 1].name);
	}
	closedir(d);
}

static void add_from_ld_library_path(struct libcuda_set *set)
{
	const char *env = getenv("LD_LIBRARY_PATH");
	char *copy, *dir, *save = NULL;

	if (!env || !(copy = strdup(env)))
		return;
	for (dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		if (!*dir)
			continue;
		add_from_dir(set, dir, LIB_CUDA);
		add_c10_from_dir(set, dir);
	}
	free(copy);
}

/* "libcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1" */
static void add_from_ld_cache(struct libcuda_set *set)
{
	char line[PATH_MAX + 128];
	int kind;
	FILE *f;

	f = popen("PATH=/sbin:/usr/sbin:/bin:/usr/bin ldconfig -p 2>/dev/null", "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *arrow = strstr(line, " => ");
		char *name = line + strspn(line, " \t");

		if (!arrow)
			continue;
		name[strcspn(name, " \t")] = '\0';
		kind = lib_kind__of(name);
		/* Other architectures' loaders are in the cache too. */
		if (kind < 0 || kind == LIB_LOADER || !wanted(set, kind))
			continue;
		arrow += 4;
		arrow[strcspn(arrow, "\n")] = '\0';
		if (libcuda_set__add(set, arrow, kind) > 0)
			vlog("found %s in the linker cache", arrow);
	}
	pclose(f);
}

void libcuda_set__add_default(struct libcuda_set *set)
{
	size_t i;

	add_from_ld_library_path(set);
	add_from_ld_cache(set);
	for (i = 0; i < sizeof(driver_dirs) / sizeof(driver_dirs[0]); i++)
		add_from_dir(set, driver_dirs[i], LIB_CUDA);
	for (i = 0; i < sizeof(loaders) / sizeof(loaders[0]) && wanted(set, LIB_LOADER); i++)
		if (libcuda_set__add(set, loaders[i], LIB_LOADER) > 0)
			vlog("found %s", loaders[i]);
}

/*
 * libcuda.so, .so.1, .so.580.65.06; libc10.so (and a versioned name), but
 * not libc10_cuda.so: the hook is in libc10 itself; glibc's loader,
 * ld-linux-x86-64.so.2, ld-linux-aarch64.so.1 or ld-2.31.so.
 */
int lib_kind__of(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	if (!strncmp(base, "libcuda.so", 10))
		return LIB_CUDA;
	if (!strncmp(base, "libc10.so", 9) && (!base[9] || base[9] == '.'))
		return LIB_C10;
	if (!strncmp(base, "ld-linux", 8) || (!strncmp(base, "ld-2.", 5) && strstr(base, ".so")))
		return LIB_LOADER;
	return -1;
}

/*
 * The file a maps line names, opened. Containers see their own files: the
 * path inside /proc/PID/root, never following a symlink there (the path
 * the kernel wrote has none; one planted since could lead to a host
 * file). A chroot under this root is shown from here (the kernel writes
 * the path as the reader sees it): the path in our root, the same way.
 * The one whose inode is the line's, when the line could give one.
 * Never a file on FUSE (proc__path_on_fuse).
 */
static int mapped_open(const char *pid, const char *file, unsigned long ino, struct stat *st,
		       char *found, size_t len)
{
	pid_t pids[2] = { (pid_t)atoi(pid), getpid() };
	char roots[2][PATH_MAX];
	int i, fd;

	snprintf(roots[0], sizeof(roots[0]), "/proc/%s/root", pid);
	snprintf(roots[1], sizeof(roots[1]), "/");
	for (i = 0; i < 2; i++) {
		if (proc__path_on_fuse(pids[i], file))
			continue;	/* a process serves it: it may never answer */
		fd = file__open_below(roots[i], file, st);
		if (fd >= 0 && (!ino || st->st_ino == ino)) {
			snprintf(found, len, "%s%s", i ? "" : roots[0], file);
			return fd;
		}
		if (fd >= 0)
			close(fd);
	}
	return -ENOENT;
}

/* " (deleted)" at the end of a maps path: cut, and said. */
static bool strip_deleted(char *file)
{
	static const char tag[] = " (deleted)";
	size_t len = strlen(file), tl = sizeof(tag) - 1;

	if (len <= tl || strcmp(file + len - tl, tag))
		return false;
	file[len - tl] = '\0';
	return true;
}

/*
 * A library replaced on disk while the process runs (a driver upgrade,
 * `pip install -U torch`): maps says "(deleted)" and no path leads to
 * the inode it runs. /proc/PID/map_files/ does (root: CAP_SYS_ADMIN),
 * and a uprobe on that inode is one on the code the process runs.
 */
static int deleted_open(const char *pid, const struct maps_ent *e, const char *file,
			struct stat *st, char *found, size_t len)
{
	char path[96];
	int fd;

	if (proc__path_on_fuse((pid_t)atoi(pid), file))
		return -ENOENT;	/* a process serves it: it may never answer */
	snprintf(path, sizeof(path), "/proc/%s/map_files/%llx-%llx", pid,
		 (unsigned long long)e->lo, (unsigned long long)e->hi);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, st) || !S_ISREG(st->st_mode) || st->st_ino != e->ino) {
		close(fd);
		return -ENOENT;
	}
	snprintf(found, len, "%s (deleted, run by pid %s)", file, pid);
	return fd;
}

static int scan_maps(struct libcuda_set *set, const char *pid)
{
	char path[64], line[PATH_MAX + 256], lib[PATH_MAX + 64], real[PATH_MAX + 256];
	int added = 0, kind, fd;
	struct maps_ent e;
	unsigned long ino;
	bool deleted;
	struct stat st;
	char *file;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%s/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (!proc__maps_parse(line, &e) || *e.path != '/')
			continue;
		file = line + (e.path - line);
		file[e.path_len] = '\0';
		if (!(strstr(file, "libcuda.so") || strstr(file, "libc10.so") || strstr(file, "/ld-")))
			continue;
		deleted = strip_deleted(file);
		kind = lib_kind__of(file);
		if (kind < 0 || !wanted(set, kind))
			continue;
		ino = e.ino;
		fd = -ENOENT;
		if (deleted)
			fd = deleted_open(pid, &e, file, &st, lib, sizeof(lib));
		else if (proc__maps_path(file, real, sizeof(real)))
			fd = mapped_open(pid, real, ino, &st, lib, sizeof(lib));
		if (fd < 0 && !deleted)
			fd = mapped_open(pid, file, ino, &st, lib, sizeof(lib));
		if (fd < 0)
			continue;
		if (add_open(set, fd, &st, lib, kind) > 0) {
			vlog("found %s mapped by pid %s", set->libs[set->n - 1].name, pid);
			added++;
		}
	}
	fclose(f);
	return added;
}

int libcuda_set__scan_pid(struct libcuda_set *set, pid_t pid)
{
	char name[16];

	snprintf(name, sizeof(name), "%d", (int)pid);
	return scan_maps(set, name);
}

struct scan_count {
	struct libcuda_set *set;
	int added;
};

static int scan_one(pid_t pid, void *arg)
{
	struct scan_count *c = arg;
	int n = libcuda_set__scan_pid(c->set, pid);

	c->added += n > 0 ? n : 0;
	return 0;
}

int libcuda_set__scan_proc(struct libcuda_set *set)
{
	struct scan_count c = { .set = set };

	proc__each_pid(scan_one, &c);
	return c.added;
}

size_t libcuda_set__count(const struct libcuda_set *set, enum lib_kind kind)
{
	size_t i, n = 0;

	for (i = 0; i < set->n; i++)
		n += set->libs[i].kind == kind;
	return n;
}

void libcuda_set__free(struct libcuda_set *set)
{
	size_t i;

	for (i = 0; i < set->n; i++)
		libcuda__close(&set->libs[i]);
	free(set->libs);
	memset(set, 0, sizeof(*set));
}
