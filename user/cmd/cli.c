// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <string.h>
#include "cmd/cli.h"
#include "lib/log.h"
#include "guard/policy.h"
#include "lib/meminfo.h"
#include "lib/units.h"

#define MIN_INTERVAL_MS	100
#define MAX_INTERVAL_MS	3600000

/* The plain options several commands take, each where struct cli points. */
static const struct option shared[] = {
	{ "json", no_argument, NULL, 'j' },
	{ "state-file", required_argument, NULL, OPT_STATE_FILE },
	{ "output", required_argument, NULL, 'o' },
	{ "force", no_argument, NULL, OPT_FORCE },
	{ "duration", required_argument, NULL, 'd' },
	{ "interval", required_argument, NULL, 'i' },
	{ "stack", required_argument, NULL, OPT_STACK },
};

static bool takes_shared(const struct cli *c, int opt)
{
	switch (opt) {
	case 'j':
		return c->json;
	case OPT_STATE_FILE:
		return c->state_file;
	case 'o':
		return c->output;
	case OPT_FORCE:
		return c->force;
	case 'd':
		return c->duration_ms;
	case 'i':
		return c->interval_ms;
	case OPT_STACK:
		return c->stack;
	default:
		return false;
	}
}

/* The short form of o, if it has one, onto s. */
static void add_short(char *s, const struct option *o)
{
	size_t n = strlen(s);

	if (o->val >= 0x100)
		return;
	s[n++] = (char)o->val;
	if (o->has_arg == required_argument)
		s[n++] = ':';
	s[n] = '\0';
}

/* The attach options, the shared ones, its own and --help: getopt_long()'s tables. */
static int build(const struct cli *c, struct option *opts, char *shortopts, size_t len)
{
	static const struct option attach[] = { ATTACH_LONG_OPTS };
	static const struct option help = { "help", no_argument, NULL, 'h' };
	size_t n = 0, i;
	int w;

	/* '+': COMMAND's options are its own; ':': a missing value told apart. */
	w = snprintf(shortopts, len, "%s%s%s%s", c->in_order ? "+" : "",
		     c->getopt_errors ? "" : ":", c->ao ? ATTACH_SHORT_OPTS : "",
		     c->shortopts ? c->shortopts : "");
	/* Each shared option adds at most two characters, --help one. */
	if (w < 0 || (size_t)w + 2 * sizeof(shared) / sizeof(shared[0]) + 1 >= len)
		return -E2BIG;
	for (i = 0; c->ao && i < sizeof(attach) / sizeof(attach[0]); i++)
		opts[n++] = attach[i];
	for (i = 0; i < sizeof(shared) / sizeof(shared[0]); i++) {
		if (!takes_shared(c, shared[i].val))
			continue;
		opts[n++] = shared[i];
		add_short(shortopts, &shared[i]);
	}
	for (i = 0; c->longopts && c->longopts[i].name; i++) {
		if (n >= CLI_MAX_OPTS - 2)
			return -E2BIG;
		opts[n++] = c->longopts[i];
	}
	opts[n++] = help;
	add_short(shortopts, &help);
	memset(&opts[n], 0, sizeof(opts[n]));
	return 0;
}

/* 1 if opt is one of the shared options c takes, -EINVAL if its value is not. */
static int take_shared(const struct cli *c, int opt, const char *arg)
{
	if (!takes_shared(c, opt))
		return 0;
	switch (opt) {
	case 'j':
		*c->json = true;
		return 1;
	case OPT_STATE_FILE:
		*c->state_file = arg;
		return 1;
	case 'o':
		if (!*arg) {
			elog("%s: -o needs a file name", c->name);
			return -EINVAL;
		}
		*c->output = arg;
		return 1;
	case OPT_FORCE:
		*c->force = true;
		return 1;
	case 'd':
		return cli__duration(arg, c->duration_ms) ?: 1;
	case 'i':
		return cli__interval(arg, c->interval_ms) ?: 1;
	case OPT_STACK:
		return cli__stack(arg, c->stack) ?: 1;
	}
	return 0;
}

static int take(const struct cli *c, int opt, char **argv)
{
	int r;

	if (c->ao) {
		r = attach_opts__parse(c->ao, opt, optarg);
		if (r)
			return r < 0 ? -EINVAL : 0;
	}
	r = take_shared(c, opt, optarg);
	if (r)
		return r < 0 ? r : 0;
	switch (opt) {
	case 'h':
		c->usage(stdout);
		return 1;
	case ':':
	case '?':
		if (!c->getopt_errors)
			return attach_opts__bad_option(c->name, opt, argv);
		c->usage(stderr);
		return -EINVAL;
	default:
		return c->option ? c->option(c->ctx, opt, optarg) : 0;
	}
}

