// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "lib/sys.h"
#include "attach/caps.h"
#include "lib/log.h"
#include "attach/session.h"

static volatile sig_atomic_t exiting;
static volatile sig_atomic_t exit_signal;

static void on_signal(int sig)
{
	exiting = 1;
	exit_signal = sig;
}

void session__stop(void)
{
	exiting = 1;
}

void session__init(struct session *s, struct attach_opts *ao, char **cmd,
		   const struct session_ops *ops, void *ctx)
{
	memset(s, 0, sizeof(*s));
	memset(s->pidfds, -1, sizeof(s->pidfds));
	s->ao = ao;
	s->cmd = cmd;
	s->ops = ops;
	s->ctx = ctx;
	s->tick_ms = 1000;
	s->poll_ms = 100;
	torch_feed__init(&s->torch_feed, NULL);
}

/*
 * A pidfd tells when a traced process is gone, zombie included (kill(pid,
 * 0) still succeeds on a zombie); where the kernel has none, kill() it is.
 */
static int open_pids(struct session *s)
{
	size_t i;

	for (i = 0; i < s->ao->n_pids; i++) {
		s->pidfds[i] = (int)syscall(SYS_pidfd_open, s->ao->pids[i], 0);
		if (s->pidfds[i] >= 0 || errno == ENOSYS)
			continue;
		if (errno == ESRCH) {
			elog("no process with pid %d", s->ao->pids[i]);
			return -ESRCH;
		}
		elog("pid %d: %s", s->ao->pids[i], strerror(errno));
		return -errno;
	}
	return 0;
}

static bool pid_gone(const struct session *s, size_t i)
{
	struct pollfd pfd = { .fd = s->pidfds[i], .events = POLLIN };

	if (pfd.fd < 0)
		return kill(s->ao->pids[i], 0) && errno == ESRCH;
	return poll(&pfd, 1, 0) > 0;
}

static bool pids_gone(const struct session *s)
{
	size_t i;

	if (!s->ao->n_pids)
		return false;
	for (i = 0; i < s->ao->n_pids; i++)
		if (!pid_gone(s, i))
			return false;
	return true;
}

static const char *const kind_opt[LIB__KINDS] = {
	[LIB_CUDA] = "--libcuda",
	[LIB_C10] = "--libc10",
};

/* Explicit paths must all work; a bad one is an error. */
static int add_named(struct session *s, enum lib_kind kind, const char **paths, size_t n)
{
	size_t i;
	int err;

	for (i = 0; i < n; i++) {
		err = libcuda_set__add(&s->libs, paths[i], kind);
		if (err == -EISDIR) {
			elog("%s %s: is not a regular file", kind_opt[kind], paths[i]);
			return err;
		}
		if (err < 0) {
			elog("%s %s: %s", kind_opt[kind], paths[i], strerror(-err));
			return err;
		}
	}
	/* Named: no other file of that kind is looked for. */
	if (n)
		s->libs.skip |= 1U << kind;
	return 0;
}

/* A kind of library not named: look for it in processes every rescan_ms. */
static bool rescans(const struct session *s)
{
	return s->ao->rescan_ms && (!s->ao->n_libcuda || (s->torch && !s->ao->n_libc10));
}

/* Is a kind of library looked for (not named, and wanted)? */
static bool looks_for(const struct session *s, enum lib_kind kind)
{
	return !(s->libs.skip & (1U << kind));
}

static int find_libs(struct session *s)
{
	int err;

	if (s->ao->n_libc10 && !s->torch) {
		elog("--libc10: this command does not read PyTorch's allocator "
		     "(top, report, record and guard do)");
		return -EINVAL;
	}
	if (!s->torch)
		s->libs.skip |= 1U << LIB_C10;
	/* The loaders say when to look, for those who look. */
	if (!rescans(s))
		s->libs.skip |= 1U << LIB_LOADER;
	err = add_named(s, LIB_CUDA, s->ao->libcuda, s->ao->n_libcuda);
	if (!err)
		err = add_named(s, LIB_C10, s->ao->libc10, s->ao->n_libc10);
	if (err)
		return err;
	if (!looks_for(s, LIB_CUDA) && !looks_for(s, LIB_C10))
		return 0;
	libcuda_set__add_default(&s->libs);
	libcuda_set__scan_proc(&s->libs);
	return 0;
}

