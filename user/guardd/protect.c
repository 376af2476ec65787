// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Who the guard never stops (protect.h): the list, parsed once; what each
 * entry is on this host now, found again as files and cgroups change;
 * the same decision from /proc as the kernel side makes from the task;
 * and the kernel side's maps, kept equal to the list.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "attach/probes.h"
#include "guardd/protect.h"
#include "guardd/scope.h"
#include "lib/parse.h"
#include "lib/out_file.h"
#include "lib/procfs.h"
#include "lib/units.h"
#include "umtrace.skel.h"

/* The kernel keeps TASK_COMM_LEN - 1 characters of a process name. */
#define COMM_MAX (TASK_COMM_LEN - 1)
/* include/linux/sched.h */
#define PF_KTHREAD 0x00200000U

/*
 * The way in (sshd: the listener, and its per-connection processes of
 * OpenSSH 9.8 on) and the way an operator reads what happened (the
 * journal), wherever distributions install them; root's processes only,
 * as for every executable. sshd's pre-authentication child runs as its
 * privilege-separation user (builtin_users).
 */
static const char *const builtin_exes[] = {
	"/usr/sbin/sshd",
	"/usr/bin/sshd",
	"/usr/lib/openssh/sshd-session",
	"/usr/lib/openssh/sshd-auth",
	"/usr/libexec/openssh/sshd-session",
	"/usr/libexec/openssh/sshd-auth",
	"/usr/lib/systemd/systemd-journald",
	"/lib/systemd/systemd-journald",
};

static const char *const builtin_users[] = { "sshd" };

void protect__init(struct protect_set *ps)
{
	memset(ps, 0, sizeof(*ps));
}

void protect__free(struct protect_set *ps)
{
	size_t i;

	for (i = 0; i < ps->n; i++)
		free(ps->v[i].arg);
	free(ps->v);
	protect__init(ps);
}

static bool same_entry(const struct protect_entry *a, const struct protect_entry *b)
{
	if (a->kind != b->kind || !a->arg != !b->arg)
		return false;
	if (!a->arg)
		return a->uid == b->uid;	/* uid:N */
	return !strcmp(a->arg, b->arg);
}

