// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "meminfo.h"

/* "MemAvailable:   12345678 kB" */
static int field_kb(const char *text, const char *name, uint64_t *bytes)
{
	const char *p = text;
	size_t len = strlen(name);
	unsigned long long kb;
	char *end;

	while ((p = strstr(p, name))) {
		if ((p == text || p[-1] == '\n') && p[len] == ':') {
			kb = strtoull(p + len + 1, &end, 10);
			if (end == p + len + 1)
				return -EINVAL;
			*bytes = (uint64_t)kb * 1024;
			return 0;
		}
		p += len;
	}
	return -EINVAL;
}

int meminfo__parse(const char *text, struct meminfo *m)
{
	if (field_kb(text, "MemTotal", &m->total) ||
	    field_kb(text, "MemFree", &m->free) ||
	    field_kb(text, "MemAvailable", &m->available))
		return -EINVAL;
	return 0;
}

int meminfo__read(struct meminfo *m)
{
	char buf[8192];
	ssize_t n;
	int fd;

	fd = open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -EINVAL;
	buf[n] = '\0';
	return meminfo__parse(buf, m);
}