static int attach_one(struct session *s, struct libcuda *lib)
{
	bool explicit = !looks_for(s, lib->kind);
	const char *name = lib->name;
	char buf[32];
	const char *file = libcuda__file(lib, buf, sizeof(buf));
	int n;

	if (!file)
		return 0;
	if (lib->kind == LIB_LOADER) {
		n = probes__attach_loader(&s->probes, file);
		if (n < 0)
			vlog("%s: cannot probe the loader: %s", name, strerror(-n));
		lib->n_probed = n > 0 ? n : 0;
		return 0;
	}
	if (lib->kind == LIB_C10) {
		n = probes__attach_torch(&s->probes, file, name, !explicit);
		if (n == 0 && explicit) {
			elog("%s: defines no form of c10::reportMemoryUsageToProfiler", name);
			return -ENOENT;
		}
		if (n == 0)
			vlog("%s: defines no form of c10::reportMemoryUsageToProfiler", name);
	} else {
		n = probes__attach_lib(&s->probes, file, name, !explicit);
		if (n == 0 && explicit) {
			elog("%s: defines none of the CUDA allocation entry points", name);
			return -ENOENT;
		}
		if (n == 0)
			wlog("%s: defines none of the CUDA allocation entry points", name);
	}
	lib->n_probed = n > 0 ? n : 0;
	return n < 0 && explicit ? n : 0;
}

/* Attach to the libraries not yet probed; errors are fatal when explicit. */
static int attach_new_libs(struct session *s)
{
	size_t i;
	int err;

	for (i = 0; i < s->libs.n; i++) {
		struct libcuda *lib = &s->libs.libs[i];

		if (lib->probed)
			continue;
		lib->probed = true;
		err = attach_one(s, lib);
		/* A uprobe holds its file: ours would only keep a container's mount busy. */
		libcuda__close(lib);
		if (err)
			return err;
	}
	/* Said once all are attached: a bad --libcuda makes a one-line error. */
	for (i = 0; i < s->libs.n; i++) {
		struct libcuda *lib = &s->libs.libs[i];

		if (!lib->n_probed || lib->said)
			continue;
		if (lib->kind == LIB_LOADER)
			vlog("watching the dynamic loader %s for libraries mapped later",
			     lib->name);
		else if (lib->kind == LIB_C10)
			elog("probing PyTorch's allocator hook (%d form%s) in %s",
			     lib->n_probed, lib->n_probed > 1 ? "s" : "", lib->name);
		else
			elog("probing %d entry points in %s", lib->n_probed, lib->name);
		lib->said = true;
	}
	return 0;
}

/* A raw stack record whose lengths stay inside what arrived. */
static bool ustack_ok(const struct umt_ustack_rec *r, size_t size)
{
	return size >= sizeof(*r) && r->stack_len <= sizeof(r->stack) &&
	       r->nregs <= UMT_USTACK_REGS;
}

/* Read the process's maps once the records read together are done. */
static void lib_event(struct session *s, const struct umt_lib_event_rec *r)
{
	unsigned int i;

	for (i = 0; i < s->n_lib_pending; i++)
		if (s->lib_pending[i] == (pid_t)r->pid)
			return;
	if (s->n_lib_pending == SESSION_LIB_PENDING) {
		s->lib_overflow = true;
		return;
	}
	s->lib_pending[s->n_lib_pending] = (pid_t)r->pid;
	s->lib_pending_ns[s->n_lib_pending++] = r->ts_ns;
}

