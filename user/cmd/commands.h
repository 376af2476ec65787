/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * user/cmd: the top layer: main.c dispatches, one file per subcommand,
 * each returning the process exit code (0, 1 error, 2 usage). Uses every
 * folder below.
 */
#ifndef UMTRACE_COMMANDS_H
#define UMTRACE_COMMANDS_H

#include <stdio.h>

int cmd_trace(int argc, char **argv);
void trace_usage(FILE *f);
int cmd_top(int argc, char **argv);
int cmd_report(int argc, char **argv);
void report_usage(FILE *f);
void top_usage(FILE *f);
int cmd_record(int argc, char **argv);
void record_usage(FILE *f);
int cmd_guard(int argc, char **argv);
void guard_usage(FILE *f);
int cmd_status(int argc, char **argv);
void status_usage(FILE *f);
int cmd_resume(int argc, char **argv);
void resume_usage(FILE *f);
int cmd_flamegraph(int argc, char **argv);
void flamegraph_usage(FILE *f);
int cmd_timeline(int argc, char **argv);
void timeline_usage(FILE *f);
int cmd_check(int argc, char **argv);
void check_usage(FILE *f);

#endif /* UMTRACE_COMMANDS_H */
