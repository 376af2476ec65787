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
#include "guardd/guard.h"
#include "guard/state.h"
#include "lib/log.h"
#include "lib/meminfo.h"
#include "lib/numa.h"
#include "lib/units.h"

enum {
	OPT_FLOOR = OPT_ATTACH__LAST,
	OPT_LOW,
	OPT_DROP,
	OPT_METRIC,
	OPT_ACTION,
	OPT_SCOPE,
	OPT_PROTECT,
	OPT_AUTO_RESUME,
	OPT_ON_STOP,
	OPT_POSTMORTEM,
	OPT_METRICS_FILE,
	OPT_STATE_FILE,
	OPT_CONFIG,
	OPT_FLIGHT,
	OPT_NO_PIN,
	OPT_TORCH,
	OPT_NO_TORCH,
	OPT_PAGE_PROGRAMS,
};

static const struct option opts[] = {
	ATTACH_LONG_OPTS,
	{ "floor", required_argument, NULL, OPT_FLOOR },
	{ "low", required_argument, NULL, OPT_LOW },
	{ "drop", required_argument, NULL, OPT_DROP },
	{ "metric", required_argument, NULL, OPT_METRIC },
	{ "action", required_argument, NULL, OPT_ACTION },
	{ "scope", required_argument, NULL, OPT_SCOPE },
	{ "protect", required_argument, NULL, OPT_PROTECT },
	{ "dry-run", no_argument, NULL, 'n' },
	{ "auto-resume", required_argument, NULL, OPT_AUTO_RESUME },
	{ "on-stop", required_argument, NULL, OPT_ON_STOP },
	{ "postmortem-dir", required_argument, NULL, OPT_POSTMORTEM },
	{ "metrics-file", required_argument, NULL, OPT_METRICS_FILE },
	{ "state-file", required_argument, NULL, OPT_STATE_FILE },
	{ "config", required_argument, NULL, OPT_CONFIG },
	{ "flight-seconds", required_argument, NULL, OPT_FLIGHT },
	{ "no-pin", no_argument, NULL, OPT_NO_PIN },
	{ "torch", no_argument, NULL, OPT_TORCH },
	{ "no-torch", no_argument, NULL, OPT_NO_TORCH },
	{ "page-programs", required_argument, NULL, OPT_PAGE_PROGRAMS },
	{ "help", no_argument, NULL, 'h' },
	{}
};

#define SHORT_OPTS "+:" ATTACH_SHORT_OPTS "nh"

/* The file's settings go under the flags: find --config before the rest. */
static int load_config(struct guard_opts *o, int argc, char **argv)
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

static const char *config_key(int opt)
{
	switch (opt) {
	case OPT_FLOOR: return "floor";
	case OPT_LOW: return "low";
	case OPT_DROP: return "drop";
	case OPT_METRIC: return "metric";
	case OPT_ACTION: return "action";
	case OPT_SCOPE: return "scope";
	case OPT_PROTECT: return "protect";
	case 'n': return "dry_run";
	case OPT_AUTO_RESUME: return "auto_resume";
	case OPT_ON_STOP: return "on_stop";
	case OPT_POSTMORTEM: return "postmortem_dir";
	case OPT_METRICS_FILE: return "metrics_file";
	case OPT_TORCH: return "torch";
	case OPT_NO_TORCH: return "torch";
	case OPT_PAGE_PROGRAMS: return "page_programs";
	default: return NULL;
	}
}

static int parse_flags(struct guard_opts *o, int argc, char **argv)
{
	const char *key;
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
		key = config_key(opt);
		if (key) {
			if (guard_config__set(&o->cfg, key, opt == 'n' || opt == OPT_TORCH ? "true" :
					      opt == OPT_NO_TORCH ? "false" : optarg, err, sizeof(err))) {
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
	struct numa_nodes nodes;
	struct meminfo m;
	char err[512];
	int r;

	attach_opts__init(&o->ao);
	guard_config__init(&o->cfg);
	o->state_file = GUARD_STATE_DEFAULT;
	o->flight_seconds = 300;
	r = load_config(o, argc, argv);
	if (!r)
		r = parse_flags(o, argc, argv);
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