static int on_record(void *ctx, void *data, size_t size)
{
	struct session *s = ctx;
	const struct umt_call_rec *r = data;

	if (size < sizeof(r->type)) {
		s->bad_records++;
		return 0;
	}
	switch (r->type) {
	case UMT_REC_CALL:
		if (size < sizeof(*r))
			break;
		if (s->ops->on_call)
			s->ops->on_call(s->ctx, r);
		return 0;
	case UMT_REC_PROC_EXIT:
		if (size < sizeof(struct umt_proc_exit_rec))
			break;
		if (s->ops->on_exit)
			s->ops->on_exit(s->ctx, data);
		torch_feed__forget(&s->torch_feed, ((const struct umt_proc_exit_rec *)data)->pid);
		return 0;
	case UMT_REC_TORCH_SPENT:
		return 0;	/* the wake-up was the point: the loop looks */
	case UMT_REC_TORCH: {
		struct torch_sample ts;

		if (size < sizeof(struct umt_torch_rec))
			break;
		torch_feed__record(&s->torch_feed, data, &ts);
		if (s->ops->on_torch)
			s->ops->on_torch(s->ctx, &ts);
		return 0;
	}
	case UMT_REC_USTACK:
		if (!ustack_ok(data, size))
			break;
		if (s->ops->on_ustack)
			s->ops->on_ustack(s->ctx, data);
		return 0;
	case UMT_REC_GUARD:
		if (size < sizeof(struct umt_guard_rec))
			break;
		if (s->ops->on_guard)
			s->ops->on_guard(s->ctx, data);
		return 0;
	case UMT_REC_LIB_EVENT:
		if (size < sizeof(struct umt_lib_event_rec))
			break;
		lib_event(s, data);
		return 0;
	case UMT_REC_SCOPE_ASK:
		if (size < sizeof(struct umt_scope_ask_rec))
			break;
		if (s->ops->on_scope_ask)
			s->ops->on_scope_ask(s->ctx, data);
		return 0;
	}
	s->bad_records++;
	return 0;
}

static void install_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/*
 * The NUMA nodes that are not host RAM. A list the user gave that cannot
 * be used is an error; what auto finds but cannot use is a warning.
 */
static int device_nodes(struct session *s)
{
	const char *spec = s->ao->device_nodes;
	char why[200], list[64];
	int err;

	err = numa__device_nodes(spec, &s->nodes, why, sizeof(why));
	if (err && spec && strcmp(spec, "auto")) {
		elog("--device-nodes %s: %s", spec, why);
		return err;
	}
	if (err)
		wlog("GPU memory nodes found, but %s: their pages count as host memory", why);
	else if (s->nodes.n_device)
		elog("%u NUMA node(s) are not host RAM (%s): their pages are counted apart",
		     s->nodes.n_device, numa__format(&s->nodes, list, sizeof(list)));
	return 0;
}

/* Attach or detach the hook as its window says. */
static void torch_windows(struct session *s, uint64_t now_ns)
{
	struct torch_window *w = &s->torch_window;
	bool was = w->on;
	int err;

	if (!s->torch)
		return;
	torch_window__want(w, now_ns, probes__torch_cue_ns(&s->probes),
			   probes__torch_calls(&s->probes));
	/* Zeroed before the hook goes in: its first calls count. */
	if (w->fresh)
		probes__torch_fresh(&s->probes);
	w->fresh = false;
	if (w->on == was)
		return;
	err = probes__torch_set(&s->probes, w->on);
	if (err)
		wlog("cannot %s PyTorch's allocator hook: %s", w->on ? "attach" : "detach",
		     strerror(-err));
}

