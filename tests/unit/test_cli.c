// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * cmd/cli.c: the one option loop every subcommand runs, the shared
 * options it adds, and the checks that recur.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "cmd/cli.h"

enum { OPT_OWN = OPT_CLI__LAST };

struct args {
	struct attach_opts ao;
	bool json, force;
	const char *state_file, *output;
	int own, n_usage, n_seen;
	int seen[16];
	const char *value;
};

static struct args *usage_of;

static void usage(FILE *f)
{
	(void)f;
	usage_of->n_usage++;
}

static int option(void *ctx, int opt, const char *arg)
{
	struct args *a = ctx;

	if (opt == 'x' && !strcmp(arg, "bad"))
		return -EINVAL;
	a->own = opt;
	a->value = arg;
	return 0;
}

static void seen(void *ctx, int opt)
{
	struct args *a = ctx;

	if (a->n_seen < 16)
		a->seen[a->n_seen++] = opt;
}

static const struct option own_opts[] = {
	{ "xval", required_argument, NULL, 'x' },
	{ "own", no_argument, NULL, OPT_OWN },
	{}
};

/* argv as main() hands it to a subcommand: its name first. */
static int parse(struct args *a, struct cli *c, int argc, char **argv)
{
	memset(a, 0, sizeof(*a));
	attach_opts__init(&a->ao);
	usage_of = a;
	c->name = "test";
	c->shortopts = "x:";
	c->longopts = own_opts;
	c->usage = usage;
	c->option = option;
	c->seen = seen;
	c->ctx = a;
	return cli__parse(c, argc, argv);
}

static void test_own_and_attach(void)
{
	char *argv[] = { "test", "-p", "12,34", "--xval", "v", "--own", "-v", "file", NULL };
	struct cli c = { .ao = NULL };
	struct args a;

	c.ao = &a.ao;
	CHECK_EQ(parse(&a, &c, 8, argv), 0, "parse");
	CHECK_EQ(a.ao.n_pids, 2, "pids");
	CHECK_EQ(a.ao.pids[1], 34, "second pid");
	CHECK_EQ(a.own, OPT_OWN, "own option");
	CHECK(a.value == NULL, "own", "no value for --own");
	CHECK_EQ(optind, 7, "operand");
	/* seen: every option, the attach options' too, in order. */
	CHECK_EQ(a.n_seen, 4, "seen");
	CHECK_EQ(a.seen[0], 'p', "seen -p");
	CHECK_EQ(a.seen[1], 'x', "seen --xval");
	CHECK_EQ(a.seen[3], 'v', "seen -v");
	attach_opts__free(&a.ao);
}

static void test_attach_only_when_asked(void)
{
	char *argv[] = { "test", "-p", "1", NULL };
	struct cli c = {};
	struct args a;

	CHECK_EQ(parse(&a, &c, 3, argv), -EINVAL, "-p without attach options");
	CHECK_EQ(a.ao.n_pids, 0, "no pid taken");
}

static void test_shared_options(void)
{
	char *argv[] = { "test", "-j", "--state-file", "/s", "-o", "out", "--force", "-d", "2m",
			 "-i100ms", "--stack", "fp", NULL };
	char *bad[] = { "test", "-i", "50ms", NULL };
	enum stack_mode stack = STACK_AUTO;
	uint64_t duration = 0, interval = 0;
	struct cli c = {};
	struct args a;

	c.json = &a.json;
	c.state_file = &a.state_file;
	c.output = &a.output;
	c.force = &a.force;
	c.duration_ms = &duration;
	c.interval_ms = &interval;
	c.stack = &stack;
	CHECK_EQ(parse(&a, &c, 12, argv), 0, "parse");
	CHECK_EQ(duration, 120000, "-d 2m");
	CHECK_EQ(interval, 100, "-i100ms");
	CHECK_EQ(stack, STACK_FP, "--stack fp");
	CHECK(a.json, "json", "-j not taken");
	CHECK(a.force, "force", "--force not taken");
	CHECK(a.state_file && !strcmp(a.state_file, "/s"), "state", "%s", a.state_file);
	CHECK(a.output && !strcmp(a.output, "out"), "output", "%s", a.output);
	CHECK_EQ(a.own, 0, "none reached the command");
	CHECK_EQ(parse(&a, &c, 3, bad), -EINVAL, "-i 50ms");
}

static void test_shared_refused(void)
{
	char *json[] = { "test", "--json", NULL };
	char *empty[] = { "test", "-o", "", NULL };
	struct cli c = {};
	struct args a;

	/* Not asked for: unknown, not silently taken. */
	CHECK_EQ(parse(&a, &c, 2, json), -EINVAL, "--json not asked for");
	CHECK(!a.json, "json", "taken anyway");
	c.output = &a.output;
	c.force = &a.force;
	CHECK_EQ(parse(&a, &c, 3, empty), -EINVAL, "-o ''");
	CHECK(!a.output, "output", "empty output taken");
}

