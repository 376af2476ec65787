// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The post-mortem of each stop (daemon.h): its record in the flight
 * recorder, then, in a child, the bundle carrying the recorder's last
 * minutes, and the --on-stop hook.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "export/export.h"
#include "export/flame_build.h"
#include "export/summary_out.h"
#include "export/torch_out.h"
#include "guardd/daemon.h"
#include "lib/escape.h"
#include "lib/log.h"
#include "lib/units.h"
#include "rec/flight_recorder.h"

/* ---- the flight recorder ---- */

/*
 * The guard's flight recorder: the last --flight-seconds of GPU calls,
 * exits, memory samples and stops, kept in memory and written into each
 * post-mortem bundle as a recording that `umtrace report` and
 * `flamegraph` read like any other.
 */

/* A daemon under MemoryMax=64M keeps its recorder well inside it. */
#define FLIGHT_MAX_BYTES (16u << 20)

int postmortem__init(struct guard_postmortem *pm, const struct guard_opts *o,
		     const struct guard_holders *who, const struct torch_model *torch,
		     struct session *session)
{
	pm->dir = o->postmortem_dir;
	pm->on_stop = o->on_stop;
	pm->platform = o->ao.platform;
	pm->who = who;
	pm->torch = torch;
	pm->session = session;
	if (!o->flight_seconds || !o->postmortem_dir)
		return 0;
	pm->flight = flight__new(o->flight_seconds * 1000000000ULL, FLIGHT_MAX_BYTES);
	if (!pm->flight) {
		elog("cannot create the flight recorder: %s", strerror(errno));
		return -errno;
	}
	return 0;
}

void guard_flight__call(struct guard_postmortem *pm, const struct umt_call_rec *r,
			const struct sym_frame *frames, size_t n)
{
	if (pm->flight)
		flight__add_call(pm->flight, r, frames, n);
}

void guard_flight__exit(struct guard_postmortem *pm, const struct umt_proc_exit_rec *r)
{
	if (pm->flight)
		flight__add_exit(pm->flight, r);
}

void guard_flight__sample(struct guard_postmortem *pm)
{
	struct rec_sample s;
	uint64_t shrunk;

	if (!pm->flight || rec_sample__read(&s, &pm->session->nodes))
		return;
	if (probes__driver_shrunk(&pm->session->probes, &shrunk)) {
		s.has_shrunk = true;
		s.driver_shrunk = shrunk * page__size();
	}
	flight__add_sample(pm->flight, &s);
}

static void guard_flight__stop(struct guard_postmortem *pm, const struct guard_stop *st)
{
	struct rec_stop s = {
		.ts_ns = st->ts_ns,
		.pid = st->pid,
		.reason = st->reason,
		.mem_available = st->metric_bytes,
		.gpu_host_bytes = st->held,
	};

	if (!pm->flight)
		return;
	memcpy(s.comm, st->comm, sizeof(s.comm));
	/* The recording keeps what fits; cut, not refused. */
	snprintf(s.reason_text, sizeof(s.reason_text), "%.*s",
		 (int)sizeof(s.reason_text) - 1, st->detail);
	snprintf(s.site, sizeof(s.site), "%.*s", (int)sizeof(s.site) - 1, st->top_site);
	flight__add_stop(pm->flight, &s);
}

void guard_flight__torch(struct guard_postmortem *pm, const struct torch_sample *s)
{
	if (pm->flight)
		flight__add_torch(pm->flight, s);
}

/*
 * What a report made elsewhere needs of this host, as `record` writes it:
 * its cost model (--platform, or what the driver said) and the records
 * lost so far. The guard's sampling interval varies: none is claimed.
 */
static void flight_info(struct guard_postmortem *pm)
{
	struct rec_info i = {
		.platform_forced = pm->platform,
		.platform_driver = pm->who->summary.platform.decided,
		.pages_unseen = pm->who->summary.pages_unseen,
	};
	struct probe_stats st;

	if (pm->session->probes.skel) {
		session__stats(pm->session, &st);
		i.dropped = st.rec_dropped;
	}
	flight__set_info(pm->flight, &i);
}