static int push(struct protect_set *ps, const struct protect_entry *e)
{
	struct protect_entry *v;
	size_t i;

	for (i = 0; i < ps->n; i++)
		if (same_entry(&ps->v[i], e))
			return 0;
	v = realloc(ps->v, (ps->n + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	ps->v = v;
	ps->v[ps->n++] = *e;
	return 1;
}

static int parse_name(struct protect_entry *e, const char *tok, const char *name,
		      const char *list, char *err, size_t errlen)
{
	/* Matched with its executable's file name, which has no '/'. */
	if (strchr(tok, '/')) {
		errbuf__set(err, errlen, "invalid %s '%s': '%s' is no process name (for a path, exe:%s)",
			    name, list, tok, tok);
		return -EINVAL;
	}
	e->kind = PROTECT_NAME;
	e->arg = strndup(tok, COMM_MAX);
	return e->arg ? 0 : -ENOMEM;
}

static int parse_one(struct protect_entry *e, const char *tok, const char *name,
		     const char *list, char *err, size_t errlen)
{
	long uid;

	memset(e, 0, sizeof(*e));
	if (!*tok) {
		errbuf__set(err, errlen, "invalid %s '%s': an empty entry", name, list);
		return -EINVAL;
	}
	if (!strncmp(tok, "exe:", 4)) {
		if (tok[4] != '/') {
			errbuf__set(err, errlen, "invalid %s '%s': exe: needs an absolute path",
				    name, list);
			return -EINVAL;
		}
		e->kind = PROTECT_EXE;
		e->arg = strdup(tok + 4);
		return e->arg ? 0 : -ENOMEM;
	}
	if (!strncmp(tok, "cgroup:", 7)) {
		e->kind = PROTECT_CGROUP;
		if (guard_cgroup__parse(tok + 7, &e->arg, name, list, err, errlen))
			return -EINVAL;
		if (!*e->arg) {
			errbuf__set(err, errlen, "invalid %s '%s': the root cgroup holds every process",
				    name, list);
			free(e->arg);
			e->arg = NULL;
			return -EINVAL;
		}
		return 0;
	}
	if (!strncmp(tok, "uid:", 4)) {
		e->kind = PROTECT_UID;
		if (!parse_long(tok + 4, 0, (long)UINT32_MAX - 1, &uid)) {
			e->uid = (uint32_t)uid;
			return 0;
		}
		/* A user's name: looked up in the host's passwd when resolved. */
		if (!tok[4] || isdigit((unsigned char)tok[4]) || tok[4] == '-' ||
		    strpbrk(tok + 4, ":/ ")) {
			errbuf__set(err, errlen, "invalid %s '%s': '%s' is not a uid or a user",
				    name, list, tok + 4);
			return -EINVAL;
		}
		e->arg = strdup(tok + 4);
		return e->arg ? 0 : -ENOMEM;
	}
	return parse_name(e, tok, name, list, err, errlen);
}

/* Entries of the operator's, of kind (or of any kind: 0). */
static size_t n_operator(const struct protect_set *ps, enum protect_kind kind)
{
	size_t i, n = 0;

	for (i = 0; i < ps->n; i++)
		n += !ps->v[i].builtin && (!kind || ps->v[i].kind == kind);
	return n;
}

int protect__add(struct protect_set *ps, const char *list, const char *name, char *err,
		 size_t errlen)
{
	char *copy = strdup(list), *p, *comma;
	size_t first = ps->n;
	struct protect_entry e;
	int ret = -ENOMEM;

	if (!copy)
		goto nomem;
	for (p = copy; p; p = comma ? comma + 1 : NULL) {
		comma = strchr(p, ',');
		if (comma)
			*comma = '\0';
		ret = parse_one(&e, str__trim(p), name, list, err, errlen);
		if (ret)
			goto fail;
		if (n_operator(ps, 0) >= PROTECT_MAX ||
		    (e.kind == PROTECT_CGROUP &&
		     n_operator(ps, PROTECT_CGROUP) >= UMT_GUARD_MAX_PROTECT_CGROUPS)) {
			free(e.arg);
			errbuf__set(err, errlen, "invalid %s '%s': at most %d entries, %d of them cgroups",
				    name, list, PROTECT_MAX, UMT_GUARD_MAX_PROTECT_CGROUPS);
			ret = -EINVAL;
			goto fail;
		}
		ret = push(ps, &e);
		if (ret <= 0)
			free(e.arg);
		if (ret < 0)
			goto fail;
	}
	free(copy);
	return 0;
fail:
	/* All or nothing: the set is as it was. */
	while (ps->n > first)
		free(ps->v[--ps->n].arg);
	free(copy);
	if (ret != -ENOMEM)
		return ret;
nomem:
	errbuf__set(err, errlen, "%s: out of memory", name);
	return -ENOMEM;
}

static int add_builtin(struct protect_set *ps, enum protect_kind kind, const char *arg)
{
	struct protect_entry e = { .kind = kind, .builtin = true };

	e.arg = strdup(arg);
	if (!e.arg || push(ps, &e) < 0) {
		free(e.arg);
		return -ENOMEM;
	}
	return 0;
}

/* umtrace's own file, run by root: the operator's resume, status, trace. */
static int add_self(struct protect_set *ps)
{
	struct protect_entry e = { .kind = PROTECT_EXE, .builtin = true, .self = true };
	char path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);

	path[n > 0 ? n : 0] = '\0';
	e.arg = strdup(n > 0 ? path : "/proc/self/exe");
	if (!e.arg || push(ps, &e) < 0) {
		free(e.arg);
		return -ENOMEM;
	}
	return 0;
}

int protect__add_builtins(struct protect_set *ps)
{
	size_t i;

	if (add_self(ps))
		return -ENOMEM;
	for (i = 0; i < sizeof(builtin_exes) / sizeof(builtin_exes[0]); i++)
		if (add_builtin(ps, PROTECT_EXE, builtin_exes[i]))
			return -ENOMEM;
	for (i = 0; i < sizeof(builtin_users) / sizeof(builtin_users[0]); i++)
		if (add_builtin(ps, PROTECT_UID, builtin_users[i]))
			return -ENOMEM;
	return 0;
}

/* --- finding an executable, and trusting it --- */

/*
 * The kernel's dev_t of the filesystem fd is on (sb->s_dev): the mount's
 * in mountinfo. stat(2)'s st_dev is not it everywhere (btrfs gives a
 * subvolume's own number), which is why the kernel side is told this.
 */
static uint64_t kernel_dev(int fd, const struct stat *st, const char *mountinfo)
{
	unsigned int maj = major(st->st_dev), min = minor(st->st_dev), a, b;
	char line[4096];
	struct statx stx;
	uint64_t id;
	FILE *f;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) || !(stx.stx_mask & STATX_MNT_ID))
		goto out;
	f = fopen(mountinfo, "re");
	if (!f)
		goto out;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%" SCNu64 " %*s %u:%u", &id, &a, &b) == 3 && id == stx.stx_mnt_id) {
			maj = a;
			min = b;
			break;
		}
	}
	fclose(f);
