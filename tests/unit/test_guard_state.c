// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The guard's state file: names that would add a line or shift a field
 * go through as tokens and come back as the bytes they were (resume
 * thaws the cgroup by its path).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "guard/state.h"
#include "lib/out_file.h"

static char dir[] = "/tmp/umtrace-test-state-XXXXXX";

static struct guard_status *status_new(void)
{
	struct guard_status *st = calloc(1, sizeof(*st));

	if (!st)
		return NULL;
	st->pid = 4242;
	snprintf(st->metric, sizeof(st->metric), "available");
	snprintf(st->action, sizeof(st->action), "stop");
	st->floor = 1 << 30;
	return st;
}

static void add_stopped(struct guard_status *st, const char *comm, const char *cgroup)
{
	struct guard_stopped *s = &st->stopped[st->n_stopped];

	s->pid = 100 + (uint32_t)st->n_stopped++;
	snprintf(s->action, sizeof(s->action), "freeze");
	snprintf(s->reason, sizeof(s->reason), "floor");
	s->when = 1700000000;
	snprintf(s->comm, sizeof(s->comm), "%s", comm);
	snprintf(s->cgroup, sizeof(s->cgroup), "%s", cgroup);
}

/* As the daemon writes it (guardd/report.c): the text, replaced at once. */
static int write_state(const char *path, const struct guard_status *st)
{
	size_t len;
	char *buf = guard_state__format(st, &len);
	int err;

	if (!buf)
		return -1;
	err = out_file__replace(path, buf, len, 0600);
	free(buf);
	return err;
}

static void test_hostile_names(void)
{
	const char *path = check_path(dir, "guard.state");
	struct guard_status *st = status_new(), *got = malloc(sizeof(*got));
	size_t i;

	if (!CHECK(st && got, "alloc", "out of memory"))
		goto out;
	add_stopped(st, "a\n\"b=1\x1b[31m", "/user.slice/job 1/\xff\x01odd");
	add_stopped(st, "x\naction evil\nmetric evil", "/a\nstopped 1 stop floor 0 - y");
	add_stopped(st, "back\\slash \\x41", "");
	add_stopped(st, "", "/plain");
	CHECK_EQ(write_state(path, st), 0, "write");
	if (!CHECK_EQ(guard_state__read(path, got), 0, "read"))
		goto out;
	CHECK(!strcmp(got->action, "stop") && !strcmp(got->metric, "available"),
	      "no forged key", "action '%s' metric '%s'", got->action, got->metric);
	CHECK_EQ(got->floor, 1 << 30, "floor");
	if (!CHECK_EQ(got->n_stopped, st->n_stopped, "no forged line"))
		goto out;
	for (i = 0; i < st->n_stopped; i++) {
		CHECK(!strcmp(got->stopped[i].comm, st->stopped[i].comm), "comm back",
		      "%zu: '%s'", i, got->stopped[i].comm);
		CHECK(!strcmp(got->stopped[i].cgroup, st->stopped[i].cgroup), "cgroup back",
		      "%zu: '%s'", i, got->stopped[i].cgroup);
		CHECK_EQ(got->stopped[i].pid, st->stopped[i].pid, "pid");
		CHECK_EQ(got->stopped[i].when, st->stopped[i].when, "when");
		CHECK(!strcmp(got->stopped[i].action, "freeze") &&
		      !strcmp(got->stopped[i].reason, "floor"), "fields in place", "%zu", i);
	}
out:
	unlink(path);
	free(st);
	free(got);
}

/* The slide's keys come back; without one, none is written and none read. */
static void test_slide(void)
{
	const char *path = check_path(dir, "slide.state");
	struct guard_status *st = status_new(), *got = malloc(sizeof(*got));
	size_t len;
	char *text = NULL;

	if (!CHECK(st && got, "alloc", "out of memory"))
		goto out;
	text = guard_state__format(st, &len);
	CHECK(text && !strstr(text, "slide") && !strstr(text, "seconds_to_floor"), "none",
	      "got:\n%s", text ? text : "(null)");
	st->slide_horizon = 900;
	st->slide_per_hour = 1ULL << 30;
	st->seconds_to_floor = 460800;
	CHECK_EQ(write_state(path, st), 0, "write");
	if (!CHECK_EQ(guard_state__read(path, got), 0, "read"))
		goto out;
	CHECK_EQ(got->slide_horizon, 900, "horizon");
	CHECK_EQ(got->slide_per_hour, 1ULL << 30, "per hour");
	CHECK_EQ(got->seconds_to_floor, 460800, "seconds");
out:
	unlink(path);
	free(text);
	free(st);
	free(got);
}

