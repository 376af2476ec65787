// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Perf maps (/tmp/perf-PID.map): the names of JIT code (python -X perf,
 * Node, the JVM with an agent), in lines of "START SIZE NAME" that the
 * process appends as it compiles. The file is the traced process's to
 * write, so it is read under bounds: so many entries, so long a line.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lib/sys.h"
#include "lib/procfs.h"
#include "lib/out_file.h"
#include "stacks/symbolize_int.h"

#define PERF_MAP_MAX_ENTS	(1U << 20)
#define PERF_MAP_MAX_LINE	4096
/* The process writes the map: what its names may cost us, in all. */
#define PERF_MAP_MAX_BYTES	(64U << 20)

/*
 * The pid the process knows itself by: it names its perf map with it.
 * NSpid lists it in each pid namespace, its own last.
 */
static uint32_t read_nspid(uint32_t pid)
{
	char buf[256], *last;
	uint32_t nspid;

	if (proc__status((pid_t)pid, "NSpid", buf, sizeof(buf)))
		return pid;
	last = strrchr(buf, '\t');
	nspid = (uint32_t)strtoul(last ? last + 1 : buf, NULL, 10);
	return nspid ? nspid : pid;
}

static int perf_ent_cmp(const void *a, const void *b)
{
	const struct perf_ent *x = a, *y = b;

	return cmp__u64(x->range.lo, y->range.lo) ?: cmp__u64(x->seq, y->seq);
}

/* "START SIZE NAME", START and SIZE in hex; 0: taken, else skipped. */
static int perf_map_add(struct perf_map *pm, char *line)
{
	uint64_t start, size;
	struct perf_ent *e;
	char *end, *name;

	start = strtoull(line, &end, 16);
	if (end == line || *end != ' ')
		return -EINVAL;
	line = end + 1;
	size = strtoull(line, &end, 16);
	if (end == line || *end != ' ' || !size || start + size < start)
		return -EINVAL;
	name = end + strspn(end, " ");
	name[strcspn(name, "\n")] = '\0';
	if (!*name || pm->n >= PERF_MAP_MAX_ENTS ||
	    pm->name_bytes + strlen(name) + 1 > PERF_MAP_MAX_BYTES)
		return -EINVAL;
	if (pm->n == pm->cap) {
		size_t cap = pm->cap ? pm->cap * 2 : 256;

		e = realloc(pm->ents, cap * sizeof(*e));
		if (!e)
			return -ENOMEM;
		pm->ents = e;
		pm->cap = cap;
	}
	e = &pm->ents[pm->n];
	e->name = strdup(name);
	if (!e->name)
		return -ENOMEM;
	pm->name_bytes += strlen(name) + 1;
	e->range.lo = start;
	e->range.hi = start + size;
	e->seq = pm->n++;
	return 0;
}

/* Length of what fgets read, and whether it holds a line's end. */
static size_t chunk_len(const char *buf, bool *eol)
{
	size_t len = strlen(buf);

	*eol = len && buf[len - 1] == '\n';
	return len;
}

/*
 * Read whole lines past read_off; a line still being written waits for
 * the next time. Over-long lines are skipped.
 */
static size_t perf_map_read(struct perf_map *pm, FILE *f)
{
	char line[PERF_MAP_MAX_LINE];
	size_t added = 0, len;
	bool eol, skip;

	if (fseeko(f, pm->read_off, SEEK_SET))
		return 0;
	while (fgets(line, sizeof(line), f)) {
		len = chunk_len(line, &eol);
		skip = !eol && len == sizeof(line) - 1;
		while (skip && fgets(line, sizeof(line), f)) {
			len += chunk_len(line, &eol);
			if (eol)
				break;
		}
		if (!eol)
			break;
		pm->read_off += len;
		if (!skip)
			added += !perf_map_add(pm, line);
	}
	return added;
}

void perf_map__clear(struct perf_map *pm)
{
	size_t i;

	for (i = 0; i < pm->n; i++)
		free(pm->ents[i].name);
	pm->n = 0;
	pm->name_bytes = 0;
	pm->read_off = 0;
}

/* Pick up what the process appended since; at most once per REFRESH_NS. */
/*
 * /tmp is anyone's: a map is the process's own only if its owner wrote
 * it, or root did, as perf asks. Another user's file there would name
 * the frames of a process not theirs.
 */
static bool map_owner_ok(uint32_t pid, const struct stat *map)
{
	char path[32];
	struct stat proc;

	snprintf(path, sizeof(path), "/proc/%u", pid);
	if (stat(path, &proc))
		return false;
	return map->st_uid == 0 || map->st_uid == proc.st_uid;
}

static bool perf_map_refresh(struct sym_proc *p)
{
	struct perf_map *pm = &p->pm;
	uint64_t now = clock__mono_ns();
	char path[64];
	struct stat st;
	size_t added;
	FILE *f;
	int fd;

	if (pm->checked && now - pm->checked_ns < REFRESH_NS)
		return false;
	pm->checked = true;
	pm->checked_ns = now;
	if (!p->nspid)
		p->nspid = read_nspid(p->pid);
	snprintf(path, sizeof(path), "/tmp/perf-%u.map", p->nspid);
	fd = sym_proc__open(p, path, &st);
	if ((fd == -EACCES || fd == -EPERM) && p->nspid == p->pid)
		fd = file__open_in_root(0, path, &st);
	if (fd < 0)
		return false;
	if (!map_owner_ok(p->pid, &st)) {
		close(fd);
		return false;
	}
	if (st.st_dev != pm->dev || st.st_ino != pm->ino ||
	    st.st_size < pm->read_off) {
		perf_map__clear(pm);	/* a new file, or rewritten */
		pm->dev = st.st_dev;
		pm->ino = st.st_ino;
	}
	if (st.st_size == pm->read_off) {
		close(fd);
		return false;
	}
	f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return false;
	}
	added = perf_map_read(pm, f);
	fclose(f);
	if (added)
		qsort(pm->ents, pm->n, sizeof(*pm->ents), perf_ent_cmp);
	return added;
}

bool perf_map__resolve(struct symbolizer *s, struct sym_proc *p, struct sym_frame *f,
		       bool refresh)
{
	const struct perf_ent *e;

	if (refresh && !perf_map_refresh(p))
		return false;
	e = map_range__find(p->pm.ents, p->pm.n, sizeof(*e), f->addr);
	if (!e)
		return false;
	f->func = strtab__intern_str(&s->names, e->name);
	f->module = s->perf_module;
	f->offset = f->func ? f->addr - e->range.lo : 0;
	return true;
}
