/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Run a command held at the door: it is forked, waits on a pipe until the
 * probes are attached, then execs, so its first GPU call is seen.
 */
#ifndef UMTRACE_LAUNCH_H
#define UMTRACE_LAUNCH_H

#include <stdbool.h>
#include <sys/types.h>

struct launched {
	pid_t pid;
	int go_fd;	/* write end; closing it without a byte aborts */
	bool reaped;
	int status;	/* wait(2) status once reaped */
};

int launch__start(struct launched *l, char *const argv[]);
int launch__release(struct launched *l);
/* true once the command has exited (reaps it without blocking). */
bool launch__done(struct launched *l);
/* The shell's convention: the exit code, or 128 + the killing signal. */
int launch__exit_code(const struct launched *l);
void launch__abort(struct launched *l);

#endif /* UMTRACE_LAUNCH_H */
