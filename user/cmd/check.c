// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * umtrace check: load the BPF programs the way each command loads them,
 * attach nothing, and say which commands this kernel can run. The
 * verifier of one kernel accepts what another refuses (6.1 refused a
 * bound 6.12 took), and libbpf stops at the first program it cannot
 * load: only loading every configuration on the kernel at hand tells.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cmd/cli.h"
#include "cmd/commands.h"
#include "attach/libcuda_scan.h"
#include "lib/log.h"
#include "lib/numa.h"
#include "attach/probes.h"
#include "guard/policy.h"
#include "umtrace.h"
#include "attach/uprobe_multi.h"

void check_usage(FILE *f)
{
	fprintf(f,
"usage: umtrace check [-v]\n"
"\n"
"Load umtrace's BPF programs as each command would (trace, record, top,\n"
"report (PyTorch's allocator hook with them), guard in every scope, with\n"
"and without device NUMA nodes, both uprobe attach paths), attach nothing,\n"
"and print one line each: ok with\n"
"the programs verified, FAILED, or n/a with why. Needs what the commands\n"
"need (root, or CAP_BPF and CAP_PERFMON; kernel BTF).\n"
"\n"
"  -v, --verbose   libbpf's log and the verifier's, for what fails\n"
"  -h, --help      show this help\n"
"\n"
"Exit status: 0 when every configuration this kernel and architecture can\n"
"have loads, 1 when one does not or the kernel lacks a feature umtrace\n"
"needs (said in one line), 2 on a usage error.\n");
}

enum check_mode {
	CHECK_PLAIN,
	CHECK_PIDS,		/* trace -p, or -- COMMAND */
	CHECK_MANAGED,		/* --managed-faults */
	CHECK_PAGES,		/* no libcuda: pages per process */
	CHECK_RECORD,
	CHECK_TOP,
	CHECK_REPORT,
	CHECK_REPORT_PIDS,	/* report -p, or -- COMMAND: the torch hook filtered */
	CHECK_GUARD,
	CHECK_DEVICE,		/* with a device NUMA node */
	CHECK_PERF_UPROBES,	/* perf-event uprobes where multi-uprobes exist */
};

struct check {
	const char *name;
	enum check_mode mode;
	uint32_t scope;		/* CHECK_GUARD: enum umt_guard_scope */
	bool guard;		/* CHECK_DEVICE: the guard's configuration */
	bool torch;		/* CHECK_GUARD: with --torch */
};

static const struct check checks[] = {
	{ .name = "trace", .mode = CHECK_PLAIN },
	{ .name = "trace -p / -- COMMAND", .mode = CHECK_PIDS },
	{ .name = "trace --managed-faults", .mode = CHECK_MANAGED },
	{ .name = "trace (no libcuda)", .mode = CHECK_PAGES },
	{ .name = "trace --device-nodes", .mode = CHECK_DEVICE },
	{ .name = "top (perf-event uprobes)", .mode = CHECK_PERF_UPROBES },
	{ .name = "record", .mode = CHECK_RECORD },
	{ .name = "top", .mode = CHECK_TOP },
	{ .name = "report", .mode = CHECK_REPORT },
	{ .name = "report -p / -- COMMAND", .mode = CHECK_REPORT_PIDS },
	{ .name = "guard --scope gpu", .mode = CHECK_GUARD, .scope = UMT_SCOPE_GPU },
	{ .name = "guard --scope all", .mode = CHECK_GUARD, .scope = UMT_SCOPE_ALL },
	{ .name = "guard --scope pid:", .mode = CHECK_GUARD, .scope = UMT_SCOPE_PIDS },
	{ .name = "guard --scope cgroup:", .mode = CHECK_GUARD, .scope = UMT_SCOPE_CGROUP },
	{ .name = "guard --scope comm:", .mode = CHECK_GUARD, .scope = UMT_SCOPE_COMM },
	{ .name = "guard --torch", .mode = CHECK_GUARD, .scope = UMT_SCOPE_GPU, .torch = true },
	{ .name = "guard --device-nodes", .mode = CHECK_DEVICE, .scope = UMT_SCOPE_GPU, .guard = true },
};

#define N_CHECKS (sizeof(checks) / sizeof(checks[0]))

/* NULL when the configuration can be loaded here, else why not. */
static const char *not_here(const struct check *c, struct numa_nodes *nodes)
{
	static char why[256];

	switch (c->mode) {
	case CHECK_MANAGED:
		if (!probes__can_track_managed())
			return "this architecture has no tracepoint with the fault address";
		return NULL;
	case CHECK_PERF_UPROBES:
		if (!uprobe_multi__supported())
			return "no multi-uprobes here: every line above uses perf-event uprobes";
		return NULL;
	case CHECK_DEVICE:
		/* Any online node will do: nothing is attached. */
		if (numa__device_nodes("0", nodes, why, sizeof(why)))
			return why;
		return NULL;
	default:
		return NULL;
	}
}

