// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * umtrace resume: continue jobs the guard stopped, found in its state
 * file, through pidfds and their cgroup.freeze files.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cmd/cli.h"
#include "cmd/commands.h"
#include "guard/action.h"
#include "guard/pin.h"
#include "guard/state.h"
#include "lib/escape.h"
#include "lib/log.h"
#include "lib/procfs.h"
#include "lib/units.h"

void resume_usage(FILE *f)
{
	fprintf(f,
"usage: umtrace resume [--state-file PATH] PID... | --all\n"
"\n"
"Continue processes the guard stopped: thaw the cgroup it froze, if any, and\n"
"send SIGCONT. --all resumes every process the guard lists as stopped. The\n"
"guard logs each resume at its next sample, or at once if it has to stop the\n"
"process again first.\n"
"\n"
"Options:\n"
"  -a, --all                every process the guard stopped\n"
"      --state-file PATH    the guard's state file (default " GUARD_STATE_DEFAULT ")\n"
"  -h, --help               show this help\n"
"\n"
"Exit status: 0 if every process named was resumed, 1 if one was not (gone,\n"
"or not stopped) or --all found none, 2 on a usage error.\n");
}

static const struct guard_stopped *find_stopped(const struct guard_status *st, uint32_t pid)
{
	size_t i;

	for (i = 0; i < st->n_stopped; i++)
		if (st->stopped[i].pid == pid)
			return &st->stopped[i];
	return NULL;
}

/* Thaw what the guard froze, then SIGCONT: a frozen cgroup holds the
 * signal until it thaws. */
static int resume_one(uint32_t pid, const struct guard_stopped *s)
{
	char st = proc__state((pid_t)pid);
	char e[ESC_TERM_LEN(sizeof(s->cgroup))];
	bool frozen = s && s->cgroup[0] && cgroup__frozen(s->cgroup);
	int fd, err;

	if (!st) {
		elog("resume: no process %u", pid);
		return -ESRCH;
	}
	if (st != 'T' && !frozen) {
		elog("resume: process %u is not stopped", pid);
		return -EINVAL;
	}
	if (frozen && (err = cgroup__set_frozen(s->cgroup, false))) {
		elog("resume: cannot thaw %s: %s", esc__term(s->cgroup, e, sizeof(e)),
		     strerror(-err));
		return err;
	}
	fd = pidfd__open((pid_t)pid);
	err = guard_act__signal(fd, (pid_t)pid, SIGCONT);
	if (fd >= 0)
		close(fd);
	if (err) {
		elog("resume: cannot send SIGCONT to %u: %s", pid, strerror(-err));
		return err;
	}
	if (s)
		printf("resumed %u (%s)\n", pid, esc__term(s->comm, e, sizeof(e)));
	else
		printf("resumed %u\n", pid);
	return 0;
}

/*
 * Like pkill, finding nothing is a failure: a stop the guard made an
 * instant ago may not be in its state file yet, and a script that
 * resumes before it is listed must be told.
 */
static int resume_all(const struct guard_status *st)
{
	int failed = 0, held = 0;
	size_t i;

	for (i = 0; i < st->n_stopped; i++) {
		if (!guard_state__still_held(&st->stopped[i]))
			continue;
		held++;
		if (resume_one(st->stopped[i].pid, &st->stopped[i]))
			failed++;
	}
	if (!held) {
		elog("resume: the guard lists no process it holds stopped");
		return 1;
	}
	return failed;
}

struct resume_args {
	const char *path;
	bool all;
};

static int option(void *ctx, int opt, const char *arg)
{
	struct resume_args *a = ctx;

	(void)arg;
	if (opt == 'a')
		a->all = true;
	return 0;
}

/* PID... or --all, each PID checked before any is resumed. */
static int parse_args(struct resume_args *a, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "all", no_argument, NULL, 'a' },
		{}
	};
	const struct cli c = {
		.name = "resume", .shortopts = "a", .longopts = opts, .in_order = true,
		.state_file = &a->path, .usage = resume_usage, .option = option, .ctx = a,
	};
	long pid;
	int err, i;

	a->path = GUARD_STATE_DEFAULT;
	err = cli__parse(&c, argc, argv);
	if (err)
		return err;
	if (a->all == (optind < argc)) {
		elog("resume: give PID... or --all");
		return -EINVAL;
	}
	for (i = optind; i < argc; i++) {
		if (parse_long(argv[i], 1, 0x7fffffff, &pid)) {
			elog("resume: '%s' is not a process id", argv[i]);
			return -EINVAL;
		}
	}
	return 0;
}

int cmd_resume(int argc, char **argv)
{
	struct resume_args a = {};
	struct guard_status *st;
	bool have_state;
	int err, failed = 0, i;
	long pid;

	err = parse_args(&a, argc, argv);
	if (err)
		return cli__exit(NULL, err);
	st = guard_state__new();
	if (!st)
		return 1;
	/* Without a state file single PIDs can still be continued. */
	have_state = a.all ? !guard_state__load(a.path, st) : !guard_state__read(a.path, st);
	if (a.all && !have_state) {
		free(st);
		return 1;
	}
	if (!have_state)
		memset(st, 0, sizeof(*st));
	if (a.all)
		failed = resume_all(st);
	for (i = optind; i < argc; i++) {
		parse_long(argv[i], 1, 0x7fffffff, &pid);
		if (resume_one((uint32_t)pid, find_stopped(st, (uint32_t)pid)))
			failed++;
	}
	free(st);
	return failed ? 1 : 0;
}
