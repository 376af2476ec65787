// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The guard's memory lock, taken by the daemon and by its page programs'
 * helper (guardd/arm.c) alike.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include "attach/caps.h"
#include "guardd/daemon.h"
#include "lib/sys.h"

/*
 * The killer of last resort must not be the first thing the pressure
 * takes: locked, its looks and its stops never wait on a page-in that
 * waits on reclaim. What it maps later (threads, tables that grow) is
 * locked too where locking may grow: it keeps CAP_IPC_LOCK for that
 * (session__drop_caps); the unit's MemoryMax bounds the whole.
 */
bool guard__may_lock_more(void)
{
	struct rlimit rl;

	return caps__permitted(CAP_IPC_LOCK) ||
	       (!getrlimit(RLIMIT_MEMLOCK, &rl) && rl.rlim_cur == RLIM_INFINITY);
}

/*
 * UMTRACE_NO_MLOCK=1 leaves it unlocked: for measuring what the lock buys
 * (tests/bench/pressure.py), nothing else.
 */
enum mem_lock guard__lock_memory(int *err)
{
	const char *off = getenv("UMTRACE_NO_MLOCK");

	*err = 0;
	if (off && !strcmp(off, "1"))
		return MEM_LOCK_NONE;
	return mem__lock(guard__may_lock_more(), err);
}