out:
	return (uint64_t)maj << 20 | min;
}

/*
 * The root to resolve in: ps->root, or ours where that cannot be
 * entered (a pid 1 that no one may look into). *mountinfo names the
 * mount table of that root's namespace.
 */
static int open_root(const struct protect_set *ps, const char **mountinfo)
{
	int fd = -1;

	*mountinfo = "/proc/self/mountinfo";
	if (ps->root) {
		fd = open(ps->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
		/* O_PATH opens what it cannot read: try to look inside. */
		if (fd >= 0 && faccessat(fd, ".", X_OK, AT_EACCESS)) {
			close(fd);
			fd = -1;
		}
		if (fd >= 0 && !strncmp(ps->root, "/proc/1/", 8))
			*mountinfo = "/proc/1/mountinfo";
	}
	if (fd < 0)
		fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* The trusted file path below the root (open_trusted), O_PATH. */
static int open_in_root(const struct protect_set *ps, const char *path, const char **mountinfo,
			char *why, size_t len)
{
	int rfd = open_root(ps, mountinfo), fd;

	if (rfd < 0) {
		snprintf(why, len, "/: %s", strerror(-rfd));
		return rfd;
	}
	fd = file__open_trusted(rfd, path, why, len);
	close(rfd);
	return fd;
}

/* 1 when found (and what it is changed), 0 when not found, -errno. */
static int resolve_exe(struct protect_set *ps, struct protect_entry *e, char *why, size_t len)
{
	const char *mountinfo = "/proc/self/mountinfo";
	struct stat st;
	int fd;

	/* The file this runs from is trusted as the guard itself is. */
	if (e->self) {
		fd = open("/proc/self/exe", O_PATH | O_CLOEXEC);
		if (fd < 0)
			fd = -errno;
	} else {
		fd = open_in_root(ps, e->arg, &mountinfo, why, len);
	}
	if (fd < 0)
		return fd;
	if (fstat(fd, &st)) {
		close(fd);
		return -errno;
	}
	/* The same file as before is on the same filesystem as before. */
	if (!e->found || e->dev != st.st_dev || e->ino != st.st_ino)
		e->kdev = kernel_dev(fd, &st, mountinfo);
	e->dev = st.st_dev;
	e->ino = st.st_ino;
	close(fd);
	return 1;
}

/* The id the kernel gives a cgroup (kernfs's node id), by its path. */
static int resolve_cgroup(struct protect_entry *e, char *why, size_t len)
{
	const char *mnt = cgroup2__root();
	struct {
		struct file_handle fh;
		uint64_t id;
	} h = { .fh.handle_bytes = sizeof(uint64_t) };
	char path[PATH_MAX];
	const char *p;
	int mount_id;

	if (!mnt) {
		snprintf(why, len, "cgroup v2 is not mounted");
		return -ENOENT;
	}
	snprintf(path, sizeof(path), "%s/%s", mnt, e->arg);
	if (name_to_handle_at(AT_FDCWD, path, &h.fh, &mount_id, 0)) {
		snprintf(why, len, "%s: %s", path, strerror(errno));
		return -errno;
	}
	memcpy(&e->cgroup_id, h.fh.f_handle, sizeof(e->cgroup_id));
	e->level = 1;
	for (p = e->arg; *p; p++)
		e->level += *p == '/';
	return 1;
}

/*
 * A user's uid from the host's passwd (ps->root's /etc/passwd), where a
 * container's own names mean nothing: read as a file, not through NSS.
 */
static int resolve_user(struct protect_set *ps, struct protect_entry *e, char *why, size_t len)
{
	char path[32], line[1024], *name, *uid, *save;
	const char *mountinfo;
	unsigned long v;
	int ret = 0, fd;
	FILE *f;

	/* Only root may have written who a uid is. */
	fd = open_in_root(ps, "/etc/passwd", &mountinfo, why, len);
	if (fd < 0)
		return fd;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	f = fopen(path, "re");
	close(fd);
	if (!f) {
		snprintf(why, len, "/etc/passwd: %s", strerror(errno));
		return -errno;
	}
	while (!ret && fgets(line, sizeof(line), f)) {
		name = strtok_r(line, ":", &save);
		if (!name || strcmp(name, e->arg) || !strtok_r(NULL, ":", &save))
			continue;
		uid = strtok_r(NULL, ":", &save);
		if (uid && sscanf(uid, "%lu", &v) == 1 && v < UINT32_MAX) {
			e->uid = (uint32_t)v;
			ret = 1;
		}
	}
	fclose(f);
	if (!ret)
		snprintf(why, len, "no user %s in /etc/passwd", e->arg);
	return ret ? 1 : -ENOENT;
}

static int resolve_one(struct protect_set *ps, struct protect_entry *e, char *why, size_t len)
{
	switch (e->kind) {
	case PROTECT_EXE:
		return resolve_exe(ps, e, why, len);
	case PROTECT_CGROUP:
		return resolve_cgroup(e, why, len);
	case PROTECT_UID:
		return e->arg ? resolve_user(ps, e, why, len) : 1;
	default:
		return 1;	/* names are what they say */
	}
}

int protect__resolve(struct protect_set *ps, bool strict, char *err, size_t errlen)
{
	char why[PATH_MAX + 128], desc[PATH_MAX + 16];
	struct protect_entry was;
	int changed = 0, ret;
	size_t i;

	for (i = 0; i < ps->n; i++) {
		struct protect_entry *e = &ps->v[i];

		was = *e;
		why[0] = '\0';
		ret = resolve_one(ps, e, why, sizeof(why));
		if (ret < 0 && strict && !e->builtin) {
			errbuf__set(err, errlen, "protect %s: %s",
				    protect__describe(e, desc, sizeof(desc)), why);
			return ret;
		}
		e->found = ret > 0;
		changed += was.found != e->found ||
			   (e->found && (was.kdev != e->kdev || was.ino != e->ino ||
					 was.dev != e->dev || was.cgroup_id != e->cgroup_id ||
					 was.uid != e->uid));
	}
	return changed;
}

/* --- the same decision from /proc --- */

/* The real uid: the first of Uid's four. */
static bool read_status_uid(pid_t pid, uint32_t *uid)
{
	char buf[64], *end;
	unsigned long v;

	if (proc__status(pid, "Uid", buf, sizeof(buf)))
		return false;
	v = strtoul(buf, &end, 10);
	if (end == buf)
		return false;
	*uid = (uint32_t)v;
	return true;
}

/* Field 9 of /proc/PID/stat, after the name in parentheses. */
static bool read_kthread(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long flags;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %lu", &flags) != 1)
		return false;
	return flags & PF_KTHREAD;
}

static void read_exe(pid_t pid, struct proc_id *id)
{
	static const char deleted[] = " (deleted)";
	char path[64], target[PATH_MAX], *base;
	struct stat st;
	ssize_t n;
	size_t len;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	if (stat(path, &st))
		return;
	n = readlink(path, target, sizeof(target) - 1);
	if (n <= 0)
		return;
	target[n] = '\0';
	len = (size_t)n;
	if (len > sizeof(deleted) - 1 && !strcmp(target + len - (sizeof(deleted) - 1), deleted))
		target[len - (sizeof(deleted) - 1)] = '\0';
	base = strrchr(target, '/');
	/* A file name has at most NAME_MAX (255) bytes. */
	snprintf(id->exe_name, sizeof(id->exe_name), "%.255s", base ? base + 1 : target);
	id->dev = st.st_dev;
	id->ino = st.st_ino;
	id->exe_uid = st.st_uid;
	id->exe_mode = st.st_mode;
	id->have_exe = true;
}

int protect__read(pid_t pid, struct proc_id *id)
{
	memset(id, 0, sizeof(*id));
	id->pid = pid;
	if (!proc__comm(pid, id->comm, sizeof(id->comm)))
		return -ENOENT;
	id->kthread = read_kthread(pid);
	id->have_uid = read_status_uid(pid, &id->uid);
	read_exe(pid, id);
	if (proc__cgroup(pid, id->cgroup, sizeof(id->cgroup)))
		id->cgroup[0] = '\0';
	return 0;
}

/* Equal as the kernel would see them: both cut to COMM_MAX characters. */
static bool comm_eq(const char *a, const char *b)
{
	size_t la = strnlen(a, COMM_MAX), lb = strnlen(b, COMM_MAX);

	return la == lb && !memcmp(a, b, la);
}

static bool match_one(const struct protect_entry *e, const struct proc_id *id)
{
	bool by_root = id->have_uid && id->uid == 0;

	if (!e->found)
		return false;
	switch (e->kind) {
	case PROTECT_UID:
		return id->have_uid && id->uid == e->uid;
	case PROTECT_CGROUP:
		return id->cgroup[0] && guard_cgroup__holds(e->arg, id->cgroup);
	case PROTECT_EXE:
		return by_root && id->have_exe && id->dev == e->dev && id->ino == e->ino;
	case PROTECT_NAME:
		return by_root && id->have_exe && comm_eq(id->comm, e->arg) &&
		       comm_eq(id->exe_name, e->arg) && id->exe_uid == 0 &&
		       !(id->exe_mode & (S_IWGRP | S_IWOTH));
	}
	return false;
}

bool protect__match(const struct protect_set *ps, const struct proc_id *id, pid_t self_pid)
{
	size_t i;

	if (id->pid <= 1 || id->kthread || (self_pid && id->pid == self_pid))
		return true;
	for (i = 0; ps && i < ps->n; i++)
		if (match_one(&ps->v[i], id))
			return true;
	return false;
}

const char *protect__describe(const struct protect_entry *e, char *buf, size_t len)
{
	switch (e->kind) {
	case PROTECT_UID:
		if (e->arg)
			snprintf(buf, len, "uid:%s", e->arg);
		else
			snprintf(buf, len, "uid:%u", e->uid);
		break;
	case PROTECT_EXE:
		snprintf(buf, len, "exe:%s", e->arg);
		break;
	case PROTECT_CGROUP:
		snprintf(buf, len, "cgroup:%s", e->arg);
		break;
	default:
		snprintf(buf, len, "%s", e->arg);
	}
	return buf;
}

/* --- the kernel side --- */

/* The map's key for e; false for what the map does not hold (cgroups). */
static bool kernel_key(const struct protect_entry *e, struct umt_protect_key *k)
{
	memset(k, 0, sizeof(*k));
	k->kind = e->kind;
	switch (e->kind) {
	case PROTECT_UID:
		k->uid = e->uid;
		return true;
	case PROTECT_EXE:
		k->dev = e->kdev;
		k->ino = e->ino;
		return true;
	case PROTECT_NAME:
		strncpy(k->comm, e->arg, COMM_MAX);
		return true;
	default:
		return false;
	}
}

static bool wanted(const struct protect_set *ps, const struct umt_protect_key *k)
{
	struct umt_protect_key mine;
	size_t i;

	for (i = 0; i < ps->n; i++)
		if (ps->v[i].found && kernel_key(&ps->v[i], &mine) && !memcmp(&mine, k, sizeof(mine)))
			return true;
	return false;
}

static int put_keys(const struct protect_set *ps, int fd)
{
	struct umt_protect_key k;
	uint8_t present = 1;
	size_t i;

	for (i = 0; i < ps->n; i++) {
		if (!ps->v[i].found || !kernel_key(&ps->v[i], &k))
			continue;
		if (bpf_map_update_elem(fd, &k, &present, BPF_ANY))
			return -errno;
	}
	return 0;
}

static int drop_stale_keys(const struct protect_set *ps, int fd)
{
	struct umt_protect_key k, next, *prev = NULL;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		k = next;
		if (!wanted(ps, &k)) {
			if (bpf_map_delete_elem(fd, &k))
				return -errno;
			/* Deleted: start over rather than from a key gone. */
			prev = NULL;
			continue;
		}
		prev = &k;
	}
	return 0;
}

static void put_cgroups(const struct protect_set *ps, struct probes *p)
{
	struct umt_protect_cgroup *c = p->skel->bss->guard_state.protect_cgroups;
	uint32_t n = 0;
	size_t i;

	for (i = 0; i < ps->n && n < UMT_GUARD_MAX_PROTECT_CGROUPS; i++) {
		if (ps->v[i].kind != PROTECT_CGROUP || !ps->v[i].found)
			continue;
		c[n].id = ps->v[i].cgroup_id;
		c[n].level = ps->v[i].level;
		n++;
	}
	/* A list that shrinks: the count first, so no stale slot is read. */
	if (n < p->skel->bss->guard_state.n_protect_cgroups)
		__atomic_store_n(&p->skel->bss->guard_state.n_protect_cgroups, n, __ATOMIC_RELEASE);
	for (i = n; i < UMT_GUARD_MAX_PROTECT_CGROUPS; i++)
		c[i].id = 0;
	__atomic_store_n(&p->skel->bss->guard_state.n_protect_cgroups, n, __ATOMIC_RELEASE);
}

int protect__to_kernel(const struct protect_set *ps, struct probes *p)
{
	int fd = bpf_map__fd(p->skel->maps.guard_protect), err;

	err = put_keys(ps, fd);
	if (!err)
		err = drop_stale_keys(ps, fd);
	put_cgroups(ps, p);
	return err;
}
