/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The command line every subcommand shares: one getopt_long() loop over
 * the attach options (attach/opts.h), --help and the command's own
 * options, with one line of our own for an unknown option or a missing
 * value; and the checks of the options and operands that recur (a
 * duration, an interval, an output file, a recording, -p or COMMAND), so
 * that each message is written once and every command says it alike.
 * Every function that refuses something has said why in one line.
 */
#ifndef UMTRACE_CLI_H
#define UMTRACE_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "attach/opts.h"
#include "lib/numa.h"
#include "lib/out_file.h"
#include "rec/replay.h"
#include "stacks/unwind.h"

enum {
	OPT_STATE_FILE = OPT_ATTACH__LAST,
	OPT_FORCE,
	OPT_STACK,
	OPT_CLI__LAST,		/* commands number their own options after it */
};

/* Room for the attach options, a command's own and --help, in one table. */
#define CLI_MAX_OPTS 48

struct cli {
	const char *name;		/* the subcommand, for messages */
	const char *shortopts;		/* its own; 'h' is added */
	const struct option *longopts;	/* its own, ended by {}; --help is added */
	/* Stop at the first operand: what follows is COMMAND's. */
	bool in_order;
	/*
	 * getopt's own two lines and the usage on stderr for a bad option,
	 * as 'check' has always answered, instead of one line of ours.
	 */
	bool getopt_errors;
	/* Its attach options, parsed before its own; NULL: it takes none. */
	struct attach_opts *ao;
	/* The plain options several commands take; NULL: not this one's. */
	bool *json;			/* -j, --json */
	const char **state_file;	/* --state-file PATH, the guard's */
	const char **output;		/* -o, --output FILE: not empty */
	bool *force;			/* --force: replace it */
	uint64_t *duration_ms;		/* -d, --duration INTERVAL: more than 0 */
	uint64_t *interval_ms;		/* -i, --interval INTERVAL: 100ms to 1h */
	enum stack_mode *stack;		/* --stack fp|dwarf|auto */
	void (*usage)(FILE *f);
	/* One of its own options (NULL: none): 0, or -EINVAL after saying why. */
	int (*option)(void *ctx, int opt, const char *arg);
	/* Every option taken, the attach options' too, in command-line order. */
	void (*seen)(void *ctx, int opt);
	void *ctx;
};

/*
 * Parse argv's options; optind is then the first operand. 0, 1 after
 * --help printed the usage on stdout, or -EINVAL after one line said why.
 */
int cli__parse(const struct cli *c, int argc, char **argv);

/*
 * The way out after options were refused (err < 0) or --help answered
 * (err > 0): ao freed (NULL: none), and the exit code, 2 or 0.
 */
int cli__exit(struct attach_opts *ao, int err);

/* --duration: more than nothing. */
int cli__duration(const char *arg, uint64_t *ms);
/* --interval: 100ms to 1h. */
int cli__interval(const char *arg, uint64_t *ms);
/*
 * --floor SIZE or N% of host RAM, as the guard takes its own: more than 0.
 * Host RAM is MemTotal less the device nodes' (NULL: none; top and
 * report resolve it again once their session knows them).
 */
int cli__floor(const char *arg, const struct numa_nodes *nodes, uint64_t *bytes);
/* The same against a host RAM figure already read (a recording's). */
int cli__floor_of(const char *arg, uint64_t host_total, uint64_t *bytes);
/* --stack fp|dwarf|auto. */
int cli__stack(const char *arg, enum stack_mode *mode);

/* No operand after the options. */
int cli__no_operands(const char *cmd, int argc, char **argv);
/*
 * Exactly one recording after the options, into *file, and -o given:
 * out_hint says what -o takes ("OUT", "OUT.svg").
 */
int cli__one_recording(const char *cmd, int argc, char **argv, const char **file,
		       const char *out, const char *out_hint);
/* A COMMAND to run and -p name two ways to choose what is traced. */
int cli__pids_or_command(const struct attach_opts *ao, char **cmd);

/*
 * -o OUT and --force: OUT made before the work that fills it, so that a
 * bad -o fails at once. 0, or -errno after saying why.
 */
int cli__out_open(struct out_file *out, const char *path, bool force);
/*
 * The work's answer err (0 or -errno, said already), then OUT committed;
 * on either's failure OUT is discarded. 0, or -errno.
 */
int cli__out_commit(struct out_file *out, int err);

/* A recording read as -p and --platform say (platform_given: --platform was). */
struct replay_opts cli__replay_opts(const struct attach_opts *ao, bool platform_given,
				    const struct replay_hooks *hooks, void *ctx);

#endif /* UMTRACE_CLI_H */
