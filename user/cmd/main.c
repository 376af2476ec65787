// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* umtrace: which GPU allocation call is eating the host's RAM. */
#include <stdio.h>
#include <string.h>
#include <bpf/libbpf.h>
#include "cmd/commands.h"
#include "lib/log.h"

#ifndef UMTRACE_VERSION
#define UMTRACE_VERSION "0.1.0"
#endif

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	void (*usage)(FILE *f);
	const char *summary;
};

static const struct command commands[] = {
	{ "trace", cmd_trace, trace_usage,
	  "print every GPU allocation call and the host memory it took" },
	{ "report", cmd_report, report_usage,
	  "trace for a while, then rank call sites by the host memory they took" },
	{ "top", cmd_top, top_usage,
	  "live view of the host memory held by GPU allocations, per process" },
	{ "record", cmd_record, record_usage,
	  "record GPU calls, stacks and host memory to a file for report" },
	{ "flamegraph", cmd_flamegraph, flamegraph_usage,
	  "flamegraph of a recording's call stacks: folded, SVG, pprof or speedscope" },
	{ "timeline", cmd_timeline, timeline_usage,
	  "draw a recording's host memory, GPU allocations and reclaim over time" },
	{ "guard", cmd_guard, guard_usage,
	  "stop the job about to take the host below a floor, decided in the kernel" },
	{ "status", cmd_status, status_usage,
	  "show the running guard's thresholds, headroom and stopped processes" },
	{ "resume", cmd_resume, resume_usage,
	  "continue processes the guard stopped" },
	{ "check", cmd_check, check_usage,
	  "load the BPF programs as each command would: what this kernel runs" },
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f)
{
	size_t i;

	fprintf(f,
"usage: umtrace [--version] [--help] COMMAND [ARGS]\n"
"\n"
"Attribute host memory to the GPU allocation calls that take it.\n"
"\n"
"Commands:\n");
	for (i = 0; i < N_COMMANDS; i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "  %-10s %s\n", "help", "show the help of a command");
	fprintf(f,
"\n"
"Exit status: 0 on success, 1 on a runtime error, 2 on a usage error;\n"
"'trace -- COMMAND' exits with COMMAND's status.\n");
}

static const struct command *find_command(const char *name)
{
	size_t i;

	for (i = 0; i < N_COMMANDS; i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	/* libbpf's debug log drowns umtrace's own -v lines: -vv asks for it. */
	if (level == LIBBPF_DEBUG && log_verbose < 2)
		return 0;
	if (level == LIBBPF_INFO && !log_verbose)
		return 0;
	log__vprintf(LOG_PRIO_INFO, fmt, ap);
	return 0;
}

static int help(int argc, char **argv)
{
	const struct command *c;

	if (argc < 2) {
		usage(stdout);
		return 0;
	}
	c = find_command(argv[1]);
	if (!c) {
		elog("unknown command '%s'; see 'umtrace --help'", argv[1]);
		return 2;
	}
	c->usage(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	const struct command *c;

	libbpf_set_print(libbpf_print);
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		return help(1, argv);
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("umtrace %s (libbpf %s)\n", UMTRACE_VERSION, libbpf_version_string());
		return 0;
	}
	if (!strcmp(argv[1], "help"))
		return help(argc - 1, argv + 1);
	c = find_command(argv[1]);
	if (!c) {
		elog("unknown command '%s'; see 'umtrace --help'", argv[1]);
		return 2;
	}
	return c->run(argc - 1, argv + 1);
}