static void test_help_and_errors(void)
{
	char *help[] = { "test", "--xval", "v", "--help", "--own", NULL };
	char *missing[] = { "test", "--xval", NULL };
	char *unknown[] = { "test", "--nope", NULL };
	char *bad[] = { "test", "-x", "bad", "--own", NULL };
	struct cli c = {};
	struct args a;

	CHECK_EQ(parse(&a, &c, 5, help), 1, "--help");
	CHECK_EQ(a.n_usage, 1, "usage printed once");
	CHECK(a.own == 'x', "help", "stopped at --help");
	CHECK_EQ(parse(&a, &c, 2, missing), -EINVAL, "missing value");
	CHECK_EQ(parse(&a, &c, 2, unknown), -EINVAL, "unknown option");
	CHECK_EQ(a.n_usage, 0, "one line of ours, no usage");
	CHECK_EQ(parse(&a, &c, 4, bad), -EINVAL, "the command refused");
	CHECK_EQ(a.own, 0, "stopped at the refusal");
	c.getopt_errors = true;
	CHECK_EQ(parse(&a, &c, 2, unknown), -EINVAL, "getopt's errors");
	CHECK_EQ(a.n_usage, 1, "usage after getopt's line");
}

/* In order: COMMAND's own options stay COMMAND's. */
static void test_in_order(void)
{
	char *argv[] = { "test", "--own", "cmd", "--xval", "v", NULL };
	struct cli c = {};
	struct args a;

	c.in_order = true;
	CHECK_EQ(parse(&a, &c, 5, argv), 0, "in order");
	CHECK_EQ(optind, 2, "COMMAND starts");
	CHECK(a.value == NULL, "in order", "took COMMAND's --xval");
	c.in_order = false;
	CHECK_EQ(parse(&a, &c, 5, argv), 0, "permuted");
	CHECK(a.value && !strcmp(a.value, "v"), "permuted", "--xval not taken");
	CHECK_EQ(optind, 4, "the operand moved last");
}

static void test_checks(void)
{
	char *one[] = { "test", "rec", NULL };
	char *two[] = { "test", "rec", "more", NULL };
	struct attach_opts ao;
	const char *file = NULL;
	enum stack_mode mode;
	uint64_t ms = 0, bytes = 0;

	CHECK_EQ(cli__duration("30s", &ms), 0, "30s");
	CHECK_EQ(ms, 30000, "30s in ms");
	CHECK_EQ(cli__duration("0", &ms), -EINVAL, "zero duration");
	CHECK_EQ(cli__duration("5x", &ms), -EINVAL, "junk duration");
	CHECK_EQ(cli__interval("100ms", &ms), 0, "100ms");
	CHECK_EQ(cli__interval("99ms", &ms), -EINVAL, "under 100ms");
	CHECK_EQ(cli__interval("1h", &ms), 0, "1h");
	CHECK_EQ(cli__interval("61m", &ms), -EINVAL, "over 1h");
	/* A percentage of host RAM as given: the device nodes' left out by the caller. */
	CHECK_EQ(cli__floor_of("50%", 8ULL << 30, &bytes), 0, "50%");
	CHECK_EQ(bytes, 4ULL << 30, "50% of 8G");
	CHECK_EQ(cli__floor_of("2G", 1ULL << 30, &bytes), 0, "a size");
	CHECK_EQ(bytes, 2ULL << 30, "2G whatever host RAM is");
	CHECK_EQ(cli__floor_of("50%", 0, &bytes), -EINVAL, "50% of nothing");
	CHECK_EQ(cli__stack("dwarf", &mode), 0, "dwarf");
	CHECK_EQ(cli__stack("bogus", &mode), -EINVAL, "bogus stack");
	optind = 1;
	CHECK_EQ(cli__no_operands("test", 2, one), -EINVAL, "an operand");
	CHECK_EQ(cli__no_operands("test", 1, one), 0, "none");
	CHECK_EQ(cli__one_recording("test", 2, one, &file, "out", "OUT"), 0, "one");
	CHECK(file && !strcmp(file, "rec"), "recording", "%s", file);
	CHECK_EQ(cli__one_recording("test", 3, two, &file, "out", "OUT"), -EINVAL, "two");
	CHECK_EQ(cli__one_recording("test", 1, one, &file, "out", "OUT"), -EINVAL, "none");
	CHECK_EQ(cli__one_recording("test", 2, one, &file, NULL, "OUT"), -EINVAL, "no -o");
	attach_opts__init(&ao);
	CHECK_EQ(cli__pids_or_command(&ao, one), 0, "COMMAND alone");
	ao.n_pids = 1;
	CHECK_EQ(cli__pids_or_command(&ao, NULL), 0, "-p alone");
	CHECK_EQ(cli__pids_or_command(&ao, one), -EINVAL, "-p and COMMAND");
	CHECK_EQ(cli__exit(NULL, 1), 0, "--help exits 0");
	ao.libcuda = calloc(1, sizeof(*ao.libcuda));
	ao.n_libcuda = 1;
	CHECK_EQ(cli__exit(&ao, -EINVAL), 2, "usage error exits 2");
	CHECK(!ao.libcuda && !ao.n_libcuda, "exit", "attach options not freed");
}

int main(void)
{
	RUN_SUBTEST(test_own_and_attach);
	RUN_SUBTEST(test_attach_only_when_asked);
	RUN_SUBTEST(test_shared_options);
	RUN_SUBTEST(test_shared_refused);
	RUN_SUBTEST(test_help_and_errors);
	RUN_SUBTEST(test_in_order);
	RUN_SUBTEST(test_checks);
	return CHECK_EXIT();
}
