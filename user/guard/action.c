// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include "guard/action.h"
#include "lib/procfs.h"

#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

int guard_act__parse(const char *s, enum guard_act *out)
{
	if (!strcmp(s, "stop"))
		*out = GUARD_ACT_STOP;
	else if (!strcmp(s, "freeze"))
		*out = GUARD_ACT_FREEZE;
	else
		return -EINVAL;
	return 0;
}

const char *guard_act__name(enum guard_act a)
{
	return a == GUARD_ACT_FREEZE ? "freeze" : "stop";
}

int guard_act__signal(int pidfd, pid_t pid, int sig)
{
	long ret;

	if (pidfd >= 0)
		ret = syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
	else
		ret = kill(pid, sig);
	return ret ? -errno : 0;
}

static int cgroup_file(const char *cg, const char *name, char *buf, size_t len)
{
	const char *root = cgroup2__root();
	int n;

	if (!root)
		return -ENOENT;
	n = snprintf(buf, len, "%s%s/%s", root, cg, name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

bool cgroup__frozen(const char *cg)
{
	char path[4200], line[256];
	bool frozen = false;
	FILE *f;

	if (cgroup_file(cg, "cgroup.events", path, sizeof(path)))
		return false;
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (!strcmp(line, "frozen 1\n"))
			frozen = true;
	fclose(f);
	return frozen;
}

/* cg is cgroup mine or one of its ancestors. */
static bool holds_self(const char *cg)
{
	char mine[4096];
	size_t n = strlen(cg);

	if (proc__cgroup(getpid(), mine, sizeof(mine)))
		return true;	/* unknown: refuse */
	if (!strcmp(cg, "/"))
		return true;
	return !strncmp(mine, cg, n) && (mine[n] == '/' || mine[n] == '\0');
}

int cgroup__set_frozen(const char *cg, bool frozen)
{
	char path[4200];
	int fd, err = 0;

	if (frozen && holds_self(cg))
		return -EDEADLK;
	err = cgroup_file(cg, "cgroup.freeze", path, sizeof(path));
	if (err)
		return err;
	fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (write(fd, frozen ? "1" : "0", 1) != 1)
		err = -errno;
	close(fd);
	return err;
}
