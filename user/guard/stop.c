// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "guard/stop.h"
#include "lib/log.h"
#include "lib/units.h"

static const char *const reason_names[GUARD_N_REASONS] = {
	"admission", "floor", "reclaim", "policy",
};

unsigned int guard_reason__index(enum umt_guard_reason r)
{
	if (r < UMT_GUARD_ADMISSION || r > UMT_GUARD_POLICY)
		return UMT_GUARD_POLICY - UMT_GUARD_ADMISSION;
	return r - UMT_GUARD_ADMISSION;
}

const char *guard_reason__name(enum umt_guard_reason r)
{
	return reason_names[guard_reason__index(r)];
}

void guard_stop__log(const struct guard_stop *s)
{
	char held[32], metric[32];

	slog("guard: %s pid=%u ts=%" PRIu64 ".%09" PRIu64 " comm=\"%s\" cgroup=%s reason=%s "
	     "%s=%s gpu_host=%s top_site=\"%s\" detail=\"%s\"%s",
	     s->dry ? "would-stop" : "stop", s->pid, s->ts_ns / 1000000000,
	     s->ts_ns % 1000000000, s->comm, s->cgroup[0] ? s->cgroup : "-",
	     guard_reason__name(s->reason), guard_metric__name(s->metric),
	     fmt_bytes(s->metric_bytes, metric, sizeof(metric)),
	     fmt_bytes(s->held, held, sizeof(held)), s->top_site, s->detail,
	     s->send_err ? " send=failed" : "");
}

void guard_stop__exec_hook(const struct guard_stop *s, const char *hook, const char *bundle)
{
	char buf[64];

	snprintf(buf, sizeof(buf), "%u", s->pid);
	setenv("UMTRACE_PID", buf, 1);
	setenv("UMTRACE_COMM", s->comm, 1);
	setenv("UMTRACE_CGROUP", s->cgroup, 1);
	setenv("UMTRACE_REASON", guard_reason__name(s->reason), 1);
	setenv("UMTRACE_ACTION", s->dry ? "dry-run" : guard_act__name(s->action), 1);
	snprintf(buf, sizeof(buf), "%" PRIu64, s->metric_bytes);
	setenv("UMTRACE_AVAILABLE", buf, 1);
	snprintf(buf, sizeof(buf), "%" PRIu64, s->held);
	setenv("UMTRACE_HOST_BYTES", buf, 1);
	setenv("UMTRACE_TOP_SITE", s->top_site, 1);
	setenv("UMTRACE_POSTMORTEM", bundle, 1);
	execl("/bin/sh", "sh", "-c", hook, (char *)NULL);
	_exit(127);
}
