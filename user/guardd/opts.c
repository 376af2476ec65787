// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * umtrace guard's options: the config file first (--config), then the
 * command line on top of it, both through guard_config so that a key in
 * the file and its flag mean the same thing. Options only: what they set
 * up is the daemon's (guardd/daemon.c).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "guardd/daemon.h"
#include "guard/state.h"
#include "lib/log.h"
#include "lib/meminfo.h"
#include "lib/numa.h"
#include "lib/units.h"

enum {
	OPT_STATE_FILE = OPT_ATTACH__LAST,
	OPT_CONFIG,
	OPT_FLIGHT,
	OPT_NO_PIN,
	OPT_KEY,		/* OPT_KEY + i: key_flags[i] */
};

/*
 * The flags that set a guard_config key, as the file's line does: the
 * flag's name is the key's, with '-' for '_', unless key says another.
 */
static const struct key_flag {
	const char *name;
	const char *value;	/* a flag that takes none: what it sets */
	int val;		/* its short option; 0: OPT_KEY + its index */
	const char *key;
} key_flags[] = {
	{ .name = "floor" }, { .name = "low" }, { .name = "drop" }, { .name = "metric" },
	{ .name = "action" }, { .name = "scope" }, { .name = "protect" },
	{ .name = "dry-run", .value = "true", .val = 'n' }, { .name = "auto-resume" },
	{ .name = "on-stop" }, { .name = "postmortem-dir" }, { .name = "metrics-file" },
	{ .name = "torch", .value = "true" },
	{ .name = "no-torch", .value = "false", .key = "torch" },
	{ .name = "page-programs" },
	{ .name = "warn-eta" }, { .name = "on-warn" }, { .name = "warn-signal" },
};

#define N_KEY_FLAGS (sizeof(key_flags) / sizeof(key_flags[0]))

static const struct option attach_opts[] = { ATTACH_LONG_OPTS };

static const struct option daemon_opts[] = {
	{ "state-file", required_argument, NULL, OPT_STATE_FILE },
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "flight-seconds", required_argument, NULL, OPT_FLIGHT },
	{ "no-pin", no_argument, NULL, OPT_NO_PIN },
	{ "help", no_argument, NULL, 'h' },
	{}
};

#define N_OPTS (sizeof(attach_opts) / sizeof(attach_opts[0]) + N_KEY_FLAGS + \
		sizeof(daemon_opts) / sizeof(daemon_opts[0]))

#define SHORT_OPTS "+:" ATTACH_SHORT_OPTS "nh"

static void build_opts(struct option *opts)
{
	const struct key_flag *f;
	size_t n = 0, i;

	for (i = 0; i < sizeof(attach_opts) / sizeof(attach_opts[0]); i++)
		opts[n++] = attach_opts[i];
	for (i = 0; i < N_KEY_FLAGS; i++) {
		f = &key_flags[i];
		opts[n++] = (struct option){ f->name, f->value ? no_argument : required_argument,
					     NULL, f->val ? f->val : OPT_KEY + (int)i };
	}
	for (i = 0; i < sizeof(daemon_opts) / sizeof(daemon_opts[0]); i++)
		opts[n++] = daemon_opts[i];
}

static const struct key_flag *key_flag(int opt)
{
	size_t i;

	for (i = 0; i < N_KEY_FLAGS; i++)
		if (opt == (key_flags[i].val ? key_flags[i].val : OPT_KEY + (int)i))
			return &key_flags[i];
	return NULL;
}

/* The file's settings go under the flags: find --config before the rest. */
static int load_config(struct guard_opts *o, const struct option *opts, int argc, char **argv)
{
	char err[512];
	int opt;

	optind = 0;	/* glibc: start over, this argv is scanned twice */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, SHORT_OPTS, opts, NULL)) != -1) {
		if (opt != OPT_CONFIG)
			continue;
		if (guard_config__load(&o->cfg, optarg, err, sizeof(err))) {
			elog("%s", err);
			return -EINVAL;
		}
	}
	return 0;
}

