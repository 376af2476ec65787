// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * umtrace status: the running guard's state, read only from its
 * root-owned state file (no socket, no listener).
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
#include "guard/pin.h"
#include "guard/state.h"
#include "lib/escape.h"
#include "lib/log.h"
#include "lib/procfs.h"
#include "lib/sys.h"
#include "lib/units.h"

enum { OPT_STATE_FILE = 0x100 };

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

static void print_pages(const struct guard_status *st)
{
	char m[32];

	if (st->pages_always) {
		printf("page programs: attached all the time\n");
		return;
	}
	printf("page programs: %s (attached within %s above low",
	       st->pages_on ? "attached" : "detached",
	       st->arm_margin ? fmt_bytes(st->arm_margin, m, sizeof(m)) : "a margin not yet measured");
	if (st->arm_margin && st->arm_late_us)
		printf(", for looks up to %.1f ms late", st->arm_late_us / 1000.0);
	printf("; %llu times so far)\n", (unsigned long long)st->arms);
}

/* Locked, it never waits on a page-in under the very pressure it is for. */
static void print_memlock(const struct guard_status *st)
{
	char b[32];

	printf("memory: daemon locked %s (%s resident)",
	       mem_lock__name((enum mem_lock)st->memlock),
	       fmt_bytes(st->resident_bytes, b, sizeof(b)));
	if (!st->pages_always)
		printf(", helper locked %s", mem_lock__name((enum mem_lock)st->helper_memlock));
	printf("\n");
}

/* Every string of the state file is shown escaped: names went into it. */
static void print_stopped(const struct guard_stopped *s, time_t now)
{
	char comm[ESC_TERM_LEN(sizeof(s->comm))], act[ESC_TERM_LEN(sizeof(s->action))];
	char why[ESC_TERM_LEN(sizeof(s->reason))], cg[ESC_TERM_LEN(sizeof(s->cgroup))];

	printf("%-8u %-16s %-8s %-10s %7llds  %s%s\n", s->pid,
	       esc__term(s->comm, comm, sizeof(comm)), esc__term(s->action, act, sizeof(act)),
	       esc__term(s->reason, why, sizeof(why)), (long long)(now - s->when),
	       s->cgroup[0] ? esc__term(s->cgroup, cg, sizeof(cg)) : "-",
	       guard_state__still_held(s) ? "" : "  (no longer stopped)");
}

static void print_text(const struct guard_status *st, bool alive)
{
	char a[32], b[32], c[32], d[32];
	char act[ESC_TERM_LEN(sizeof(st->action))], met[ESC_TERM_LEN(sizeof(st->metric))];
	time_t now = time(NULL);
	size_t i;

	esc__term(st->action, act, sizeof(act));
	esc__term(st->metric, met, sizeof(met));
	if (alive)
		printf("guard: running, pid %u, up %llds, action %s%s\n", st->pid,
		       (long long)(now - st->started), act,
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
	       fmt_bytes(st->drop, c, sizeof(c)), met,
	       st->auto_resume ? fmt_bytes(st->auto_resume, d, sizeof(d)) : "off");
	printf("host: %s %s; kernel headroom %s above the floor (%llds ago)\n",
	       met, fmt_bytes(st->metric_value, a, sizeof(a)),
	       fmt_bytes_signed(st->headroom, false, b, sizeof(b)),
	       (long long)(now - st->updated));
	print_pages(st);
	print_memlock(st);
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
	for (i = 0; i < st->n_stopped; i++)
		print_stopped(&st->stopped[i], now);
}

static void print_json_stopped(const struct guard_stopped *s)
{
	printf("{\"pid\":%u,\"comm\":", s->pid);
	json__string(stdout, s->comm);
	printf(",\"action\":");
	json__string(stdout, s->action);
	printf(",\"reason\":");
	json__string(stdout, s->reason);
	printf(",\"since\":%lld,\"cgroup\":", (long long)s->when);
	json__string(stdout, s->cgroup);
	printf(",\"still_stopped\":%s}", guard_state__still_held(s) ? "true" : "false");
}

static void print_json(const struct guard_status *st, bool alive)
{
	size_t i;

	printf("{\"running\":%s,\"kernel_armed\":%s,\"pid\":%u,\"started\":%lld,\"updated\":%lld,"
	       "\"floor\":%llu,\"low\":%llu,\"drop\":%llu,\"auto_resume\":%llu,\"metric\":",
	       alive ? "true" : "false",
	       alive || guard_pins__armed(GUARD_PIN_DIR) ? "true" : "false",
	       st->pid, (long long)st->started,
	       (long long)st->updated, (unsigned long long)st->floor,
	       (unsigned long long)st->low, (unsigned long long)st->drop,
	       (unsigned long long)st->auto_resume);
	json__string(stdout, st->metric);
	printf(",\"action\":");
	json__string(stdout, st->action);
	printf(",\"dry_run\":%s,\"headroom\":%lld,"
	       "\"metric_value\":%llu,\"samples\":%llu,\"checks\":%llu,"
	       "\"kernel_stops\":%llu,\"policy_stops\":%llu,\"send_failed\":%llu,"
	       "\"reclaims\":%llu,\"page_programs\":\"%s\",\"arm_margin\":%llu,"
	       "\"arm_late_us\":%llu,\"arms\":%llu,\"memlock\":\"%s\","
	       "\"helper_memlock\":\"%s\",\"resident_bytes\":%llu,\"stopped\":[",
	       st->dry_run ? "true" : "false", (long long)st->headroom,
	       (unsigned long long)st->metric_value, (unsigned long long)st->samples,
	       (unsigned long long)st->checks, (unsigned long long)st->kernel_stops,
	       (unsigned long long)st->policy_stops, (unsigned long long)st->send_failed,
	       (unsigned long long)st->reclaims,
	       st->pages_always ? "always" : st->pages_on ? "attached" : "detached",
	       (unsigned long long)st->arm_margin,
	       (unsigned long long)st->arm_late_us,
	       (unsigned long long)st->arms, mem_lock__name((enum mem_lock)st->memlock),
	       mem_lock__name((enum mem_lock)st->helper_memlock),
	       (unsigned long long)st->resident_bytes);
	for (i = 0; i < st->n_stopped; i++) {
		if (i)
			putchar(',');
		print_json_stopped(&st->stopped[i]);
	}
	printf("]}\n");
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
	if (guard_state__load(path, st)) {
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
