// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/mman.h>
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

enum mem_lock mem__lock(bool future, int *err)
{
	int flags = MCL_CURRENT | MCL_ONFAULT;

	*err = 0;
	if (future && !mlockall(flags | MCL_FUTURE))
		return MEM_LOCK_ALL;
	if (!mlockall(flags))
		return MEM_LOCK_CURRENT;
	*err = -errno;
	return MEM_LOCK_NONE;
}

const char *mem_lock__name(enum mem_lock l)
{
	static const char *const names[] = { "none", "current", "all" };

	return (unsigned int)l < 3 ? names[l] : "none";
}

uint64_t mem__resident_bytes(void)
{
	unsigned long long kib = 0;
	char line[128];
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %llu kB", &kib) == 1)
			break;
	fclose(f);
	return (uint64_t)kib << 10;
}
