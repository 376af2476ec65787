// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/mman.h>
#include "lib/procfs.h"
#include "lib/sys.h"

uint64_t page__size(void)
{
	static uint64_t size;
	long ps;

	if (size)
		return size;
	ps = sysconf(_SC_PAGESIZE);
	size = ps > 0 ? (uint64_t)ps : 4096;
	return size;
}

unsigned int page__shift(void)
{
	return (unsigned int)__builtin_ctzll(page__size());
}

/*
 * MCL_ONFAULT locks a page only once it is touched, and code is touched
 * the first time it runs: the stop path, run at the worst moment, would
 * page in its code under reclaim. Every file mapping (the binary's and the
 * libraries' text, read-only data, relocations) is read in and locked now;
 * anonymous mappings stay on-fault, their untouched pages in no memory.
 */
static void lock_files(void)
{
	char line[512];
	struct maps_ent e;
	FILE *f = fopen("/proc/self/maps", "re");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (proc__maps_parse(line, &e) && *e.path == '/' && e.perms[0] == 'r')
			mlock((void *)(uintptr_t)e.lo, e.hi - e.lo);	/* what fails stays on-fault */
	}
	fclose(f);
}

enum mem_lock mem__lock(bool future, int *err)
{
	int flags = MCL_CURRENT | MCL_ONFAULT;
	enum mem_lock got = MEM_LOCK_NONE;

	*err = 0;
	if (future && !mlockall(flags | MCL_FUTURE))
		got = MEM_LOCK_ALL;
	else if (!mlockall(flags))
		got = MEM_LOCK_CURRENT;
	else
		*err = -errno;
	if (got != MEM_LOCK_NONE)
		lock_files();
	return got;
}

const char *mem_lock__name(enum mem_lock l)
{
	static const char *const names[] = { "none", "current", "all" };

	return (unsigned int)l < 3 ? names[l] : "none";
}

uint64_t mem__resident_bytes(void)
{
	char buf[32];

	if (proc__status(0, "VmRSS", buf, sizeof(buf)))
		return 0;
	return strtoull(buf, NULL, 10) << 10;	/* "123 kB" */
}
