// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "guard/action.h"
#include "guard/state.h"
#include "lib/escape.h"
#include "lib/log.h"
#include "lib/procfs.h"

#define MAGIC "umtrace-guard-state 1"
/* A "stopped" line at its longest, its names escaped, fits. */
#define LINE_MAX_LEN 4096

/*
 * The cgroup and the comm as tokens (esc__token()): a name with a newline
 * or a space can neither add a line nor shift a field, and reads back as
 * the bytes it was.
 */
static void write_stopped(FILE *f, const struct guard_stopped *s)
{
	char cg[ESC_TERM_LEN(sizeof(s->cgroup))], comm[ESC_TERM_LEN(sizeof(s->comm))];

	fprintf(f, "stopped %" PRIu32 " %s %s %" PRId64 " %s %s\n", s->pid, s->action,
		s->reason, s->when, s->cgroup[0] ? esc__token(s->cgroup, cg, sizeof(cg)) : "-",
		esc__token(s->comm, comm, sizeof(comm)));
}

static void write_warned(FILE *f, const struct guard_warned *w)
{
	char comm[ESC_TERM_LEN(sizeof(w->comm))];

	fprintf(f, "warned %" PRIu32 " %" PRId64 " %" PRIu64 " %s %s\n", w->pid, w->when,
		w->eta, w->signal[0] ? w->signal : "-", esc__token(w->comm, comm, sizeof(comm)));
}

static void write_body(FILE *f, const struct guard_status *st)
{
	size_t i;

	fprintf(f, MAGIC "\n");
	fprintf(f, "pid %" PRIu32 "\nstarted %" PRId64 "\nupdated %" PRId64 "\n",
		st->pid, st->started, st->updated);
	fprintf(f, "floor %" PRIu64 "\nlow %" PRIu64 "\ndrop %" PRIu64 "\n"
		"auto_resume %" PRIu64 "\n", st->floor, st->low, st->drop, st->auto_resume);
	fprintf(f, "metric %s\naction %s\ndry_run %d\n", st->metric, st->action,
		st->dry_run);
	fprintf(f, "headroom %" PRId64 "\nmetric_value %" PRIu64 "\n", st->headroom,
		st->metric_value);
	fprintf(f, "checks %" PRIu64 "\nkernel_stops %" PRIu64 "\npolicy_stops %" PRIu64
		"\nsend_failed %" PRIu64 "\nreclaims %" PRIu64 "\nsamples %" PRIu64 "\n",
		st->checks, st->kernel_stops, st->policy_stops, st->send_failed,
		st->reclaims, st->samples);
	fprintf(f, "pages_always %" PRIu64 "\npages_on %" PRIu64 "\narm_margin %" PRIu64
		"\narm_late_us %" PRIu64 "\narms %" PRIu64 "\n", st->pages_always, st->pages_on,
		st->arm_margin, st->arm_late_us, st->arms);
	fprintf(f, "memlock %" PRIu64 "\nhelper_memlock %" PRIu64 "\nresident_bytes %" PRIu64
		"\n", st->memlock, st->helper_memlock, st->resident_bytes);
	if (st->driver_pool_seen)
		fprintf(f, "driver_pool %" PRIu64 "\ndriver_pool_seen 1\n", st->driver_pool);
	if (st->slide_horizon)
		fprintf(f, "slide_horizon %" PRIu64 "\nslide_per_hour %" PRIu64
			"\nseconds_to_floor %" PRIu64 "\n", st->slide_horizon,
			st->slide_per_hour, st->seconds_to_floor);
	if (st->warn_eta)
		fprintf(f, "warn_eta %" PRIu64 "\nwarnings %" PRIu64 "\n", st->warn_eta,
			st->warnings);
	for (i = 0; i < st->n_stopped; i++)
		write_stopped(f, &st->stopped[i]);
	for (i = 0; i < st->n_warned; i++)
		write_warned(f, &st->warned[i]);
}

struct guard_status *guard_state__new(void)
{
	struct guard_status *st = malloc(sizeof(*st));

	if (!st)
		elog("out of memory");
	return st;
}

