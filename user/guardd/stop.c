// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "guardd/stop.h"
#include "lib/escape.h"
#include "lib/log.h"
#include "lib/sys.h"
#include "lib/units.h"
#include "export/torch_out.h"
#include "model/cuda_api.h"

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

void guard_stop__kernel_detail(const struct umt_guard_rec *r, char *buf, size_t len)
{
	char a[32], b[32];
	int64_t room = r->headroom_pages * (int64_t)page__size();

	switch (r->reason) {
	case UMT_GUARD_ADMISSION:
		snprintf(buf, len, "%s of %s with %s above the floor",
			 cuda_api__name(r->api), fmt_bytes(r->cost_bytes, a, sizeof(a)),
			 fmt_bytes_signed(room, false, b, sizeof(b)));
		break;
	case UMT_GUARD_FLOOR:
		snprintf(buf, len, "a page taken %s past the floor",
			 fmt_bytes_signed(-room, false, a, sizeof(a)));
		break;
	default:
		snprintf(buf, len, "direct reclaim with %s under low",
			 fmt_bytes_signed(-room, false, a, sizeof(a)));
		break;
	}
}

#define TORCH_FIELDS_LEN (128 + ESC_KV_LEN(GUARD_STOP_CAUSE_MAX))

/*
 * " torch_allocated=40M torch_reserved=638M torch_verdict=cache-held
 * torch_cause=\"fragmentation 4.0s-9.9s: reserved +4.3G, floor flat, ...\"":
 * what an operator asks first of a stopped PyTorch job; "" without it.
 */
static void torch_fields(const struct guard_stop *s, char *buf, size_t len)
{
	const struct torch_verdict *v = &s->torch_v;
	char a[16], r[16];

	char cause[ESC_KV_LEN(GUARD_STOP_CAUSE_MAX)];

	buf[0] = '\0';
	if (!s->torch)
		return;
	esc__kv(s->cause[0] ? s->cause : "-", cause, sizeof(cause));
	snprintf(buf, len, " torch_allocated=%s torch_reserved=%s torch_verdict=%s torch_cause=%s",
		 fmt_bytes(v->allocated, a, sizeof(a)),
		 v->reserved_known ? fmt_bytes(v->reserved, r, sizeof(r)) : "?",
		 s->verdict, cause);
}

void guard_stop__name(struct guard_stop *s)
{
	s->reason_name = s->warn ? "warn" : guard_reason__name(s->reason);
	if (s->warn)
		s->action_name = "warn";
	else
		s->action_name = s->dry ? "dry-run" : guard_act__name(s->action);
	s->metric_name = guard_metric__name(s->metric);
	s->cause[0] = '\0';
	if (!s->torch) {
		s->verdict = "";
		return;
	}
	s->verdict = s->torch_v.warmup ? "warm-up" : torch_kind__name(s->torch_v.kind);
	if (s->torch_v.has_cause)
		torch_out__episode(&s->torch_v.cause, s->torch_v.first_ns, s->cause,
				   sizeof(s->cause));
}

/* Every value a name went into is quoted and escaped: one line, no forged key. */
void guard_stop__log(const struct guard_stop *s)
{
	char held[32], metric[32], torch[TORCH_FIELDS_LEN], comm[ESC_KV_LEN(sizeof(s->comm))];
	char cgroup[ESC_KV_LEN(sizeof(s->cgroup))], site[ESC_KV_LEN(sizeof(s->top_site))];
	char detail[ESC_KV_LEN(sizeof(s->detail))];

	torch_fields(s, torch, sizeof(torch));
	esc__kv(s->comm, comm, sizeof(comm));
	esc__kv(s->cgroup[0] ? s->cgroup : "-", cgroup, sizeof(cgroup));
	esc__kv(s->top_site, site, sizeof(site));
	esc__kv(s->detail, detail, sizeof(detail));
	slog("guard: %s pid=%u ts=%" PRIu64 ".%09" PRIu64 " comm=%s cgroup=%s reason=%s "
	     "%s=%s gpu_host=%s%s top_site=%s detail=%s%s",
	     s->dry ? "would-stop" : "stop", s->pid, s->ts_ns / 1000000000,
	     s->ts_ns % 1000000000, comm, cgroup,
	     s->reason_name, s->metric_name,
	     fmt_bytes(s->metric_bytes, metric, sizeof(metric)),
	     fmt_bytes(s->held, held, sizeof(held)), torch, site, detail,
	     s->send_err ? " send=failed" : "");
}

