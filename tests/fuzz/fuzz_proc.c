// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libFuzzer target for the /proc parsers: /proc/meminfo
 * (meminfo__parse), /proc/zoneinfo's per-CPU lists (meminfo__parse_pcp),
 * /proc/PID/maps as libcuda discovery reads it (user/attach/libcuda.c) and
 * as the symbolizer walks a whole text (proc__maps_parse, every input),
 * and /proc/PID/mountinfo as the FUSE test reads it (proc__path_on_fuse).
 * The first byte chooses the parser; the rest is the file's text.
 *
 * libcuda.c has no text entry point: its maps reader, scan_maps(), is
 * static and opens "/proc/PID/maps" itself. The module is compiled into
 * this file to reach it, and is handed a "pid" of "../" plus a scratch
 * directory, so that it opens a maps file written here and resolves the
 * libraries it names under that directory's "root" (where a libcuda.so.1
 * exists, so that some inputs get as far as adding a library to the set).
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "lib/meminfo.h"
#include "lib/procfs.h"

#include "../../user/attach/libcuda.c"

enum { FUZZ_MEMINFO, FUZZ_PCP, FUZZ_MAPS, FUZZ__COUNT };

static char scratch[PATH_MAX];	/* holds maps and root/libcuda.so.1 */
static char pid_arg[PATH_MAX];	/* "../" + scratch: "/proc/%s/maps" lands there */
static char maps_path[PATH_MAX];
static volatile uint64_t sink;

static void cleanup_scratch(void)
{
	char p[PATH_MAX + 32];

	snprintf(p, sizeof(p), "%s/root/libcuda.so.1", scratch);
	unlink(p);
	snprintf(p, sizeof(p), "%s/root", scratch);
	rmdir(p);
	unlink(maps_path);
	rmdir(scratch);
}

static void make_scratch(void)
{
	const char *base = access("/dev/shm", W_OK) ? "/tmp" : "/dev/shm";
	char p[PATH_MAX + 32];
	FILE *f;

	snprintf(scratch, sizeof(scratch), "%s/umt-fuzz-proc-XXXXXX", base);
	if (!mkdtemp(scratch))
		abort();
	snprintf(pid_arg, sizeof(pid_arg), "..%s", scratch);
	snprintf(maps_path, sizeof(maps_path), "%s/maps", scratch);
	snprintf(p, sizeof(p), "%s/root", scratch);
	if (mkdir(p, 0700))
		abort();
	snprintf(p, sizeof(p), "%s/root/libcuda.so.1", scratch);
	f = fopen(p, "w");
	if (!f)
		abort();
	fclose(f);
	atexit(cleanup_scratch);
}

static void fuzz_maps(const uint8_t *data, size_t size)
{
	struct libcuda_set set = { 0 };
	FILE *f;
	size_t i;

	if (!scratch[0])
		make_scratch();
	f = fopen(maps_path, "w");
	if (!f)
		abort();
	if (size && fwrite(data, 1, size, f) != size)
		abort();
	fclose(f);
	sink += (uint64_t)scan_maps(&set, pid_arg);
	for (i = 0; i < set.n; i++)
		sink += strlen(set.libs[i].name);
	libcuda_set__free(&set);
}

/* The whole text at once, as the symbolizer walks it: no read past its NUL. */
static void fuzz_maps_text(const char *text)
{
	struct maps_ent e;
	const char *line;

	for (line = text; *line; line = e.next)
		if (proc__maps_parse(line, &e))
			sink += e.lo ^ e.hi ^ e.offset ^ e.ino ^ e.path_len ^ (uint64_t)e.path[0];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pcp_info pcp;
	struct meminfo m;
	char *text;

	if (!size)
		return 0;
	if (data[0] % FUZZ__COUNT == FUZZ_MAPS) {
		fuzz_maps(data + 1, size - 1);
		return 0;
	}
	/* The parsers take what read() gave, NUL-terminated. */
	text = malloc(size);
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	fuzz_maps_text(text);
	if (data[0] % FUZZ__COUNT == FUZZ_MEMINFO) {
		if (!meminfo__parse(text, &m))
			sink += m.total + m.free + m.available + m.file + m.kreclaim;
		/* a node's meminfo has the same shape, with "Node N " in front */
		m = (struct meminfo){ ~0ULL, ~0ULL, ~0ULL, ~0ULL, ~0ULL };
		if (!meminfo__subtract_node(&m, text))
			sink += m.total + m.free + m.available + m.file + m.kreclaim;
	} else {
		/* and as a 64K-page arm64 host reads it */
		if (!meminfo__parse_pcp(text, 4096, NULL, &pcp))
			sink += pcp.count + pcp.high + pcp.low;
		if (!meminfo__parse_pcp(text, 65536, NULL, &pcp))
			sink += pcp.count + pcp.high + pcp.low;
	}
	free(text);
	return 0;
}