static int load_and_attach(struct session *s)
{
	struct probe_cfg cfg = {
		.ringbuf_bytes = s->ao->ringbuf_bytes,
		.filter_pids = s->ao->n_pids || s->cmd,
		.proc_pages = s->pages_mode,
		/* Nobody to unwind them: keep them out of the ring buffer. */
		.ustack_bytes = s->ops->on_ustack ? s->ustack_bytes : 0,
		.batch_wakeups = s->batch_wakeups,
		.count_outside = s->count_outside,
		.count_kthreads = s->count_kthreads,
		.driver_pool = s->driver_pool,
		.managed_faults = s->ao->managed_faults,
		.skip_softirq_frees = !s->guard,
		.torch = s->torch,
		.torch_windowed = !s->ao->torch_continuous,
		.torch_budget = TORCH_WINDOW_CALLS,
		.lib_events = rescans(s),
		.nodes = &s->nodes,
		.guard = s->guard,
		.leave = s->leave,
	};
	size_t i;
	int err;

	err = device_nodes(s);
	if (!err)
		err = probes__load(&s->probes, &cfg);
	if (err)
		return err;
	for (i = 0; i < s->ao->n_pids; i++)
		if ((err = probes__add_pid(&s->probes, s->ao->pids[i])))
			return err;
	if (s->have_cmd && (err = probes__add_pid(&s->probes, s->launched.pid)))
		return err;
	s->torch_feed.slots = probes__torch_slots(&s->probes);
	s->torch_feed.windowed = s->probes.torch_windowed;
	/* The first window opens before the libraries are probed: at once. */
	torch_window__init(&s->torch_window, s->ao->torch_continuous ? 0 :
			   s->probes.multi ? TORCH_WINDOW_EVERY_NS : TORCH_WINDOW_EVERY_PERF_NS,
			   clock__mono_ns());
	torch_windows(s, clock__mono_ns());
	err = probes__attach_kernel(&s->probes);
	/* The addresses in /proc/kallsyms need the capabilities kept until now. */
	if (!err && probes__driver_find(&s->probes) < 0)
		wlog("cannot find the NVIDIA driver's code: its page pool's returns are not seen");
	if (!err)
		err = attach_new_libs(s);
	if (err)
		return err;
	s->rb = ring_buffer__new(probes__events_fd(&s->probes), on_record, s, NULL);
	if (!s->rb) {
		err = -errno;
		elog("cannot open the ring buffer: %s", strerror(errno));
	}
	return err;
}

/* Will the rescan or the hook's windows attach perf-event uprobes later? */
static bool later_needs_sys_admin(const struct session *s)
{
	return (rescans(s) || s->probes.torch_windowed) && !s->probes.multi;
}

/*
 * What the loop still needs once attached: CAP_BPF and CAP_PERFMON to
 * attach to the libcuda files the rescan finds later (and, before Linux
 * 6.5 with unprivileged BPF off, for every bpf() call on the maps);
 * CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH to read other users'
 * /proc/PID/maps and /proc/PID/root and the files behind them (rescan,
 * symbolization); the guard's CAP_KILL to stop other users' processes.
 * uid 0 stays, so the root-owned files it writes (state file,
 * cgroup.freeze, pins) need nothing more.
 */
void session__drop_caps(struct session *s)
{
	cap_value_t keep[CAPS_KEEP_MAX];
	size_t n = 0;
	int err;

	keep[n++] = CAP_BPF;
	keep[n++] = CAP_PERFMON;
	/*
	 * Let in by CAP_SYS_ADMIN alone (see probes__check_env): bpf() needs
	 * it still. And creating a perf-event uprobe takes CAP_SYS_ADMIN
	 * again: a security fix reverted perf_uprobe_event_init() from
	 * CAP_PERFMON (c9e0924e5c2b) and went to the stable kernels, so
	 * CAP_PERFMON alone gets EACCES (6.18 here). Multi-uprobe links do
	 * not ask for it.
	 */
	if (!caps__permitted(CAP_BPF) || !caps__permitted(CAP_PERFMON) ||
	    later_needs_sys_admin(s))
		keep[n++] = CAP_SYS_ADMIN;
	keep[n++] = CAP_SYS_PTRACE;
	keep[n++] = CAP_DAC_READ_SEARCH;
	/* The guard stops jobs, and locks what it maps later (mem__lock). */
	if (s->guard) {
		keep[n++] = CAP_KILL;
		keep[n++] = CAP_IPC_LOCK;
	}
	err = caps__drop_to(keep, n);
	if (err == -EBUSY)
		wlog("threads started before the probes were attached keep their capabilities");
	else if (err)
		wlog("cannot drop capabilities (continuing with them): %s", strerror(-err));
	else
		vlog("capabilities dropped to what attaching and symbolizing need");
}

/*
 * Before the first look through /proc: the iterator's first listing is
 * taken as seen, and whatever maps a library after it shows at the next.
 */
static void open_scan(struct session *s)
{
	int err = libcuda_scan__open(&s->scan);

	if (err)
		vlog("rescan: no task iterator (%s): reading every /proc/PID/maps",
		     strerror(-err));
}

