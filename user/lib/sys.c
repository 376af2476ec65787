// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <unistd.h>
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
