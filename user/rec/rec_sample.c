// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Host memory samples for recordings: /proc/meminfo (host RAM only),
 * memory pressure (PSI) and direct reclaim counters from /proc/vmstat.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/sys.h"
#include "lib/meminfo.h"
#include "lib/procfs.h"
#include "rec/recording.h"

/* "12.34" into 1234. */
static uint32_t hundredths(const char *p)
{
	uint32_t v = 0, frac = 0, digits = 0;

	while (*p >= '0' && *p <= '9' && v < 100000)
		v = v * 10 + (uint32_t)(*p++ - '0');
	if (*p == '.')
		for (p++; *p >= '0' && *p <= '9'; p++)
			if (digits < 2) {
				frac = frac * 10 + (uint32_t)(*p - '0');
				digits++;
			}
	while (digits++ < 2)
		frac *= 10;
	return v * 100 + frac;
}

/* "some avg10=0.12 avg60=0.05 avg300=0.01 total=12345" */
static int psi_line(const char *text, const char *kind, uint32_t *avg10, uint64_t *total)
{
	const char *line = text, *p;
	size_t klen = strlen(kind);

	for (; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		if (strncmp(line, kind, klen) || line[klen] != ' ')
			continue;
		p = strstr(line, "avg10=");
		if (!p)
			return -EINVAL;
		*avg10 = hundredths(p + 6);
		p = strstr(line, "total=");
		if (!p)
			return -EINVAL;
		*total = strtoull(p + 6, NULL, 10);
		return 0;
	}
	return -EINVAL;
}

int rec_sample__parse_psi(const char *text, struct rec_sample *s)
{
	s->has_psi = false;
	if (psi_line(text, "some", &s->psi_some_avg10, &s->psi_some_total_us))
		return -EINVAL;
	/* "full" came with 5.2's memory PSI too, but be lenient. */
	if (psi_line(text, "full", &s->psi_full_avg10, &s->psi_full_total_us)) {
		s->psi_full_avg10 = 0;
		s->psi_full_total_us = 0;
	}
	s->has_psi = true;
	return 0;
}

/*
 * allocstall_<zone>, and pgscan_direct / pgsteal_direct (per zone, as
 * pgscan_direct_<zone>, before 4.8); pgscan_direct_throttle counts
 * something else.
 */
void rec_sample__parse_vmstat(const char *text, struct rec_sample *s)
{
	const char *line = text;
	unsigned long long v;
	char name[64];

	s->allocstall = s->pgscan_direct = s->pgsteal_direct = 0;
	for (; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		if (sscanf(line, "%63s %llu", name, &v) != 2)
			continue;
		if (!strncmp(name, "allocstall", 10))
			s->allocstall += v;
		else if (!strcmp(name, "pgscan_direct_throttle"))
			continue;
		else if (!strncmp(name, "pgscan_direct", 13))
			s->pgscan_direct += v;
		else if (!strncmp(name, "pgsteal_direct", 14))
			s->pgsteal_direct += v;
	}
}

int rec_sample__read(struct rec_sample *s, const struct numa_nodes *nodes)
{
	struct meminfo m;
	size_t len;
	char *buf;
	int err;

	memset(s, 0, sizeof(*s));
	s->ts_ns = clock__mono_ns();
	err = meminfo__read_host(&m, nodes);
	if (err)
		return err;
	s->mem_total = m.total;
	s->mem_available = m.available;
	s->mem_free = m.free;
	/* Both optional: no PSI before 4.20, or with psi=0. */
	buf = proc__read_file("/proc/pressure/memory", &len);
	if (buf)
		rec_sample__parse_psi(buf, s);
	free(buf);
	buf = proc__read_file("/proc/vmstat", &len);
	if (buf)
		rec_sample__parse_vmstat(buf, s);
	free(buf);
	return 0;
}
