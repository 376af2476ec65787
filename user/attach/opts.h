/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Options shared by every subcommand that attaches probes, parsed in one
 * place so that trace, top, report, record and guard agree on them.
 */
#ifndef UMTRACE_ATTACH_OPTS_H
#define UMTRACE_ATTACH_OPTS_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "model/platform.h"

enum {
	OPT_LIBCUDA = 0x100,
	OPT_RINGBUF,
	OPT_RESCAN,
	OPT_PLATFORM,
	OPT_MANAGED_FAULTS,
	OPT_DEVICE_NODES,
	OPT_LIBC10,
	OPT_NO_LIBC10,
	OPT_LIBC10_EVERY_CALL,
	OPT_ATTACH__LAST,	/* subcommands number their own options after it */
};

#define ATTACH_SHORT_OPTS "p:v"
#define ATTACH_LONG_OPTS						\
	{ "libcuda", required_argument, NULL, OPT_LIBCUDA },		\
	{ "pid", required_argument, NULL, 'p' },			\
	{ "ringbuf-size", required_argument, NULL, OPT_RINGBUF },	\
	{ "rescan", required_argument, NULL, OPT_RESCAN },		\
	{ "platform", required_argument, NULL, OPT_PLATFORM },		\
	{ "managed-faults", no_argument, NULL, OPT_MANAGED_FAULTS },	\
	{ "device-nodes", required_argument, NULL, OPT_DEVICE_NODES },	\
	{ "libc10", required_argument, NULL, OPT_LIBC10 },		\
	{ "no-libc10", no_argument, NULL, OPT_NO_LIBC10 },		\
	{ "libc10-every-call", no_argument, NULL, OPT_LIBC10_EVERY_CALL }, \
	{ "verbose", no_argument, NULL, 'v' }

#define ATTACH_MAX_PIDS 64
#define ATTACH_DEFAULT_RINGBUF (8ULL << 20)

struct attach_opts {
	const char **libcuda;	/* points into argv */
	size_t n_libcuda;
	const char **libc10;	/* PyTorch's libc10.so files named; into argv */
	size_t n_libc10;
	bool no_libc10;		/* leave PyTorch's allocator hook alone */
	bool torch_continuous;	/* the hook on every call, not in windows */
	pid_t pids[ATTACH_MAX_PIDS];
	size_t n_pids;
	uint64_t ringbuf_bytes;
	uint64_t rescan_ms;	/* 0: never look for new libcuda files */
	bool rescan_given;	/* --rescan was on the command line */
	enum platform platform;	/* the host cost model, or auto */
	bool managed_faults;	/* hook every user page fault (x86) */
	const char *device_nodes;	/* NUMA nodes not host RAM: NULL is auto */
};

void attach_opts__init(struct attach_opts *o);
/* 1 if opt was one of ours, 0 if not, -EINVAL after printing why. */
int attach_opts__parse(struct attach_opts *o, int opt, const char *arg);
void attach_opts__usage(FILE *f);
/*
 * getopt_long() returned ':' or '?' (opterr = 0, optstring starting with
 * ':'): say so in one line for subcommand cmd. Returns -EINVAL.
 */
int attach_opts__bad_option(const char *cmd, int opt, char **argv);
void attach_opts__free(struct attach_opts *o);

#endif /* UMTRACE_ATTACH_OPTS_H */
