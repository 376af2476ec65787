/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * user/cmd: the top layer: main.c dispatches, one file per subcommand,
 * each returning the process exit code (0, 1 error, 2 usage). Uses every
 * folder below.
 */
#ifndef UMTRACE_COMMANDS_H
#define UMTRACE_COMMANDS_H

#include <stdio.h>

/* A subcommand: its run, given argv from its name on, and its help. */
#define UMT_COMMAND(name)					\
	int cmd_##name(int argc, char **argv);			\
	void name##_usage(FILE *f)

UMT_COMMAND(trace);
UMT_COMMAND(report);
UMT_COMMAND(top);
UMT_COMMAND(record);
UMT_COMMAND(guard);
UMT_COMMAND(status);
UMT_COMMAND(resume);
UMT_COMMAND(flamegraph);
UMT_COMMAND(timeline);
UMT_COMMAND(check);

#endif /* UMTRACE_COMMANDS_H */