static int guard_flight__dump(struct guard_postmortem *pm, const char *dir)
{
	char path[4200];

	if (!pm->flight)
		return 0;
	flight_info(pm);
	snprintf(path, sizeof(path), "%s/recording.umt", dir);
	return flight__dump(pm->flight, path);
}

void guard_flight__free(struct guard_postmortem *pm)
{
	if (pm->flight)
		flight__free(pm->flight);
	pm->flight = NULL;
}

/* ---- the bundle ---- */

/* A new file in the bundle: never an existing one, never through a link. */
static FILE *create(const char *dir, const char *name)
{
	char path[4200];
	int fd;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return NULL;
	f = fdopen(fd, "w");
	if (!f)
		close(fd);
	return f;
}

static int finish(FILE *f)
{
	int err = 0;

	if (fflush(f))
		err = -errno;	/* ENOSPC, EDQUOT: what the operator must fix */
	else if (ferror(f))
		err = -EIO;
	if (fclose(f) && !err)
		err = -errno;
	return err;
}

static void write_torch(struct guard_postmortem *pm, const struct guard_stop *s, FILE *f)
{
	char advice[1024], text[ESC_KV_LEN(sizeof(advice))], cause[ESC_KV_LEN(sizeof(s->cause))];

	if (!s->torch)
		return;
	fprintf(f, "torch_allocated_bytes %llu\n", (unsigned long long)s->torch_v.allocated);
	if (s->torch_v.reserved_known)
		fprintf(f, "torch_reserved_bytes %llu\ntorch_cached_bytes %llu\n",
			(unsigned long long)s->torch_v.reserved,
			(unsigned long long)s->torch_v.cached);
	else
		fprintf(f, "torch_reserved_bytes unknown\n");
	fprintf(f, "torch_verdict %s\ntorch_cause %s\ntorch_expandable_segments %s\n",
		s->verdict, esc__kv(s->cause[0] ? s->cause : "-", cause, sizeof(cause)),
		s->torch_v.expandable == TORCH_ES_ON ? "on" :
		s->torch_v.expandable == TORCH_ES_OFF ? "off" : "unknown");
	if (!s->torch_v.advice)
		return;
	/* The advice names call sites' frames. */
	torch_out__advice(&s->torch_v, &pm->who->sites, advice, sizeof(advice));
	fprintf(f, "torch_advice %s\n", esc__kv(advice, text, sizeof(text)));
}

/* "KEY VALUE" lines; a value a name went into is quoted and escaped (esc__kv()). */
static int write_event(struct guard_postmortem *pm, const struct guard_stop *s, const char *dir)
{
	FILE *f = create(dir, "event.txt");
	char a[32], comm[ESC_KV_LEN(sizeof(s->comm))], cg[ESC_KV_LEN(sizeof(s->cgroup))];
	char detail[ESC_KV_LEN(sizeof(s->detail))], site[ESC_KV_LEN(sizeof(s->top_site))];

	if (!f)
		return -errno;
	fprintf(f, "time %lld\npid %u\ncomm %s\ncgroup %s\nreason %s\ndetail %s\n"
		"action %s\n%s %s\ngpu_host_bytes %llu\ntop_site %s\n",
		(long long)s->when, s->pid, esc__kv(s->comm, comm, sizeof(comm)),
		esc__kv(s->cgroup[0] ? s->cgroup : "-", cg, sizeof(cg)),
		s->reason_name, esc__kv(s->detail, detail, sizeof(detail)),
		s->action_name, s->metric_name,
		fmt_bytes(s->metric_bytes, a, sizeof(a)), (unsigned long long)s->held,
		esc__kv(s->top_site, site, sizeof(site)));
	write_torch(pm, s, f);
	return finish(f);
}

static void print_sites(struct guard_postmortem *pm, FILE *f)
{
	struct callsite **v = callsites__sorted(&pm->who->sites);
	char a[32], b[32];
	size_t i;

	if (!v)
		return;
	fprintf(f, "\nCall sites holding memory (host bytes held, allocations, stack):\n");
	for (i = 0; i < pm->who->sites.n; i++) {
		if (!v[i]->held_count)
			continue;
		fprintf(f, "%10s %6llu  ", fmt_bytes(v[i]->held_host, a, sizeof(a)),
			(unsigned long long)v[i]->held_count);
		esc__term_f(f, v[i]->key);
		fprintf(f, "  (%s taken in all)\n", fmt_bytes(v[i]->host_taken, b, sizeof(b)));
	}
	free(v);
}

