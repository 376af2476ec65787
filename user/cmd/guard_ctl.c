// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * umtrace status / umtrace resume: talk to the running guard only through
 * its root-owned state file, and to stopped jobs through pidfds and their
 * cgroup.freeze files.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "attach/opts.h"
#include "cmd/commands.h"
#include "guard/action.h"
#include "lib/procfs.h"
#include "guard/pin.h"
#include "guard/state.h"
#include "lib/log.h"
#include "export/output.h"
#include "lib/units.h"

void status_usage(FILE *f)
{
	fprintf(f,
"usage: umtrace status [--state-file PATH] [--json]\n"
"\n"
"Show the running guard's thresholds, the host's headroom as its kernel side\n"
"sees it, its counters, and the processes it stopped that are still stopped.\n"
"\n"
"Options:\n"
"      --state-file PATH    the guard's state file (default " GUARD_STATE_DEFAULT ")\n"
"  -j, --json               one JSON object\n"
"  -h, --help               show this help\n"
"\n"
"Exit status: 0 if a guard is running, 1 if none is (its last state is still\n"
"shown) or on error, 2 on a usage error.\n");
}

void resume_usage(FILE *f)
{
	fprintf(f,
"usage: umtrace resume [--state-file PATH] PID... | --all\n"
"\n"
"Continue processes the guard stopped: thaw the cgroup it froze, if any, and\n"
"send SIGCONT. --all resumes every process the guard lists as stopped. The\n"
"guard notices and logs each resume at its next sample.\n"
"\n"
"Options:\n"
"  -a, --all                every process the guard stopped\n"
"      --state-file PATH    the guard's state file (default " GUARD_STATE_DEFAULT ")\n"
"  -h, --help               show this help\n"
"\n"
"Exit status: 0 if every process named was resumed, 1 if one was not (gone,\n"
"or not stopped), 2 on a usage error.\n");
}

enum { OPT_STATE_FILE = 0x100 };

static void print_text(const struct guard_status *st, bool alive)
{
	char a[32], b[32], c[32], d[32];
	time_t now = time(NULL);
	size_t i;

	if (alive)
		printf("guard: running, pid %u, up %llds, action %s%s\n", st->pid,
		       (long long)(now - st->started), st->action,
		       st->dry_run ? " (dry run: nothing is sent)" : "");
	else if (guard_pins__armed(GUARD_PIN_DIR))
		printf("guard: not running (last seen as pid %u, %llds ago), but its kernel "
		       "side is still armed (pinned in %s): start the guard again, or remove "
		       "that directory to disarm it\n", st->pid,
		       (long long)(now - st->updated), GUARD_PIN_DIR);
	else
		printf("guard: not running (last seen as pid %u, %llds ago); its kernel "
		       "side is gone with it\n", st->pid, (long long)(now - st->updated));
	printf("thresholds: floor %s, low %s, drop %s per sample, metric %s, auto-resume %s\n",
	       fmt_bytes(st->floor, a, sizeof(a)), fmt_bytes(st->low, b, sizeof(b)),
	       fmt_bytes(st->drop, c, sizeof(c)), st->metric,
	       st->auto_resume ? fmt_bytes(st->auto_resume, d, sizeof(d)) : "off");
	printf("host: %s %s; kernel headroom %s%s above the floor (%llds ago)\n",
	       st->metric, fmt_bytes(st->metric_value, a, sizeof(a)),
	       st->headroom < 0 ? "-" : "",
	       fmt_bytes((uint64_t)(st->headroom < 0 ? -st->headroom : st->headroom), b,
			 sizeof(b)), (long long)(now - st->updated));
	printf("counters: %llu samples, %llu admission checks, %llu kernel stops, "
	       "%llu policy stops, %llu failed sends, %llu direct reclaims\n",
	       (unsigned long long)st->samples, (unsigned long long)st->checks,
	       (unsigned long long)st->kernel_stops, (unsigned long long)st->policy_stops,
	       (unsigned long long)st->send_failed, (unsigned long long)st->reclaims);
	if (!st->n_stopped) {
		printf("stopped: none\n");
		return;
	}
	printf("%-8s %-16s %-8s %-10s %8s  %s\n", "PID", "COMM", "ACTION", "REASON",
	       "SINCE", "CGROUP");
	for (i = 0; i < st->n_stopped; i++) {
		const struct guard_stopped *s = &st->stopped[i];

		printf("%-8u %-16s %-8s %-10s %7llds  %s%s\n", s->pid, s->comm, s->action,
		       s->reason, (long long)(now - s->when), s->cgroup[0] ? s->cgroup : "-",
		       guard_state__still_held(s) ? "" : "  (no longer stopped)");
	}
}

