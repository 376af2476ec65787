/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The bundle the guard leaves for each stop, in a fresh directory (0700)
 * under --postmortem-dir: event.txt (what was decided and why),
 * report.txt (per process and entry point, and the call sites holding
 * memory), held.folded (who held what at the stop, as folded stacks
 * weighted by host bytes) and recording.umt (the flight recorder: the
 * last minutes of calls and memory samples) when there is one.
 */
#ifndef UMTRACE_POSTMORTEM_H
#define UMTRACE_POSTMORTEM_H

#include <stddef.h>

struct guard;
struct guard_stop;

/*
 * The bundle of stop s under --postmortem-dir, from the guard's who holds
 * what: 0 and the bundle's path in dir, or -errno (a warning is logged).
 */
int postmortem__write(struct guard *g, const struct guard_stop *s, char *dir, size_t len);

#endif /* UMTRACE_POSTMORTEM_H */
