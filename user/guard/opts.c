// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * umtrace guard's options: the config file first (--config), then the
 * command line on top of it, both through guard_config so that a key in
 * the file and its flag mean the same thing.
 */
#include <errno.h>
#include <getopt.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cmd/commands.h"
#include "rec/flight_recorder.h"
#include "guard/guard.h"
#include "guard/state.h"
#include "lib/log.h"
#include "lib/meminfo.h"
#include "lib/numa.h"
#include "stacks/symbolize.h"
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
	{ "help", no_argument, NULL, 'h' },
	{}
};

#define SHORT_OPTS "+:" ATTACH_SHORT_OPTS "nh"

/* The file's settings go under the flags: find --config before the rest. */
static int load_config(struct guard *g, int argc, char **argv)
{
	char err[512];
	int opt;

	optind = 0;	/* glibc: start over, this argv is scanned twice */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, SHORT_OPTS, opts, NULL)) != -1) {
		if (opt != OPT_CONFIG)
			continue;
		if (guard_config__load(&g->cfg, optarg, err, sizeof(err))) {
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
	default: return NULL;
	}
}

static int parse_flags(struct guard *g, int argc, char **argv)
{
	const char *key;
	char err[512];
	uint64_t v;
	int opt, r;

	optind = 0;	/* glibc: start over, this argv is scanned twice */
	opterr = 0;
	while ((opt = getopt_long(argc, argv, SHORT_OPTS, opts, NULL)) != -1) {
		r = attach_opts__parse(&g->ao, opt, optarg);
		if (r < 0)
			return -EINVAL;
		if (r)
			continue;
		key = config_key(opt);
		if (key) {
			if (guard_config__set(&g->cfg, key, opt == 'n' ? "true" : optarg,
					      err, sizeof(err))) {
				elog("%s", err);
				return -EINVAL;
			}
			continue;
		}
		switch (opt) {
		case OPT_CONFIG:
			break;
		case OPT_STATE_FILE:
			g->opt.state_file = optarg;
			break;
		case OPT_FLIGHT:
			if (parse_duration_ms(optarg, &v) || v > 3600 * 1000) {
				elog("invalid --flight-seconds '%s': expected 0 to 1h", optarg);
				return -EINVAL;
			}
			g->opt.flight_seconds = v / 1000;
			break;
		case OPT_NO_PIN:
			g->opt.no_pin = true;
			break;
		case 'h':
			guard_usage(stdout);
			return 1;
		default:
			return attach_opts__bad_option("guard", opt, argv);
		}
	}
	if (optind < argc) {
		elog("guard: unexpected argument '%s'; see 'umtrace guard --help'", argv[optind]);
		return -EINVAL;
	}
	if (g->ao.n_pids) {
		elog("guard: -p is not a guard option; use --scope pid:PID[,PID...]");
		return -EINVAL;
	}
	return 0;
}

/* The file's libcuda list, unless the command line gave its own. */
static int take_libcuda(struct guard *g)
{
	size_t i;

	if (g->ao.n_libcuda || !g->cfg.n_libcuda)
		return 0;
	g->ao.libcuda = calloc(g->cfg.n_libcuda, sizeof(*g->ao.libcuda));
	if (!g->ao.libcuda)
		return -ENOMEM;
	for (i = 0; i < g->cfg.n_libcuda; i++)
		g->ao.libcuda[i] = g->cfg.libcuda[i];
	g->ao.n_libcuda = g->cfg.n_libcuda;
	return 0;
}

static void copy_protect(struct guard *g)
{
	const char *names[UMT_GUARD_MAX_PROTECT];
	size_t i, n;

	n = guard_config__protected_comms(&g->cfg, names, UMT_GUARD_MAX_PROTECT);
	if (n > UMT_GUARD_MAX_PROTECT) {
		wlog("guard: only %d protected names reach the kernel side; user space "
		     "checks all %zu", UMT_GUARD_MAX_PROTECT, n);
		n = UMT_GUARD_MAX_PROTECT;
	}
	for (i = 0; i < n; i++)
		strncpy(g->kcfg.protect[i], names[i], TASK_COMM_LEN - 1);
	g->kcfg.n_protect = (uint32_t)n;
}

int guard__parse_args(struct guard *g, int argc, char **argv)
{
	struct numa_nodes nodes;
	struct meminfo m;
	char err[512];
	int r;

	attach_opts__init(&g->ao);
	guard_config__init(&g->cfg);
	g->opt.state_file = GUARD_STATE_DEFAULT;
	g->opt.flight_seconds = 300;
	r = load_config(g, argc, argv);
	if (!r)
		r = parse_flags(g, argc, argv);
	if (r)
		return r;
	/* Percentages are of host RAM; session start reports bad nodes. */
	if (numa__device_nodes(g->ao.device_nodes, &nodes, err, sizeof(err)))
		memset(&nodes, 0, sizeof(nodes));
	if (meminfo__read_host(&m, &nodes)) {
		elog("cannot read /proc/meminfo or a device node's meminfo");
		return -EINVAL;
	}
	if (guard_config__policy(&g->cfg, m.total, &g->pol, err, sizeof(err))) {
		elog("%s", err);
		return -EINVAL;
	}
	guard_state__init(&g->pstate);
	g->opt.action = g->cfg.action;
	g->opt.dry_run = g->cfg.dry_run;
	g->opt.on_stop = g->cfg.on_stop;
	g->opt.postmortem_dir = g->cfg.postmortem_dir;
	g->opt.metrics_file = g->cfg.metrics_file;
	copy_protect(g);
	if (take_libcuda(g)) {
		elog("out of memory");
		return -EINVAL;
	}
	return 0;
}

static void free_proc(void *p)
{
	struct guard_proc *gp = p;

	if (gp->pidfd >= 0)
		close(gp->pidfd);
	free(gp);
}

void guard__free(struct guard *g)
{
	tdestroy(g->procs, free_proc);
	summary__free(&g->summary);
	callsites__free(&g->sites);
	callstack__free(&g->stacks);
	if (g->flight)
		flight__free(g->flight);
	guard_config__free(&g->cfg);
	attach_opts__free(&g->ao);
	free(g);
}