static void print_json(const struct guard_status *st, bool alive)
{
	size_t i;

	printf("{\"running\":%s,\"kernel_armed\":%s,\"pid\":%u,\"started\":%lld,\"updated\":%lld,"
	       "\"floor\":%llu,\"low\":%llu,\"drop\":%llu,\"auto_resume\":%llu,"
	       "\"metric\":\"%s\",\"action\":\"%s\",\"dry_run\":%s,\"headroom\":%lld,"
	       "\"metric_value\":%llu,\"samples\":%llu,\"checks\":%llu,"
	       "\"kernel_stops\":%llu,\"policy_stops\":%llu,\"send_failed\":%llu,"
	       "\"reclaims\":%llu,\"stopped\":[",
	       alive ? "true" : "false",
	       alive || guard_pins__armed(GUARD_PIN_DIR) ? "true" : "false",
	       st->pid, (long long)st->started,
	       (long long)st->updated, (unsigned long long)st->floor,
	       (unsigned long long)st->low, (unsigned long long)st->drop,
	       (unsigned long long)st->auto_resume, st->metric, st->action,
	       st->dry_run ? "true" : "false", (long long)st->headroom,
	       (unsigned long long)st->metric_value, (unsigned long long)st->samples,
	       (unsigned long long)st->checks, (unsigned long long)st->kernel_stops,
	       (unsigned long long)st->policy_stops, (unsigned long long)st->send_failed,
	       (unsigned long long)st->reclaims);
	for (i = 0; i < st->n_stopped; i++) {
		const struct guard_stopped *s = &st->stopped[i];

		printf("%s{\"pid\":%u,\"comm\":", i ? "," : "", s->pid);
		output__json_string(stdout, s->comm);
		printf(",\"action\":\"%s\",\"reason\":\"%s\",\"since\":%lld,\"cgroup\":",
		       s->action, s->reason, (long long)s->when);
		output__json_string(stdout, s->cgroup);
		printf(",\"still_stopped\":%s}", guard_state__still_held(s) ? "true" : "false");
	}
	printf("]}\n");
}

static int read_state(const char *path, struct guard_status *st)
{
	int err = guard_state__read(path, st);

	if (err == -ENOENT)
		elog("no guard state at %s: no guard has run (or use --state-file)", path);
	else if (err == -EINVAL)
		elog("%s is not a umtrace guard state file", path);
	else if (err)
		elog("cannot read %s: %s", path, strerror(-err));
	return err;
}

int cmd_status(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "state-file", required_argument, NULL, OPT_STATE_FILE },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	const char *path = GUARD_STATE_DEFAULT;
	struct guard_status *st;
	bool json = false, alive;
	int opt;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+:jh", opts, NULL)) != -1) {
		switch (opt) {
		case OPT_STATE_FILE:
			path = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			status_usage(stdout);
			return 0;
		default:
			attach_opts__bad_option("status", opt, argv);
			return 2;
		}
	}
	if (optind < argc) {
		elog("status: unexpected argument '%s'", argv[optind]);
		return 2;
	}
	st = malloc(sizeof(*st));
	if (!st) {
		elog("out of memory");
		return 1;
	}
	if (read_state(path, st)) {
		free(st);
		return 1;
	}
	alive = guard_state__daemon_alive(st->pid);
	if (json)
		print_json(st, alive);
	else
		print_text(st, alive);
	free(st);
	return alive ? 0 : 1;
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
		elog("resume: cannot thaw %s: %s", s->cgroup, strerror(-err));
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
	printf("resumed %u%s%s%s\n", pid, s ? " (" : "", s ? s->comm : "", s ? ")" : "");
	return 0;
}

static int resume_all(const struct guard_status *st)
{
	int failed = 0;
	size_t i;

	for (i = 0; i < st->n_stopped; i++) {
		if (!guard_state__still_held(&st->stopped[i]))
			continue;
		if (resume_one(st->stopped[i].pid, &st->stopped[i]))
			failed++;
	}
	return failed;
}

int cmd_resume(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "state-file", required_argument, NULL, OPT_STATE_FILE },
		{ "all", no_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{}
	};
	const char *path = GUARD_STATE_DEFAULT;
	struct guard_status *st;
	bool all = false, have_state;
	int opt, failed = 0, i;
	long pid;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+:ah", opts, NULL)) != -1) {
		switch (opt) {
		case OPT_STATE_FILE:
			path = optarg;
			break;
		case 'a':
			all = true;
			break;
		case 'h':
			resume_usage(stdout);
			return 0;
		default:
			attach_opts__bad_option("resume", opt, argv);
			return 2;
		}
	}
	if (all == (optind < argc)) {
		elog("resume: give PID... or --all");
		return 2;
	}
	for (i = optind; i < argc; i++) {
		if (parse_long(argv[i], 1, 0x7fffffff, &pid)) {
			elog("resume: '%s' is not a process id", argv[i]);
			return 2;
		}
	}
	st = malloc(sizeof(*st));
	if (!st) {
		elog("out of memory");
		return 1;
	}
	/* Without a state file single PIDs can still be continued. */
	have_state = all ? !read_state(path, st) : !guard_state__read(path, st);
	if (all && !have_state) {
		free(st);
		return 1;
	}
	if (!have_state)
		memset(st, 0, sizeof(*st));
	if (all)
		failed = resume_all(st);
	for (i = optind; i < argc; i++) {
		parse_long(argv[i], 1, 0x7fffffff, &pid);
		if (resume_one((uint32_t)pid, find_stopped(st, (uint32_t)pid)))
			failed++;
	}
	free(st);
	return failed ? 1 : 0;
}
