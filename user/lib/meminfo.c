// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "lib/sys.h"
#include "lib/meminfo.h"
#include "lib/numa.h"
#include "lib/procfs.h"

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

/* A field some kernels or recordings lack: 0 then. */
static uint64_t optional_kb(const char *text, const char *name)
{
	uint64_t v;

	return field_kb(text, name, &v) ? 0 : v;
}

int meminfo__parse(const char *text, struct meminfo *m)
{
	if (field_kb(text, "MemTotal", &m->total) ||
	    field_kb(text, "MemFree", &m->free) ||
	    field_kb(text, "MemAvailable", &m->available))
		return -EINVAL;
	m->file = optional_kb(text, "Active(file)") + optional_kb(text, "Inactive(file)");
	m->kreclaim = optional_kb(text, "KReclaimable");
	return 0;
}

static int read_small(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -EINVAL;
	buf[n] = '\0';
	return 0;
}

int meminfo__read(struct meminfo *m)
{
	char buf[8192];
	int err = read_small("/proc/meminfo", buf, sizeof(buf));

	return err ? err : meminfo__parse(buf, m);
}

static bool node_has(const struct numa_nodes *nodes, unsigned int n)
{
	return nodes && numa__has(nodes->device, n);
}

static uint64_t less(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* "Node 1 MemFree:   12345 kB" lines. */
int meminfo__subtract_node(struct meminfo *m, const char *text)
{
	uint64_t total = 0, free = 0, file = 0, kreclaim = 0, lru_file = 0;
	unsigned long long kb;
	const char *line;
	unsigned int node, seen = 0;
	char name[32];

	for (line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		if (sscanf(line, "Node %u %31[^:]: %llu", &node, name, &kb) != 3)
			continue;
		if (!strcmp(name, "MemTotal"))
			total = kb * 1024, seen |= 1;
		else if (!strcmp(name, "MemFree"))
			free = kb * 1024, seen |= 2;
		else if (!strcmp(name, "FilePages"))
			file = kb * 1024;
		else if (!strcmp(name, "KReclaimable"))
			kreclaim = kb * 1024;
		else if (!strcmp(name, "Active(file)") || !strcmp(name, "Inactive(file)"))
			lru_file += kb * 1024;
	}
	if (seen != 3)
		return -EINVAL;
	m->total = less(m->total, total);
	m->free = less(m->free, free);
	m->available = less(m->available, free + file + kreclaim);
	m->file = less(m->file, lru_file);
	m->kreclaim = less(m->kreclaim, kreclaim);
	return 0;
}

int meminfo__read_host(struct meminfo *m, const struct numa_nodes *nodes)
{
	char path[64], buf[8192];
	unsigned int n;
	int err = meminfo__read(m);

	if (err || !nodes || !nodes->n_device)
		return err;
	for (n = 0; n < UMT_MAX_NODES; n++) {
		if (!node_has(nodes, n))
			continue;
		snprintf(path, sizeof(path), "/sys/devices/system/node/node%u/meminfo", n);
		err = read_small(path, buf, sizeof(buf));
		if (!err)
			err = meminfo__subtract_node(m, buf);
		if (err)
			return err;
	}
	return 0;
}

/* One CPU's pageset of one zone, as /proc/zoneinfo lists it. */
struct pageset {
	unsigned long long count, high, batch;
	bool seen;
};

static void pageset__add(struct pageset *s, uint64_t page_size, struct pcp_info *p)
{
	unsigned long long room = s->high > s->count ? s->high - s->count : 0;

	if (!s->seen)
		return;
	/* Without a batch (older formats), the high mark is the bound. */
	if (s->batch && room > s->batch << PCP_REFILL_SHIFT)
		room = s->batch << PCP_REFILL_SHIFT;
	p->count += s->count * page_size;
	p->high += s->high * page_size;
	p->refill += room * page_size;
	memset(s, 0, sizeof(*s));
}

/*
 * Each CPU's pageset says "cpu:", then "count:", "high:" and "batch:"
 * (the zone's watermarks above them have no colon). high is where the
 * list stops refilling now; since Linux 6.7 it is tuned at run time, up
 * to high_max.
 */
int meminfo__parse_pcp(const char *text, uint64_t page_size, const struct numa_nodes *nodes,
		       struct pcp_info *p)
{
	struct pageset set = {};
	unsigned long long v;
	const char *line;
	bool seen = false, skip = false;
	unsigned int node;

	memset(p, 0, sizeof(*p));
	for (line = text; line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		if (sscanf(line, "Node %u, zone", &node) == 1) {
			pageset__add(&set, page_size, p);
			skip = node_has(nodes, node);
		}
		while (*line == ' ')
			line++;
		if (skip)
			continue;
		if (sscanf(line, "cpu: %llu", &v) == 1) {
			pageset__add(&set, page_size, p);
		} else if (sscanf(line, "count: %llu", &v) == 1) {
			set.count = v;
			set.seen = seen = true;
		} else if (sscanf(line, "high: %llu", &v) == 1) {
			set.high = v;
		} else if (sscanf(line, "batch: %llu", &v) == 1) {
			set.batch = v;
		} else if (sscanf(line, "low %llu", &v) == 1) {
			p->low += v * page_size;
		}
	}
	pageset__add(&set, page_size, p);
	return seen ? 0 : -EINVAL;
}

int meminfo__read_pcp(struct pcp_info *p, const struct numa_nodes *nodes)
{
	size_t len;
	char *buf;
	int err;

	/* Grows with the CPUs: a pageset per CPU per zone. */
	buf = proc__read_file("/proc/zoneinfo", &len);
	if (!buf)
		return -errno;
	err = meminfo__parse_pcp(buf, page__size(), nodes, p);
	free(buf);
	return err;
}