int session__start(struct session *s)
{
	int err;

	install_signals();
	s->torch &= !s->ao->no_libc10;
	err = probes__check_env();
	if (!err)
		err = open_pids(s);
	if (!err && rescans(s))
		open_scan(s);
	if (!err)
		err = find_libs(s);
	if (err)
		return err;
	s->pages_mode = !libcuda_set__count(&s->libs, LIB_CUDA);
	if (s->pages_mode)
		wlog("no libcuda found (linker cache, LD_LIBRARY_PATH, driver directories, running processes); "
		     "counting host pages per process instead; use --libcuda PATH to name one");
	if (s->cmd) {
		err = launch__start(&s->launched, s->cmd);
		if (err) {
			elog("cannot start %s: %s", s->cmd[0], strerror(-err));
			return err;
		}
		s->have_cmd = true;
	}
	err = load_and_attach(s);
	if (!err && !s->drop_caps_later)
		session__drop_caps(s);
	if (!err && s->have_cmd)
		err = launch__release(&s->launched);
	if (err && s->have_cmd)
		launch__abort(&s->launched);
	return err;
}

static void report_drops(struct session *s)
{
	struct probe_stats st;

	probes__stats(&s->probes, &st);
	if (st.rec_dropped == s->drops_reported)
		return;
	wlog("%llu records lost: the ring buffer was full (raise --ringbuf-size)",
	     (unsigned long long)(st.rec_dropped - s->drops_reported));
	s->drops_reported = st.rec_dropped;
}

static void report_skipped_stacks(struct session *s)
{
	struct probe_stats st;

	probes__stats(&s->probes, &st);
	if (st.ustack_skipped)
		wlog("%llu calls kept only their frame-pointer stack: the ring buffer was too "
		     "full for their raw stacks (raise --ringbuf-size)",
		     (unsigned long long)st.ustack_skipped);
}

static void rescan(struct session *s)
{
	int n = -1;

	if (s->scan.skel) {
		n = libcuda_scan__run(&s->scan, &s->libs);
		if (n < 0) {
			vlog("rescan: the iterator failed (%s): reading every /proc/PID/maps "
			     "from now on", strerror(-n));
			libcuda_scan__close(&s->scan);
		}
	}
	if (n < 0)
		n = libcuda_set__scan_proc(&s->libs);
	if (n > 0)
		attach_new_libs(s);
}

/*
 * Read the maps of the processes lib events named, and probe what they
 * mapped; past SESSION_LIB_PENDING at once, look at every process. The
 * delay from the event to the probes in place is what a job may run
 * unseen: -v says it.
 */
static void lib_events(struct session *s)
{
	pid_t pid = 0;
	uint64_t ns = 0;
	unsigned int i;
	int n, added = 0;

	for (i = 0; i < s->n_lib_pending; i++) {
		n = libcuda_set__scan_pid(&s->libs, s->lib_pending[i]);
		if (n > 0 && !added++) {
			pid = s->lib_pending[i];
			ns = s->lib_pending_ns[i];
		}
	}
	s->n_lib_pending = 0;
	if (s->lib_overflow) {
		s->lib_overflow = false;
		rescan(s);
	}
	if (!added)
		return;
	attach_new_libs(s);
	vlog("pid %d mapped a library to probe: probed %.1f ms after the kernel said so",
	     (int)pid, (clock__mono_ns() - ns) / 1e6);
}

static void torch_window_stats(const struct session *s)
{
	const struct probes *p = &s->probes;
	const struct torch_window *w = &s->torch_window;

	if (!s->torch || !w->every_ns || !p->torch_switches[1])
		return;
	vlog("PyTorch's allocator hook: %llu windows (%llu for its segments' moves, %llu "
	     "closed with their %llu calls taken); attaching took %.0f us, detaching %.0f us "
	     "on average", (unsigned long long)w->opened, (unsigned long long)w->cued,
	     (unsigned long long)w->spent, (unsigned long long)w->budget,
	     p->torch_switch_ns[1] / 1e3 / p->torch_switches[1],
	     p->torch_switches[0] ? p->torch_switch_ns[0] / 1e3 / p->torch_switches[0] : 0.0);
}