static int parse_flags(struct guard_opts *o, const struct option *opts, int argc, char **argv)
{
	const struct key_flag *f;
	char err[512];
	uint64_t v;
	int opt, r;

	optind = 0;	/* glibc: start over, this argv is scanned twice */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, SHORT_OPTS, opts, NULL)) != -1) {
		r = attach_opts__parse(&o->ao, opt, optarg);
		if (r < 0)
			return -EINVAL;
		if (r)
			continue;
		f = key_flag(opt);
		if (f) {
			if (guard_config__set(&o->cfg, f->key ? f->key : f->name,
					      f->value ? f->value : optarg, err, sizeof(err))) {
				elog("%s", err);
				return -EINVAL;
			}
			continue;
		}
		switch (opt) {
		case OPT_CONFIG:
			break;
		case OPT_STATE_FILE:
			o->state_file = optarg;
			break;
		case OPT_FLIGHT:
			if (parse_duration_ms(optarg, &v) || v > 3600 * 1000) {
				elog("invalid --flight-seconds '%s': expected 0 to 1h", optarg);
				return -EINVAL;
			}
			o->flight_seconds = v / 1000;
			break;
		case OPT_NO_PIN:
			o->no_pin = true;
			break;
		case 'h':
			return 1;
		default:
			return attach_opts__bad_option("guard", opt, argv);
		}
	}
	if (optind < argc) {
		elog("guard: unexpected argument '%s'; see 'umtrace guard --help'", argv[optind]);
		return -EINVAL;
	}
	if (o->ao.n_pids) {
		elog("guard: -p is not a guard option; use --scope pid:PID[,PID...]");
		return -EINVAL;
	}
	return 0;
}

/* The file's libcuda list, unless the command line gave its own. */
static int take_libcuda(struct guard_opts *o)
{
	size_t i;

	if (o->ao.n_libcuda || !o->cfg.n_libcuda)
		return 0;
	o->ao.libcuda = calloc(o->cfg.n_libcuda, sizeof(*o->ao.libcuda));
	if (!o->ao.libcuda)
		return -ENOMEM;
	for (i = 0; i < o->cfg.n_libcuda; i++)
		o->ao.libcuda[i] = o->cfg.libcuda[i];
	o->ao.n_libcuda = o->cfg.n_libcuda;
	return 0;
}

/*
 * The built-ins, then what each entry is on this host: an operator's
 * exe: or cgroup: that is missing or that a user could write is refused
 * now, not found wanting at the moment it matters. Executables are
 * looked up in the host's root (pid 1's), where a container runs this.
 */
static int resolve_protect(struct guard_opts *o)
{
	char err[PATH_MAX + 256];
	int ret;

	o->cfg.protect.root = "/proc/1/root";
	if (protect__add_builtins(&o->cfg.protect)) {
		elog("out of memory");
		return -EINVAL;
	}
	ret = protect__resolve(&o->cfg.protect, true, err, sizeof(err));
	if (ret < 0) {
		elog("%s", err);
		return -EINVAL;
	}
	return 0;
}

int guard_opts__parse(struct guard_opts *o, int argc, char **argv)
{
	struct option opts[N_OPTS];
	struct numa_nodes nodes;
	struct meminfo m;
	char err[512];
	int r;

	attach_opts__init(&o->ao);
	guard_config__init(&o->cfg);
	o->state_file = GUARD_STATE_DEFAULT;
	o->flight_seconds = 300;
	build_opts(opts);
	r = load_config(o, opts, argc, argv);
	if (!r)
		r = parse_flags(o, opts, argc, argv);
	if (r)
		return r;
	/* Percentages are of host RAM; session start reports bad nodes. */
	if (numa__device_nodes(o->ao.device_nodes, &nodes, err, sizeof(err)))
		memset(&nodes, 0, sizeof(nodes));
	if (meminfo__read_host(&m, &nodes)) {
		elog("cannot read /proc/meminfo or a device node's meminfo");
		return -EINVAL;
	}
	if (guard_config__policy(&o->cfg, m.total, &o->pol, err, sizeof(err))) {
		elog("%s", err);
		return -EINVAL;
	}
	o->action = o->cfg.action;
	o->dry_run = o->cfg.dry_run;
	o->on_stop = o->cfg.on_stop;
	o->warn_eta_ms = o->cfg.warn_eta_ms;
	o->on_warn = o->cfg.on_warn;
	o->warn_signal = o->cfg.warn_signal;
	if (!o->warn_eta_ms && (o->on_warn || o->warn_signal)) {
		elog("--%s needs --warn-eta: when to warn", o->on_warn ? "on-warn" : "warn-signal");
		return -EINVAL;
	}
	o->postmortem_dir = o->cfg.postmortem_dir;
	o->metrics_file = o->cfg.metrics_file;
	/* Naming a libc10 asks for its hook. */
	o->torch = o->cfg.torch || o->ao.n_libc10;
	if (resolve_protect(o))
		return -EINVAL;
	if (take_libcuda(o)) {
		elog("out of memory");
		return -EINVAL;
	}
	return 0;
}

void guard_opts__free(struct guard_opts *o)
{
	guard_config__free(&o->cfg);
	attach_opts__free(&o->ao);
}