char *guard_state__format(const struct guard_status *st, size_t *len)
{
	char *buf = NULL;
	FILE *f;

	f = open_memstream(&buf, len);
	if (!f)
		return NULL;
	write_body(f, st);
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* "stopped PID ACTION REASON TIME CGROUP COMM": COMM is the rest of the line. */
static int parse_stopped(const char *v, struct guard_stopped *s)
{
	char cg[ESC_TERM_LEN(sizeof(s->cgroup))];
	size_t len;
	int n = 0;

	memset(s, 0, sizeof(*s));
	if (sscanf(v, "%" SCNu32 " %15s %15s %" SCNd64 " %n", &s->pid, s->action,
		   s->reason, &s->when, &n) != 4 || !n)
		return -EINVAL;
	v += n;
	len = strcspn(v, " ");
	if (!len || len >= sizeof(cg))
		return -EINVAL;
	memcpy(cg, v, len);
	cg[len] = '\0';
	if (strcmp(cg, "-"))
		esc__unescape(cg, s->cgroup, sizeof(s->cgroup));
	esc__unescape(v[len] ? v + len + 1 : "", s->comm, sizeof(s->comm));
	return 0;
}

/* "warned PID TIME ETA SIGNAL COMM": COMM is the rest of the line. */
static int parse_warned(const char *v, struct guard_warned *w)
{
	int n = 0;

	memset(w, 0, sizeof(*w));
	if (sscanf(v, "%" SCNu32 " %" SCNd64 " %" SCNu64 " %7s %n", &w->pid, &w->when,
		   &w->eta, w->signal, &n) != 4 || !n)
		return -EINVAL;
	esc__unescape(v + n, w->comm, sizeof(w->comm));
	return 0;
}

static int parse_line(struct guard_status *st, const char *key, const char *v)
{
	static const struct {
		const char *key;
		size_t off;
	} u64s[] = {
#define U(k) { #k, offsetof(struct guard_status, k) }
		U(floor), U(low), U(drop), U(auto_resume), U(metric_value), U(checks),
		U(kernel_stops), U(policy_stops), U(send_failed), U(reclaims), U(samples),
		U(pages_always), U(pages_on), U(arm_margin), U(arm_late_us), U(arms),
		U(memlock), U(helper_memlock), U(resident_bytes),
		U(driver_pool), U(driver_pool_seen),
		U(slide_horizon), U(slide_per_hour), U(seconds_to_floor),
		U(warn_eta), U(warnings),
#undef U
	};
	size_t i;

	for (i = 0; i < sizeof(u64s) / sizeof(u64s[0]); i++)
		if (!strcmp(key, u64s[i].key))
			return sscanf(v, "%" SCNu64, (uint64_t *)((char *)st + u64s[i].off))
			       == 1 ? 0 : -EINVAL;
	if (!strcmp(key, "pid"))
		return sscanf(v, "%" SCNu32, &st->pid) == 1 ? 0 : -EINVAL;
	if (!strcmp(key, "started"))
		return sscanf(v, "%" SCNd64, &st->started) == 1 ? 0 : -EINVAL;
	if (!strcmp(key, "updated"))
		return sscanf(v, "%" SCNd64, &st->updated) == 1 ? 0 : -EINVAL;
	if (!strcmp(key, "headroom"))
		return sscanf(v, "%" SCNd64, &st->headroom) == 1 ? 0 : -EINVAL;
	if (!strcmp(key, "metric"))
		return snprintf(st->metric, sizeof(st->metric), "%s", v) < 0 ? -EINVAL : 0;
	if (!strcmp(key, "action"))
		return snprintf(st->action, sizeof(st->action), "%s", v) < 0 ? -EINVAL : 0;
	if (!strcmp(key, "dry_run")) {
		st->dry_run = !strcmp(v, "1");
		return 0;
	}
	if (!strcmp(key, "stopped")) {
		if (st->n_stopped >= GUARD_STATE_MAX_STOPPED)
			return 0;
		return parse_stopped(v, &st->stopped[st->n_stopped++]);
	}
	if (!strcmp(key, "warned")) {
		if (st->n_warned >= GUARD_STATE_MAX_WARNED)
			return 0;
		return parse_warned(v, &st->warned[st->n_warned++]);
	}
	return 0;	/* a newer daemon's key */
}

int guard_state__read(const char *path, struct guard_status *st)
{
	char line[LINE_MAX_LEN], *sp;
	struct stat sb;
	int fd, err = 0;
	FILE *f;

	memset(st, 0, sizeof(*st));
	/* Not a FIFO or a device someone put there: never block on it. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	f = fdopen(fd, "r");
	if (!f) {
		err = -errno;
		close(fd);
		return err;
	}
	if (!fgets(line, sizeof(line), f) || strcmp(line, MAGIC "\n")) {
		err = -EINVAL;
		goto out;
	}
	while (!err && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		sp = strchr(line, ' ');
		if (!sp) {
			err = -EINVAL;
			break;
		}
		*sp = '\0';
		err = parse_line(st, line, sp + 1);
	}
out:
	fclose(f);
	return err;
}

bool guard_state__daemon_alive(uint32_t pid)
{
	char comm[32];

	if (!pid || kill((pid_t)pid, 0))
		return false;
	return proc__comm((pid_t)pid, comm, sizeof(comm)) && !strncmp(comm, "umtrace", 7);
}

bool guard_state__still_held(const struct guard_stopped *s)
{
	char st = proc__state((pid_t)s->pid);

	if (!st)
		return false;
	if (st == 'T')
		return true;
	return s->cgroup[0] && cgroup__frozen(s->cgroup);
}

int guard_state__load(const char *path, struct guard_status *st)
{
	int err = guard_state__read(path, st);

	if (err == -ENOENT)
		elog("no guard state at %s: no guard has run (or use --state-file)", path);
	else if (err == -EINVAL)
		elog("%s is not a umtrace guard state file", path);
	else if (err)
		elog("cannot read %s: %s", path, strerror(-err));
	return err;
}
