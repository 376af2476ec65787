/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * What the guard promises after its own death: its links are pinned in
 * bpffs, so a killed daemon (SIGKILL, OOM, crash) leaves the kernel side
 * armed: admission at GPU calls, the page-level backstop and the reclaim
 * rule go on stopping jobs at the floor, against the last anchor kept
 * current by the kernel's own page counts. Stopped jobs stay stopped.
 * Only a clean exit (SIGINT, SIGTERM) disarms; a new guard replaces the
 * pins of a dead one; `rm -r` of the directory disarms by hand.
 */
#ifndef UMTRACE_GUARD_PIN_H
#define UMTRACE_GUARD_PIN_H

#include <stdbool.h>
#include <stddef.h>
#include "attach/probes.h"

#define GUARD_PIN_DIR "/sys/fs/bpf/umtrace-guard"

struct guard_pins {
	const char *dir;	/* NULL: not pinning */
	size_t links, multi;	/* pinned so far */
	bool owner;		/* its "owner" pin is there */
};

/*
 * Make dir on a bpffs (mounting one on /sys/fs/bpf if none is there) and
 * remove the pins a dead guard left in it; *stale says whether there were
 * any. 0 or -errno.
 */
int guard_pins__open(struct guard_pins *gp, const char *dir, bool *stale);
/*
 * Pin every link made since the last call, and once the kernel side's
 * .bss map as "owner": whose the pins are. 0 or -errno.
 */
int guard_pins__sync(struct guard_pins *gp, struct probes *p);
/*
 * dir's pins are p's kernel side (its "owner" is p's .bss). A helper whose
 * daemon died asks before it attaches and pins: a new guard may have
 * replaced the pins meanwhile, and the old kernel side must not come back
 * beside the new one (a dry run would then stop jobs).
 */
bool guard_pins__owned(const char *dir, const struct probes *p);
/* Unpin all: the kernel side goes when the links close. */
void guard_pins__remove(struct guard_pins *gp);
/* Pin (or unpin) one link by name, outside the numbered ones. 0 or -errno. */
int guard_pins__pin_fd(const char *dir, const char *name, int fd);
void guard_pins__unpin(const char *dir, const char *name);
bool guard_pins__has(const char *dir, const char *name);
/* A dead guard's pins are there: its kernel side is still armed. */
bool guard_pins__armed(const char *dir);

#endif /* UMTRACE_GUARD_PIN_H */