static void flush_torch(struct session *s)
{
	if (s->ops->on_torch)
		torch_feed__flush(&s->torch_feed, s->ops->on_torch, s->ctx);
}

/*
 * Wake for the next tick, not past it: with batched wake-ups an idle
 * daemon then wakes once a tick instead of once a poll_ms.
 */
static int poll_timeout(const struct session *s, uint64_t next_tick)
{
	uint64_t now = clock__mono_ms(), window = torch_window__next_ns(&s->torch_window);

	/* The hook's window turns then, to the millisecond above. */
	if (s->torch && window != UINT64_MAX && (window + 999999) / 1000000 < next_tick)
		next_tick = (window + 999999) / 1000000;
	if (next_tick <= now)
		return 0;
	return next_tick - now < (uint64_t)s->poll_ms ? (int)(next_tick - now) : s->poll_ms;
}

void session__tick_by(struct session *s, uint64_t at_ms)
{
	if (at_ms < s->next_tick_ms)
		s->next_tick_ms = at_ms;
}

int session__run(struct session *s)
{
	uint64_t start = clock__mono_ms(), now, next_scan;
	int err;

	s->next_tick_ms = start + s->tick_ms;
	next_scan = rescans(s) ? start + s->ao->rescan_ms : UINT64_MAX;
	while (!exiting) {
		err = ring_buffer__poll(s->rb, poll_timeout(s, s->next_tick_ms));
		/* Records sent without a wake-up are read here. */
		if (err >= 0 && s->batch_wakeups)
			err = ring_buffer__consume(s->rb);
		if (err < 0 && err != -EINTR) {
			elog("reading the ring buffer: %s", strerror(-err));
			return err;
		}
		if (s->n_lib_pending || s->lib_overflow)
			lib_events(s);
		torch_windows(s, clock__mono_ns());
		now = clock__mono_ms();
		if (now >= s->next_tick_ms) {
			report_drops(s);
			flush_torch(s);
			/* on_tick may change tick_ms, or want the next one sooner. */
			s->next_tick_ms = UINT64_MAX;
			if (s->ops->on_tick)
				s->ops->on_tick(s->ctx);
			session__tick_by(s, now + s->tick_ms);
		}
		if (now >= next_scan) {
			rescan(s);
			next_scan = now + s->ao->rescan_ms;
		}
		if (s->have_cmd && launch__done(&s->launched))
			break;
		if (pids_gone(s))
			break;
		if (s->duration_ms && now - start >= s->duration_ms)
			break;
	}
	/* Whatever the traced processes sent before they exited is queued. */
	err = ring_buffer__consume(s->rb);
	torch_window_stats(s);
	flush_torch(s);
	report_drops(s);
	report_skipped_stacks(s);
	return err < 0 ? err : 0;
}

void session__stats(const struct session *s, struct probe_stats *st)
{
	probes__stats(&s->probes, st);
}

size_t session__torch_unseen(const struct session *s, const char **files, size_t max,
			     uint64_t *calls)
{
	struct probe_stats st;

	probes__stats(&s->probes, &st);
	*calls = st.torch_other_devices;
	return torch_hook__unseen(&s->torch_feed, &s->libs, *calls, files, max);
}

int session__exit_code(struct session *s, int err)
{
	if (err)
		return 1;
	if (!s->have_cmd)
		return 0;
	if (launch__done(&s->launched))
		return launch__exit_code(&s->launched);
	return 128 + (exit_signal ? exit_signal : SIGTERM);
}

void session__close(struct session *s)
{
	size_t i;

	ring_buffer__free(s->rb);
	s->rb = NULL;
	if (s->probes.skel)
		probes__destroy(&s->probes);
	if (s->scan.skel)
		libcuda_scan__close(&s->scan);
	libcuda_set__free(&s->libs);
	torch_feed__free(&s->torch_feed);
	for (i = 0; i < ATTACH_MAX_PIDS; i++)
		if (s->pidfds[i] >= 0)
			close(s->pidfds[i]);
}
