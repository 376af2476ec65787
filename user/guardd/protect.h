/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Who the guard never stops, whatever the scope: pid 1, kernel threads,
 * its own processes (by pid), and what the built-ins and --protect name.
 * On a shared host a process's name is the one thing every user chooses
 * (prctl PR_SET_NAME, or the name of a copied binary), so nothing here
 * protects by name alone:
 *
 *   exe:PATH     is root's and runs PATH (the same file: device and inode),
 *                which must be root's, in directories that are root's,
 *                none writable by group or others
 *   cgroup:PATH  is in that cgroup v2 or below
 *   uid:N        its real uid is N (or uid:USER, from the host's passwd)
 *   NAME         is root's, named NAME, and runs a file of that name (15
 *                bytes, as comm keeps them) that is root's and not
 *                writable by group or others
 *
 * An executable or a name protects root's processes only: any user may
 * run root's binaries, with code of their own in them (LD_PRELOAD), but
 * no user can take on a uid. The built-ins are sshd's and
 * systemd-journald's executables, umtrace's own (an operator's `umtrace
 * resume` or another guard), and sshd's privilege-separation user.
 *
 * The same rules are decided twice: here, from /proc, for the sampled
 * rule's victims (protect__match), and in the kernel side, from the task
 * (bpf/guard.bpf.c, guard_protected_id), whose maps protect__to_kernel
 * fills.
 */
#ifndef UMTRACE_GUARD_PROTECT_H
#define UMTRACE_GUARD_PROTECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/types.h>
#include "umtrace.h"

enum protect_kind {
	PROTECT_NAME = UMT_PROTECT_NAME,
	PROTECT_EXE = UMT_PROTECT_EXE,
	PROTECT_UID = UMT_PROTECT_UID,
	PROTECT_CGROUP,
};

/* --protect entries besides the built-ins. */
#define PROTECT_MAX 64

struct protect_entry {
	enum protect_kind kind;
	char *arg;		/* NAME (cut to 15 bytes), exe's PATH, cgroup's "a/b",
				 * uid's USER (NULL: given as a number) */
	uint32_t uid;
	bool builtin;		/* skipped where absent or untrusted */
	bool self;		/* exe: umtrace's own file, whatever its path */
	/* Resolved (protect__resolve): what the file or cgroup is now. */
	bool found;
	dev_t dev;		/* exe: as stat(2) gives it, for protect__match */
	ino_t ino;
	uint64_t kdev;		/* exe: the kernel's sb->s_dev, for the kernel side */
	uint64_t cgroup_id;	/* cgroup */
	uint32_t level;		/* cgroup: its depth below the root */
};

struct protect_set {
	struct protect_entry *v;
	size_t n;
	/*
	 * Resolve executables and users from here (/proc/1/root: the host's,
	 * where a container runs the guard); NULL: "/".
	 */
	const char *root;
};

void protect__init(struct protect_set *ps);
void protect__free(struct protect_set *ps);
/*
 * Add a comma-separated list of entries (name: the setting, for messages).
 * 0, or -EINVAL/-ENOMEM with a one-line message; the set is unchanged then.
 */
int protect__add(struct protect_set *ps, const char *list, const char *name, char *err,
		 size_t errlen);
/* The built-in entries, first. 0 or -ENOMEM. */
int protect__add_builtins(struct protect_set *ps);

/*
 * Find what each entry names now. An operator's exe: or cgroup: that is
 * missing, or an exe: that a user could write (the file or a directory
 * above it), is an error at start (strict): -ENOENT/-EPERM with a one-line
 * message; afterwards (not strict) it is only no longer matched. Built-ins
 * are skipped quietly. Returns how many entries changed (found, lost, or
 * another file or cgroup now), or -errno.
 */
int protect__resolve(struct protect_set *ps, bool strict, char *err, size_t errlen);

/* Who a process is, as protection asks it (protect__read from /proc). */
struct proc_id {
	pid_t pid;
	char comm[TASK_COMM_LEN];
	bool kthread;
	bool have_uid;
	uint32_t uid;		/* real */
	bool have_exe;		/* its executable could be looked at */
	dev_t dev;
	ino_t ino;
	uint32_t exe_uid;
	uint32_t exe_mode;
	char exe_name[256];	/* the file's own name */
	char cgroup[512];	/* "/a/b", "" unknown */
};

/* Read it from /proc. 0, or -errno (-ENOENT: gone). */
int protect__read(pid_t pid, struct proc_id *id);
/* The process is protected (pid 1, kthreads and self_pid included). */
bool protect__match(const struct protect_set *ps, const struct proc_id *id, pid_t self_pid);

/* "exe:/usr/sbin/sshd", "uid:0", "sshd"... for messages and status. */
const char *protect__describe(const struct protect_entry *e, char *buf, size_t len);

struct probes;
/*
 * Make the kernel side's guard_protect map and cgroup list what the set
 * resolved to: the new entries are in before the stale ones go, so a
 * protected process is never left out meanwhile. 0 or -errno.
 */
int protect__to_kernel(const struct protect_set *ps, struct probes *p);

#endif /* UMTRACE_GUARD_PROTECT_H */