void guard_stop__log_warn(const struct guard_stop *s, const char *signal)
{
	char held[32], metric[32], rate[32], torch[TORCH_FIELDS_LEN], comm[ESC_KV_LEN(sizeof(s->comm))];
	char cgroup[ESC_KV_LEN(sizeof(s->cgroup))], site[ESC_KV_LEN(sizeof(s->top_site))];

	torch_fields(s, torch, sizeof(torch));
	esc__kv(s->comm, comm, sizeof(comm));
	esc__kv(s->cgroup[0] ? s->cgroup : "-", cgroup, sizeof(cgroup));
	esc__kv(s->top_site, site, sizeof(site));
	slog("guard: warn pid=%u ts=%" PRIu64 ".%09" PRIu64 " comm=%s cgroup=%s "
	     "seconds_to_floor=%" PRIu64 " horizon=%" PRIu64 "s grows=%s/h %s=%s gpu_host=%s%s "
	     "top_site=%s signal=%s%s",
	     s->pid, s->ts_ns / 1000000000, s->ts_ns % 1000000000, comm, cgroup,
	     s->eta_s, s->eta_horizon_s,
	     fmt_bytes(s->per_hour > 0 ? (uint64_t)s->per_hour : 0, rate, sizeof(rate)),
	     s->metric_name, fmt_bytes(s->metric_bytes, metric, sizeof(metric)),
	     fmt_bytes(s->held, held, sizeof(held)), torch, site,
	     !signal ? "-" : s->dry ? "dry-run" : signal, s->signal_err ? " send=failed" : "");
}

void guard_stop__exec_hook(const struct guard_stop *s, const char *hook, const char *bundle)
{
	char buf[64], text[ESC_TERM_LEN(GUARD_STOP_SITE_MAX)];

	/*
	 * Names in the terminal form: printable, so a hook that echoes them,
	 * logs them or puts them in Slurm's AdminComment writes no control
	 * byte. A plain name (and every cgroup path a manager makes) is
	 * unchanged.
	 */
	snprintf(buf, sizeof(buf), "%u", s->pid);
	setenv("UMTRACE_PID", buf, 1);
	setenv("UMTRACE_COMM", esc__term(s->comm, text, sizeof(text)), 1);
	setenv("UMTRACE_CGROUP", esc__term(s->cgroup, text, sizeof(text)), 1);
	setenv("UMTRACE_REASON", s->reason_name, 1);
	setenv("UMTRACE_ACTION", s->action_name, 1);
	snprintf(buf, sizeof(buf), "%" PRIu64, s->metric_bytes);
	setenv("UMTRACE_AVAILABLE", buf, 1);
	snprintf(buf, sizeof(buf), "%" PRIu64, s->held);
	setenv("UMTRACE_HOST_BYTES", buf, 1);
	setenv("UMTRACE_TOP_SITE", esc__term(s->top_site, text, sizeof(text)), 1);
	if (s->torch) {
		snprintf(buf, sizeof(buf), "%" PRIu64, s->torch_v.allocated);
		setenv("UMTRACE_TORCH_ALLOCATED", buf, 1);
		snprintf(buf, sizeof(buf), "%" PRIu64, s->torch_v.reserved);
		setenv("UMTRACE_TORCH_RESERVED", s->torch_v.reserved_known ? buf : "", 1);
		setenv("UMTRACE_TORCH_VERDICT", s->verdict, 1);
		setenv("UMTRACE_TORCH_CAUSE", s->cause, 1);
	}
	if (s->warn) {
		snprintf(buf, sizeof(buf), "%" PRIu64, s->eta_s);
		setenv("UMTRACE_SECONDS_TO_FLOOR", buf, 1);
	}
	setenv("UMTRACE_POSTMORTEM", bundle, 1);
	execl("/bin/sh", "sh", "-c", hook, (char *)NULL);
	_exit(127);
}