static int write_report(struct guard_postmortem *pm, const char *dir)
{
	FILE *f = create(dir, "report.txt");

	if (!f)
		return -errno;
	export_summary_text(&pm->who->summary, f);
	print_sites(pm, f);
	export_torch_text(pm->torch, &pm->who->sites, f);
	return finish(f);
}

static int write_folded(struct guard_postmortem *pm, const char *dir)
{
	struct stackset *set = stackset__new(0);
	FILE *f;
	int err;

	if (!set)
		return -errno;
	flame__add_held(set, &pm->who->summary, &pm->who->sites, 0);
	f = create(dir, "held.folded");
	if (!f) {
		err = -errno;
		stackset__free(set);
		return err;
	}
	err = export_folded(set, STACK_VAL__HOST_BYTES, f);
	stackset__free(set);
	if (finish(f) && !err)
		err = -EIO;
	return err;
}

/* DIR/umtrace-YYYYmmdd-HHMMSS-PID, made 0700; a name taken gets a suffix. */
static int make_dir(const char *base, const struct guard_stop *p, char *dir, size_t len)
{
	struct tm tm;
	char stamp[32];
	int i;

	localtime_r(&p->when, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	if (mkdir(base, 0700) && errno != EEXIST)
		return -errno;
	for (i = 0; i < 100; i++) {
		if (i)
			snprintf(dir, len, "%s/umtrace-%s-%u.%d", base, stamp, p->pid, i);
		else
			snprintf(dir, len, "%s/umtrace-%s-%u", base, stamp, p->pid);
		if (!mkdir(dir, 0700))
			return 0;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

static int write_bundle(struct guard_postmortem *pm, const struct guard_stop *s, char *dir, size_t len)
{
	int err;

	err = make_dir(pm->dir, s, dir, len);
	if (!err)
		err = write_event(pm, s, dir);
	if (!err)
		err = write_report(pm, dir);
	if (!err)
		err = write_folded(pm, dir);
	if (!err && pm->flight)
		err = guard_flight__dump(pm, dir);
	if (err)
		wlog("guard: post-mortem bundle %s incomplete: %s", dir, strerror(-err));
	return err;
}

/* Everything but stdio: a child must not keep the guard's links alive. */
static void close_inherited(void)
{
	int fd;

	if (!close_range(3, ~0U, 0))
		return;
	for (fd = 3; fd < 1024; fd++)
		close(fd);
}

/* A child for what may block (a disk, a hook): 0 in it, its pid here, -1 said. */
static pid_t child_for(const char *what)
{
	pid_t child = fork();

	if (child < 0) {
		wlog("guard: cannot %s: %s", what, strerror(errno));
		return -1;
	}
	if (!child)
		close_inherited();
	return child;
}

/*
 * The post-mortem bundle and --on-stop, in a child of their own: a
 * snapshot of the guard's memory as the stop found it, written at the
 * disk's pace while the loop goes on (a slow or hung disk stalls only the
 * child). The hook runs once the bundle is complete.
 */
static void aftermath(struct guard_postmortem *pm, const struct guard_stop *s)
{
	char bundle[4096] = "";

	if (!pm->dir && !pm->on_stop)
		return;
	if (child_for("write the post-mortem or run --on-stop"))
		return;
	if (pm->dir && write_bundle(pm, s, bundle, sizeof(bundle)))
		bundle[0] = '\0';
	if (pm->on_stop)
		guard_stop__exec_hook(s, pm->on_stop, bundle);
	_exit(0);
}

void postmortem__stop(struct guard_postmortem *pm, const struct guard_stop *s)
{
	guard_flight__stop(pm, s);
	aftermath(pm, s);
}

void postmortem__hook(const char *cmd, const struct guard_stop *s)
{
	if (!child_for("run --on-warn"))
		guard_stop__exec_hook(s, cmd, "");
}