int cli__parse(const struct cli *c, int argc, char **argv)
{
	struct option opts[CLI_MAX_OPTS];
	char shortopts[64];
	int opt, r;

	if (build(c, opts, shortopts, sizeof(shortopts))) {
		elog("%s: too many options", c->name);
		return -EINVAL;
	}
	optind = 0;	/* glibc: start over, with this optstring's ordering */
	opterr = c->getopt_errors;	/* else one line of our own instead of getopt's two */
	while ((opt = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
		r = take(c, opt, argv);
		if (r)
			return r;
		if (c->seen)
			c->seen(c->ctx, opt);
	}
	return 0;
}

int cli__exit(struct attach_opts *ao, int err)
{
	if (ao)
		attach_opts__free(ao);
	return err > 0 ? 0 : 2;
}

int cli__duration(const char *arg, uint64_t *ms)
{
	if (parse_duration_ms(arg, ms) || !*ms) {
		elog("invalid --duration '%s': expected e.g. 30s, 5m, 1h", arg);
		return -EINVAL;
	}
	return 0;
}

int cli__interval(const char *arg, uint64_t *ms)
{
	if (parse_duration_ms(arg, ms) || *ms < MIN_INTERVAL_MS || *ms > MAX_INTERVAL_MS) {
		elog("invalid --interval '%s': expected 100ms to 1h", arg);
		return -EINVAL;
	}
	return 0;
}

int cli__floor_of(const char *arg, uint64_t host_total, uint64_t *bytes)
{
	char err[256];

	if (guard_policy__parse_threshold("--floor", arg, host_total, bytes, err, sizeof(err))) {
		elog("%s", err);
		return -EINVAL;
	}
	return 0;
}

int cli__floor(const char *arg, const struct numa_nodes *nodes, uint64_t *bytes)
{
	struct meminfo m;

	if (meminfo__read_host(&m, nodes)) {
		elog("cannot read /proc/meminfo or a device node's meminfo");
		return -EINVAL;
	}
	return cli__floor_of(arg, m.total, bytes);
}

int cli__stack(const char *arg, enum stack_mode *mode)
{
	if (stack_mode__parse(arg, mode)) {
		elog("invalid --stack '%s': expected fp, dwarf or auto", arg);
		return -EINVAL;
	}
	return 0;
}

int cli__no_operands(const char *cmd, int argc, char **argv)
{
	if (optind < argc) {
		elog("%s: unexpected argument '%s'", cmd, argv[optind]);
		return -EINVAL;
	}
	return 0;
}

int cli__one_recording(const char *cmd, int argc, char **argv, const char **file,
		       const char *out, const char *out_hint)
{
	if (optind >= argc) {
		elog("%s: no recording given; see 'umtrace %s --help'", cmd, cmd);
		return -EINVAL;
	}
	if (optind + 1 < argc) {
		elog("%s: unexpected argument '%s'; give one recording", cmd, argv[optind + 1]);
		return -EINVAL;
	}
	*file = argv[optind];
	if (!out) {
		elog("%s: no output given: -o %s ('-' for standard output)", cmd, out_hint);
		return -EINVAL;
	}
	return 0;
}

int cli__pids_or_command(const struct attach_opts *ao, char **cmd)
{
	if (cmd && ao->n_pids) {
		elog("give either -p PID or a COMMAND, not both");
		return -EINVAL;
	}
	return 0;
}

int cli__out_open(struct out_file *out, const char *path, bool force)
{
	int err = out_file__open(out, path, force);

	if (err)
		elog("cannot create %s: %s%s", path, strerror(-err),
		     err == -EEXIST ? " (--force replaces it)" : "");
	return err;
}

int cli__out_commit(struct out_file *out, int err)
{
	if (!err)
		err = out_file__commit(out);
	if (!err)
		return 0;
	elog("cannot write %s: %s", out_file__name(out), strerror(-err));
	out_file__discard(out);
	return err;
}

struct replay_opts cli__replay_opts(const struct attach_opts *ao, bool platform_given,
				    const struct replay_hooks *hooks, void *ctx)
{
	return (struct replay_opts){
		.pids = ao->pids,
		.n_pids = ao->n_pids,
		.platform_given = platform_given,
		.platform = ao->platform,
		.hooks = hooks,
		.ctx = ctx,
	};
}