/* --warn-eta: the jobs warned come back with their names' bytes. */
static void test_warned(void)
{
	const char *path = check_path(dir, "warned.state");
	struct guard_status *st = status_new(), *got = malloc(sizeof(*got));
	size_t len;
	char *text = NULL;

	if (!CHECK(st && got, "alloc", "out of memory"))
		goto out;
	text = guard_state__format(st, &len);
	CHECK(text && !strstr(text, "warn"), "none without --warn-eta", "got:\n%s",
	      text ? text : "(null)");
	st->warn_eta = 1800;
	st->warnings = 3;
	st->n_warned = 2;
	st->warned[0] = (struct guard_warned){ .pid = 77, .when = 1700000000, .eta = 1200 };
	snprintf(st->warned[0].signal, sizeof(st->warned[0].signal), "USR1");
	snprintf(st->warned[0].comm, sizeof(st->warned[0].comm), "a job\nstopped 1 x");
	st->warned[1] = (struct guard_warned){ .pid = 78, .when = 1700000001, .eta = 5 };
	snprintf(st->warned[1].signal, sizeof(st->warned[1].signal), "-");
	snprintf(st->warned[1].comm, sizeof(st->warned[1].comm), "python3");
	CHECK_EQ(write_state(path, st), 0, "write");
	if (!CHECK_EQ(guard_state__read(path, got), 0, "read"))
		goto out;
	CHECK_EQ(got->warn_eta, 1800, "warn_eta");
	CHECK_EQ(got->warnings, 3, "warnings");
	CHECK_EQ(got->n_stopped, 0, "no line forged");
	if (!CHECK_EQ(got->n_warned, 2, "warned"))
		goto out;
	CHECK(got->warned[0].pid == 77 && got->warned[0].when == 1700000000 &&
	      got->warned[0].eta == 1200 && !strcmp(got->warned[0].signal, "USR1") &&
	      !strcmp(got->warned[0].comm, "a job\nstopped 1 x"), "first",
	      "%u '%s' '%s'", got->warned[0].pid, got->warned[0].signal, got->warned[0].comm);
	CHECK(got->warned[1].eta == 5 && !strcmp(got->warned[1].signal, "-") &&
	      !strcmp(got->warned[1].comm, "python3"), "second", "'%s'", got->warned[1].comm);
out:
	unlink(path);
	free(text);
	free(st);
	free(got);
}

/* A file an older guard wrote: plain names read the same. */
static void test_plain_names(void)
{
	static const char text[] = "umtrace-guard-state 1\npid 7\naction stop\n"
		"stopped 42 stop admission 1700000000 /user.slice/job.scope my job\n"
		"stopped 43 dry-run floor 1700000001 - python3\n";
	const char *path = check_path(dir, "old.state");
	struct guard_status *got = malloc(sizeof(*got));
	FILE *f = fopen(path, "w");

	if (!CHECK(got && f, "setup", "failed"))
		goto out;
	fputs(text, f);
	fclose(f);
	f = NULL;
	if (!CHECK_EQ(guard_state__read(path, got), 0, "read") ||
	    !CHECK_EQ(got->n_stopped, 2, "stopped"))
		goto out;
	CHECK(!strcmp(got->stopped[0].comm, "my job") &&
	      !strcmp(got->stopped[0].cgroup, "/user.slice/job.scope"), "first",
	      "'%s' '%s'", got->stopped[0].comm, got->stopped[0].cgroup);
	CHECK(!strcmp(got->stopped[1].comm, "python3") && !got->stopped[1].cgroup[0],
	      "no cgroup", "'%s' '%s'", got->stopped[1].comm, got->stopped[1].cgroup);
out:
	if (f)
		fclose(f);
	unlink(path);
	free(got);
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	RUN_SUBTEST(test_hostile_names);
	RUN_SUBTEST(test_slide);
	RUN_SUBTEST(test_warned);
	RUN_SUBTEST(test_plain_names);
	rmdir(dir);
	return CHECK_EXIT();
}
