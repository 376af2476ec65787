// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
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

/*
 * Each CPU's pageset says "count:" and "high:" (the zone's watermarks
 * above them have no colon). high is where the list stops refilling now;
 * since Linux 6.7 it is tuned at run time, up to high_max.
 */
int meminfo__parse_pcp(const char *text, uint64_t page_size, struct pcp_info *p)
{
	unsigned long long v;
	const char *line;
	bool seen = false;

	memset(p, 0, sizeof(*p));
	for (line = text; line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		while (*line == ' ')
			line++;
		if (sscanf(line, "count: %llu", &v) == 1) {
			p->count += v * page_size;
			seen = true;
		} else if (sscanf(line, "high: %llu", &v) == 1) {
			p->high += v * page_size;
		}
	}
	return seen ? 0 : -EINVAL;
}

int meminfo__read_pcp(struct pcp_info *p)
{
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap), *nb;
	ssize_t n;
	int fd, err;

	if (!buf)
		return -ENOMEM;
	fd = open("/proc/zoneinfo", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		free(buf);
		return -errno;
	}
	/* Grows with the CPUs: a pageset per CPU per zone. */
	while ((n = read(fd, buf + len, cap - len - 1)) > 0) {
		len += (size_t)n;
		if (cap - len > 1)
			continue;
		nb = realloc(buf, cap * 2);
		if (!nb) {
			n = -1;
			errno = ENOMEM;
			break;
		}
		buf = nb;
		cap *= 2;
	}
	close(fd);
	buf[len] = '\0';
	err = n < 0 ? -errno : meminfo__parse_pcp(buf, (uint64_t)sysconf(_SC_PAGESIZE), p);
	free(buf);
	return err;
}
