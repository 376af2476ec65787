// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * umtrace status: the running guard's state, read only from its
 * root-owned state file (no socket, no listener).
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
#include "cmd/json.h"
#include "guard/action.h"
#include "guard/pin.h"
#include "guard/state.h"
#include "lib/escape.h"
#include "lib/log.h"
#include "lib/procfs.h"
#include "lib/sys.h"
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

static void print_slide(const struct guard_status *st)
{
	char r[32], h[32], eta[32];

	if (!st->slide_horizon) {
		printf("slide: none (looked at over 1 min, 15 min and 1 h)\n");
		return;
	}
	printf("slide: falling %s/h over the last %s: the floor in about %s\n",
	       fmt_bytes(st->slide_per_hour, r, sizeof(r)),
	       fmt_seconds(st->slide_horizon, h, sizeof(h)),
	       fmt_seconds(st->seconds_to_floor, eta, sizeof(eta)));
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

/* --warn-eta: the jobs warned and still on their way to the floor. */
static void print_warned(const struct guard_status *st, time_t now)
{
	char comm[ESC_TERM_LEN(sizeof(st->warned[0].comm))], eta[32], lead[32];
	const struct guard_warned *w;
	size_t i;

	if (!st->warn_eta)
		return;
	printf("warned: %llu jobs since the start, %zu on their way to the floor "
	       "(--warn-eta %s)\n", (unsigned long long)st->warnings, st->n_warned,
	       fmt_seconds(st->warn_eta, lead, sizeof(lead)));
	if (!st->n_warned)
		return;
	printf("%-8s %-16s %8s  %-14s %s\n", "PID", "COMM", "SINCE", "FLOOR IN THEN", "SIGNAL");
	for (i = 0; i < st->n_warned; i++) {
		w = &st->warned[i];
		printf("%-8u %-16s %7llds  %-14s %s\n", w->pid,
		       esc__term(w->comm, comm, sizeof(comm)), (long long)(now - w->when),
		       fmt_seconds(w->eta, eta, sizeof(eta)), w->signal);
	}
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
	if (st->driver_pool_seen)
		printf("driver page pool: holds %s no process does (reclaimable under pressure, "
		       "not in MemAvailable)\n", fmt_bytes(st->driver_pool, a, sizeof(a)));
	print_slide(st);
	print_pages(st);
	print_memlock(st);
	printf("counters: %llu samples, %llu admission checks, %llu kernel stops, "
	       "%llu policy stops, %llu failed sends, %llu direct reclaims\n",
	       (unsigned long long)st->samples, (unsigned long long)st->checks,
	       (unsigned long long)st->kernel_stops, (unsigned long long)st->policy_stops,
	       (unsigned long long)st->send_failed, (unsigned long long)st->reclaims);
	print_warned(st, now);
	if (!st->n_stopped) {
		printf("stopped: none\n");
		return;
	}
	printf("%-8s %-16s %-8s %-10s %8s  %s\n", "PID", "COMM", "ACTION", "REASON",
	       "SINCE", "CGROUP");
	for (i = 0; i < st->n_stopped; i++)
		print_stopped(&st->stopped[i], now);
}

/* A process the guard acted on: its object opened, with who and since when. */
static void json_job(struct jsonw *w, uint32_t pid, const char *comm, int64_t since)
{
	jsonw__object(w, NULL);
	jsonw__u64(w, "pid", pid);
	jsonw__str(w, "comm", comm);
	jsonw__i64(w, "since", since);
}

static void print_json_stopped(struct jsonw *w, const struct guard_stopped *s)
{
	json_job(w, s->pid, s->comm, s->when);
	jsonw__str(w, "action", s->action);
	jsonw__str(w, "reason", s->reason);
	jsonw__str(w, "cgroup", s->cgroup);
	jsonw__bool(w, "still_stopped", guard_state__still_held(s));
	jsonw__object_end(w);
}

static void print_json_warned(struct jsonw *w, const struct guard_warned *x)
{
	json_job(w, x->pid, x->comm, x->when);
	jsonw__u64(w, "seconds_to_floor", x->eta);
	jsonw__str(w, "signal", strcmp(x->signal, "-") ? x->signal : "");
	jsonw__object_end(w);
}

static void print_json(const struct guard_status *st, bool alive)
{
	struct jsonw w;
	size_t i;

	jsonw__open(&w, stdout);
	jsonw__bool(&w, "running", alive);
	jsonw__bool(&w, "kernel_armed", alive || guard_pins__armed(GUARD_PIN_DIR));
	jsonw__u64(&w, "pid", st->pid);
	jsonw__i64(&w, "started", st->started);
	jsonw__i64(&w, "updated", st->updated);
	jsonw__u64(&w, "floor", st->floor);
	jsonw__u64(&w, "low", st->low);
	jsonw__u64(&w, "drop", st->drop);
	jsonw__u64(&w, "auto_resume", st->auto_resume);
	jsonw__str(&w, "metric", st->metric);
	jsonw__str(&w, "action", st->action);
	jsonw__bool(&w, "dry_run", st->dry_run);
	jsonw__i64(&w, "headroom", st->headroom);
	jsonw__u64(&w, "metric_value", st->metric_value);
	if (st->driver_pool_seen)
		jsonw__u64(&w, "driver_pool", st->driver_pool);
	jsonw__u64(&w, "samples", st->samples);
	jsonw__u64(&w, "checks", st->checks);
	jsonw__u64(&w, "kernel_stops", st->kernel_stops);
	jsonw__u64(&w, "policy_stops", st->policy_stops);
	jsonw__u64(&w, "send_failed", st->send_failed);
	jsonw__u64(&w, "reclaims", st->reclaims);
	jsonw__str(&w, "page_programs",
		   st->pages_always ? "always" : st->pages_on ? "attached" : "detached");
	jsonw__u64(&w, "arm_margin", st->arm_margin);
	jsonw__u64(&w, "arm_late_us", st->arm_late_us);
	jsonw__u64(&w, "arms", st->arms);
	jsonw__str(&w, "memlock", mem_lock__name((enum mem_lock)st->memlock));
	jsonw__str(&w, "helper_memlock", mem_lock__name((enum mem_lock)st->helper_memlock));
	jsonw__u64(&w, "resident_bytes", st->resident_bytes);
	if (st->slide_horizon) {
		jsonw__object(&w, "slide");
		jsonw__u64(&w, "horizon_seconds", st->slide_horizon);
		jsonw__u64(&w, "bytes_per_hour", st->slide_per_hour);
		jsonw__u64(&w, "seconds_to_floor", st->seconds_to_floor);
		jsonw__object_end(&w);
	}
	jsonw__array(&w, "stopped");
	for (i = 0; i < st->n_stopped; i++)
		print_json_stopped(&w, &st->stopped[i]);
	jsonw__array_end(&w);
	jsonw__u64(&w, "warn_eta_seconds", st->warn_eta);
	jsonw__u64(&w, "warnings", st->warnings);
	jsonw__array(&w, "warned");
	for (i = 0; i < st->n_warned; i++)
		print_json_warned(&w, &st->warned[i]);
	jsonw__array_end(&w);
	jsonw__close(&w);
}

static int parse_args(const char **path, bool *json, int argc, char **argv)
{
	const struct cli c = {
		.name = "status", .in_order = true, .json = json, .state_file = path,
		.usage = status_usage,
	};
	int err;

	*path = GUARD_STATE_DEFAULT;
	err = cli__parse(&c, argc, argv);
	return err ? err : cli__no_operands("status", argc, argv);
}

int cmd_status(int argc, char **argv)
{
	const char *path;
	struct guard_status *st;
	bool json = false, alive;
	int err;

	err = parse_args(&path, &json, argc, argv);
	if (err)
		return cli__exit(NULL, err);
	st = guard_state__new();
	if (!st)
		return 1;
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