static void fill_cfg(const struct check *c, struct probe_cfg *cfg, struct guard_kcfg *g,
		     const struct numa_nodes *nodes)
{
	memset(cfg, 0, sizeof(*cfg));
	memset(g, 0, sizeof(*g));
	cfg->ringbuf_bytes = 1 << 20;
	cfg->skip_softirq_frees = true;
	cfg->batch_wakeups = true;
	/* Each command looks for libraries mapped later unless they are named. */
	cfg->lib_events = true;
	/* Every kind of API costs host memory: all of admission is verified. */
	g->on = true;
	g->cost_apis = ~0ULL;
	g->scope = c->scope;
	switch (c->mode) {
	case CHECK_PIDS:
		cfg->filter_pids = true;
		break;
	case CHECK_MANAGED:
		cfg->managed_faults = true;
		break;
	case CHECK_PAGES:
		cfg->proc_pages = true;
		break;
	case CHECK_PERF_UPROBES:	/* top's: the GPU calls' and the torch hook's */
		cfg->torch = true;
		cfg->count_outside = true;
		cfg->count_kthreads = true;
		cfg->driver_pool = true;
		break;
	case CHECK_RECORD:
		cfg->batch_wakeups = false;
		cfg->ustack_bytes = UMT_USTACK_MAX;
		cfg->torch = true;
		break;
	case CHECK_TOP:
		cfg->count_outside = true;
		cfg->count_kthreads = true;
		cfg->torch = true;
		break;
	case CHECK_REPORT_PIDS:
		cfg->filter_pids = true;
		/* fall through */
	case CHECK_REPORT:
		cfg->batch_wakeups = false;
		cfg->count_kthreads = true;
		cfg->ustack_bytes = UMT_USTACK_MAX;
		cfg->torch = true;
		break;
	case CHECK_GUARD:
		cfg->skip_softirq_frees = false;
		cfg->guard = g;
		cfg->torch = c->torch || GUARD_TORCH_DEFAULT;
		break;
	case CHECK_DEVICE:
		cfg->nodes = nodes;
		if (c->guard) {
			cfg->skip_softirq_frees = false;
			cfg->guard = g;
		}
		break;
	default:
		break;
	}
}

static bool run_check(const struct check *c)
{
	struct numa_nodes nodes = {};
	struct probe_cfg cfg;
	struct guard_kcfg g;
	struct probes p;
	const char *why;
	bool perf = c->mode == CHECK_PERF_UPROBES;
	int err;

	why = not_here(c, &nodes);
	if (why) {
		printf("%-28s n/a (%s)\n", c->name, why);
		return true;
	}
	fill_cfg(c, &cfg, &g, &nodes);
	if (perf)
		setenv("UMTRACE_NO_UPROBE_MULTI", "1", 1);
	err = probes__load(&p, &cfg);
	if (perf)
		unsetenv("UMTRACE_NO_UPROBE_MULTI");
	if (err) {
		printf("%-28s FAILED (%s)\n", c->name, strerror(-err));
		return false;
	}
	printf("%-28s ok (%u programs, %s uprobes)\n", c->name, probes__n_loaded(&p),
	       p.multi ? "multi" : "perf-event");
	probes__destroy(&p);
	return true;
}

/* The rescan's task iterator: the commands fall back to /proc without it. */
static void run_scan_check(void)
{
	struct libcuda_scan sc = {};
	int err = libcuda_scan__open(&sc);

	if (err)
		printf("%-28s n/a (%s: the rescan reads /proc instead)\n", "rescan (task iterator)",
		       strerror(-err));
	else
		printf("%-28s ok\n", "rescan (task iterator)");
	libcuda_scan__close(&sc);
}

static int option(void *ctx, int opt, const char *arg)
{
	(void)ctx;
	(void)arg;
	if (opt == 'v')
		log_verbose++;
	return 0;
}

int cmd_check(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "verbose", no_argument, NULL, 'v' },
		{}
	};
	const struct cli c = {
		.name = "check", .shortopts = "v", .longopts = opts, .getopt_errors = true,
		.usage = check_usage, .option = option,
	};
	size_t i, failed = 0;
	int err;

	err = cli__parse(&c, argc, argv);
	if (err)
		return cli__exit(NULL, err);
	if (optind < argc) {
		elog("check: unexpected argument '%s'; see 'umtrace check --help'", argv[optind]);
		return 2;
	}
	if (probes__check_env())
		return 1;
	for (i = 0; i < N_CHECKS; i++)
		failed += !run_check(&checks[i]);
	run_scan_check();
	fflush(stdout);
	if (failed)
		elog("check: %zu configuration(s) did not load%s", failed,
		     log_verbose ? "" : " (run with -v for the verifier's log)");
	return failed ? 1 : 0;
}
