// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* umtrace guard: its usage; the daemon is user/guardd/. */
#include <stdio.h>
#include <stdlib.h>
#include "attach/opts.h"
#include "cmd/commands.h"
#include "guardd/daemon.h"
#include "guard/pin.h"
#include "guard/state.h"
#include "lib/log.h"

void guard_usage(FILE *f)
{
	fprintf(f,
"usage: umtrace guard [OPTIONS]\n"
"\n"
"Stop (SIGSTOP, or freeze its cgroup; never kill) the process whose memory use\n"
"is about to take the host below FLOOR, decided in the kernel:\n"
"  - at a GPU allocation call's entry, before the call runs, when its host\n"
"    cost (by the platform's model) would cross the floor;\n"
"  - at the page that crosses the floor, for pages taken outside GPU calls;\n"
"  - when it enters direct reclaim with less than LOW left.\n"
"On top, every sample of /proc/meminfo (100 ms near the thresholds, up to 1 s\n"
"far from them) stops the in-scope process holding the most GPU-attributed\n"
"host memory when one sample drops by DROP and leaves less than LOW, or when\n"
"less than FLOOR is left two samples in a row. Stopped jobs stay stopped\n"
"until 'umtrace resume' (or --auto-resume). Runs until SIGINT or SIGTERM.\n"
"\n"
"Options:\n"
"      --floor SIZE         never go below this (default 2500M, scaled down on\n"
"                           hosts under 32G); SIZE is 1536M, 2G, or 5%% of MemTotal\n"
"      --low SIZE           the reclaim and drop rule's bar (default 3000M)\n"
"      --drop SIZE          one sample's fall that counts as a burst (default 2500M)\n"
"      --metric available|free  what is compared (default available: MemAvailable)\n"
"      --action stop|freeze stop the process, or freeze its cgroup v2 as well\n"
"      --scope SCOPE        who may be stopped: gpu (default: processes that made\n"
"                           GPU calls), all, pid:PID[,PID...], cgroup:PATH,\n"
"                           comm:REGEX\n"
"      --protect WHO[,WHO...]  never stop these: exe:PATH, cgroup:PATH,\n"
"                           uid:N|USER, or NAME (root's process run from root's\n"
"                           file NAME); pid 1, kernel threads, umtrace, sshd and\n"
"                           systemd-journald never are\n"
"  -n, --dry-run            decide and log, stop nothing\n"
"      --auto-resume SIZE   resume stopped jobs once the metric stays above SIZE\n"
"      --on-stop CMD        run CMD (sh -c) after each stop, with UMTRACE_* variables\n"
"      --warn-eta DURATION  warn a job in scope whose host memory grows toward the\n"
"                           floor when, at its pace, the floor is nearer than\n"
"                           DURATION (90s, 30m, 2h): one 'warn' log line, once\n"
"                           until it stops growing toward it; never instead of\n"
"                           the stop\n"
"      --on-warn CMD        then run CMD (sh -c), with the --on-stop variables and\n"
"                           UMTRACE_SECONDS_TO_FLOOR\n"
"      --warn-signal SIG    then send SIG (USR1, USR2, HUP, INT, TERM) to the job:\n"
"                           one that does not catch it ends\n"
"      --postmortem-dir DIR write a bundle per stop: report, held stacks, recording\n"
"      --metrics-file PATH  Prometheus text for node_exporter's textfile collector\n"
"      --state-file PATH    for 'umtrace status' and 'resume' (default\n"
"                           " GUARD_STATE_DEFAULT ")\n"
"      --config FILE        read options from an INI file; flags override it\n"
"      --no-pin             do not pin the kernel side in " GUARD_PIN_DIR ":\n"
"                           by default it stays armed if the daemon is killed\n"
"                           (a clean exit on SIGINT or SIGTERM disarms it)\n"
"      --torch              probe PyTorch's caching allocator hook (libc10), the\n"
"                           default: each stop then says the job's allocated\n"
"                           and reserved bytes and verdict. The hook is\n"
"                           attached in windows of 1000 calls a second (see\n"
"                           --libc10-every-call)\n"
"      --no-torch           leave it alone (over torch = true in --config)\n"
"      --page-programs auto|always  auto (default): the per-page programs are\n"
"                           attached only within a margin of the floor that\n"
"                           the host cannot cross between two looks (10 ms\n"
"                           apart near it); always: attached all the time,\n"
"                           every GPU call's host pages counted\n");
	attach_opts__usage(f);
	fprintf(f,
"  -h, --help               show this help\n"
"\n"
"The guard's ring buffer is 1M unless --ringbuf-size says otherwise; -p is\n"
"not a guard option (use --scope pid:).\n"
"\n"
"The platform decides what a GPU call costs the host: on unified memory\n"
"(GB10, Jetson, Thor) a device allocation costs its size; on a discrete GPU\n"
"only pinned and registered host memory does. Without --platform it is\n"
"discrete when the NVIDIA driver lists a GPU with memory of its own, and\n"
"unified otherwise.\n");
}

int cmd_guard(int argc, char **argv)
{
	struct guard_opts *o = calloc(1, sizeof(*o));
	int r;

	if (!o) {
		elog("out of memory");
		return 1;
	}
	r = guard_opts__parse(o, argc, argv);
	if (r) {
		if (r > 0)
			guard_usage(stdout);
		guard_opts__free(o);
		free(o);
		return r > 0 ? 0 : 2;
	}
	r = guard__run(o);
	free(o);
	return r;
}
