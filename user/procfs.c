// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "procfs.h"

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
	char path[64], buf[512], *p, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	/* The comm may hold spaces and parentheses: the state follows the last ')'. */
	if (fgets(buf, sizeof(buf), f)) {
		p = strrchr(buf, ')');
		if (p && p[1] == ' ')
			st = p[2];
	}
	fclose(f);
	return st;
}

bool proc__comm(pid_t pid, char *buf, size_t len)
{
	char path[64];
	FILE *f;
	bool ok;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	if (ok)
		buf[strcspn(buf, "\n")] = '\0';
	return ok;
}
