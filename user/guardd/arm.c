// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Arming the per-page programs: the margin of headroom within which they
 * must be attached (from how late the looks come and how fast a host
 * faults pages), and the helper process that looks and attaches them.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "guardd/arm.h"
#include "guardd/daemon.h"
#include "guardd/kernel.h"
#include "lib/procfs.h"
#include "lib/sys.h"
#include "lib/units.h"

/*
 * Enough pages that a fault's fixed cost is averaged (8 huge pages, 4096
 * small ones); little to take under the unit's MemoryMax.
 */
#define RATE_BYTES	(16ULL << 20)
#define RATE_TRIES	2
#define HUGE_ALIGN	(2ULL << 20)

uint64_t guard_arm__covered_late_us(unsigned int look_ms, uint64_t late_us)
{
	uint64_t look_us = (uint64_t)look_ms * 1000;

	return late_us > look_us ? late_us : look_us;
}

uint64_t guard_late__note(struct guard_late *l, int64_t late_us, uint64_t now_ms)
{
	if (!l->since_ms)
		l->since_ms = now_ms;
	while (now_ms - l->since_ms >= GUARD_LATE_KEEP_MS / 2) {
		l->prev_us = l->cur_us;
		l->cur_us = 0;
		l->since_ms += GUARD_LATE_KEEP_MS / 2;
	}
	if (late_us > 0 && (uint64_t)late_us > l->cur_us)
		l->cur_us = (uint64_t)late_us;
	return l->cur_us > l->prev_us ? l->cur_us : l->prev_us;
}

unsigned int guard_late__bucket(int64_t late_us)
{
	unsigned int b = 0;

	while (b + 1 < GUARD_LATE_BUCKETS && late_us >= (1000LL << b))
		b++;
	return b;
}

unsigned int guard_late__pct_ms(const uint64_t *hist, unsigned int pct)
{
	uint64_t n = 0, seen = 0;
	unsigned int b;

	for (b = 0; b < GUARD_LATE_BUCKETS; b++)
		n += hist[b];
	if (!n)
		return 0;
	for (b = 0; b < GUARD_LATE_BUCKETS; b++) {
		seen += hist[b];
		if (seen * 100 >= n * pct)
			break;
	}
	return b + 1 < GUARD_LATE_BUCKETS ? 1U << b : UINT32_MAX;
}

uint64_t guard_arm__margin(unsigned int cpus, uint64_t rate, unsigned int look_ms,
			   uint64_t late_us, uint64_t attach_us)
{
	unsigned __int128 us = (unsigned __int128)look_ms * 1000 +
			       guard_arm__covered_late_us(look_ms, late_us) + attach_us;
	unsigned __int128 m;

	/* A look very late on a large host must not wrap round to a small margin. */
	if (us > UINT64_MAX / GUARD_FASTER)
		return UINT64_MAX;
	m = (unsigned __int128)cpus * rate * (us * GUARD_FASTER) / 1000000;
	return m > UINT64_MAX ? UINT64_MAX : (uint64_t)m;
}

enum guard_arm_move guard_arm__decide(struct guard_arm_state *st, bool have_room,
				      int64_t room, uint64_t margin, uint64_t now_ms)
{
	if (!st->on) {
		if (have_room && room >= 0 && (uint64_t)room >= margin)
			return GUARD_ARM_STAY;
		st->on = true;
		st->far = false;
		return GUARD_ARM_ATTACH;
	}
	if (!have_room || room < 0 || (uint64_t)room <= 2 * margin) {
		st->far = false;
		return GUARD_ARM_STAY;
	}
	if (!st->far) {
		st->far = true;
		st->far_since_ms = now_ms;
		return GUARD_ARM_STAY;
	}
	if (now_ms - st->far_since_ms < GUARD_FAR_MS)
		return GUARD_ARM_STAY;
	st->on = false;
	st->far = false;
	return GUARD_ARM_DETACH;
}

unsigned int guard_arm__next_look_ms(bool have_room, int64_t room, uint64_t margin,
				     unsigned int cpus, uint64_t rate)
{
	unsigned __int128 speed = (unsigned __int128)cpus * rate * GUARD_FASTER;
	unsigned __int128 ms;

	if (!have_room || room < 0 || (uint64_t)room <= margin || !speed)
		return GUARD_LOOK_MS;
	ms = ((uint64_t)room - margin) * (unsigned __int128)1000 / speed;
	if (ms < GUARD_LOOK_MS)
		return GUARD_LOOK_MS;
	return ms > GUARD_LOOK_MAX_MS ? GUARD_LOOK_MAX_MS : (unsigned int)ms;
}

/* One pass over fresh memory; bytes a CPU second, 0 if it could not map. */
static uint64_t fault_once(bool huge)
{
	size_t len = RATE_BYTES + HUGE_ALIGN, page = (size_t)sysconf(_SC_PAGESIZE), i;
	char *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	volatile char *at;
	uint64_t t0, ns;

	if (map == MAP_FAILED)
		return 0;
	at = (char *)(((uintptr_t)map + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1));
	/* Either may be refused (no THP here): the pass measures what it gets. */
	madvise((void *)at, RATE_BYTES, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	t0 = clock__ns_of(CLOCK_THREAD_CPUTIME_ID);
	for (i = 0; i < RATE_BYTES; i += page)
		at[i] = 1;
	ns = clock__ns_of(CLOCK_THREAD_CPUTIME_ID) - t0;
	munmap(map, len);
	return ns ? (uint64_t)((unsigned __int128)RATE_BYTES * 1000000000ULL / ns) : 0;
}

int guard_arm__fault_rate(uint64_t *rate)
{
	uint64_t best = 0, r;
	int i;

	for (i = 0; i < 2 * RATE_TRIES; i++) {
		r = fault_once(i & 1);
		if (r > best)
			best = r;
	}
	*rate = best;
	return best ? 0 : -ENOMEM;
}

/* ---- the page programs' helper ---- */

/*
 * The page programs' helper (the margin above says when they are attached): a
 * process of its own, forked at arming, that looks at the headroom (every
 * GUARD_LOOK_MS near the floor, seldom far from it) and attaches or
 * detaches them. A process, not a thread,
 * so that each of it and the daemon outlives the other's death:
 *  - the daemon killed: the helper sees its pidfd, attaches and pins the
 *    page programs if the kernel side is left armed, and exits; a pinned
 *    kernel side then decides at every page, as it did before the helper.
 *  - the helper killed: the daemon reaps it and attaches them itself,
 *    until it exits.
 * It runs SCHED_FIFO where it may, so that a host busy faulting pages
 * does not make its looks late.
 */

static void set_helper(struct guard_armer *a, pid_t pid)
{
	guard_kernel__set_helper(&a->session->probes, (uint32_t)pid);
}

static int attach(struct guard_armer *a, struct guard_page_links *l)
{
	uint64_t t0 = clock__mono_ns();
	int err = guard_kernel__attach_pages(&a->session->probes, l, a->pins->dir);

	if (!err)
		a->sh->last_arm_us = (clock__mono_ns() - t0) / 1000;
	return err;
}

/*
 * The daemon is gone: leave a pinned kernel side deciding at every page,
 * if the pins are still its own. A new guard that replaced them in the
 * meantime keeps them: this one's kernel side must not come back beside
 * it, asked both before and after pinning.
 */
static void orphaned(struct guard_armer *a, struct guard_page_links *l)
{
	struct probes *p = &a->session->probes;

	if (!a->pins->dir || !guard_pins__owned(a->pins->dir, p))
		_exit(0);	/* a clean exit, nothing pinned, or replaced */
	if (guard_kernel__pages_pinned(p, a->pins->dir))
		_exit(0);
	if (attach(a, l)) {
		wlog("guard: the daemon is gone and the page programs cannot be attached: "
		     "only GPU calls are checked");
		_exit(0);
	}
	if (!guard_pins__owned(a->pins->dir, p)) {
		guard_kernel__detach_pages(p, l, a->pins->dir);
		_exit(0);
	}
	wlog("guard: the daemon is gone: its kernel side stays armed, page programs attached");
	_exit(0);
}

static void measure(struct guard_armer *a, unsigned int cpus)
{
	struct guard_arm_shared *sh = a->sh;
	uint64_t rate;

	if (guard_arm__fault_rate(&rate)) {
		/* No margin to trust: they are never detached. */
		sh->for_good = true;
		__atomic_store_n(&sh->margin, UINT64_MAX, __ATOMIC_RELEASE);
		return;
	}
	sh->rate = rate;
	sh->cpus = cpus;
	__atomic_store_n(&sh->margin, guard_arm__margin(cpus, rate, GUARD_LOOK_MS, 0,
							 sh->attach_us), __ATOMIC_RELEASE);
}

/*
 * The helper writes nothing to stderr while it looks: the daemon logs
 * what it did (guard_armer__tick). A write stuck on a full pipe would stop
 * its looks, and detached, nothing else would look.
 */
static void act(struct guard_armer *a, struct guard_page_links *l, struct guard_arm_state *st,
		enum guard_arm_move mv, int64_t room)
{
	struct guard_arm_shared *sh = a->sh;
	int err;

	if (mv == GUARD_ARM_DETACH) {
		guard_kernel__detach_pages(&a->session->probes, l, a->pins->dir);
		sh->on = false;
		sh->disarm_room = room;
		__atomic_store_n(&sh->disarms, sh->disarms + 1, __ATOMIC_RELEASE);
		return;
	}
	if (mv != GUARD_ARM_ATTACH)
		return;
	err = attach(a, l);
	if (err) {
		st->on = false;		/* the next look tries again */
		sh->attach_err = err;
		__atomic_store_n(&sh->attach_failures, sh->attach_failures + 1, __ATOMIC_RELEASE);
		return;
	}
	sh->on = true;
	sh->arm_room = room;
	__atomic_store_n(&sh->arms, sh->arms + 1, __ATOMIC_RELEASE);
}

/*
 * One look and what it calls for; when the next one is due, in ms. The
 * margin is kept above LOW, not the floor: the reclaim rule decides there,
 * and its program is attached with the page programs.
 */
static unsigned int look(struct guard_armer *a, struct guard_page_links *l,
			 struct guard_arm_state *st, unsigned int cpus)
{
	const struct guard_arm_shared *sh = a->sh;
	int64_t room = 0, above_low;
	bool have = !guard_kernel__look(&a->session->probes, &room);
	enum guard_arm_move mv;

	above_low = room - (int64_t)(a->pol->low - a->pol->floor);
	mv = guard_arm__decide(st, have, above_low, sh->margin, clock__mono_ms());
	act(a, l, st, mv, room);
	if (st->on)
		return GUARD_LOOK_MS;
	return guard_arm__next_look_ms(have, above_low, sh->margin, cpus, sh->rate);
}

/*
 * A look came late_us past its time. Past what the margin covered, the
 * margin widens to cover it before this look decides: the next may be as
 * late. Once no look has come that late for a while, it narrows back
 * (guardd/arm.h).
 */
static void note_late(struct guard_arm_shared *sh, struct guard_late *lt, int64_t late_us)
{
	uint64_t was = guard_arm__covered_late_us(GUARD_LOOK_MS, sh->covered_us), now;

	sh->looks++;
	sh->late_hist[guard_late__bucket(late_us)]++;
	if (late_us > 0 && (uint64_t)late_us > sh->max_late_us)
		sh->max_late_us = (uint64_t)late_us;
	sh->covered_us = guard_late__note(lt, late_us, clock__mono_ms());
	now = guard_arm__covered_late_us(GUARD_LOOK_MS, sh->covered_us);
	if (sh->for_good || now == was)
		return;
	if (now > was)
		sh->widenings++;
	else
		sh->narrowings++;
	__atomic_store_n(&sh->margin, guard_arm__margin(sh->cpus, sh->rate, GUARD_LOOK_MS,
							 sh->covered_us, sh->attach_us),
			 __ATOMIC_RELEASE);
}

static void __attribute__((noreturn)) helper_main(struct guard_armer *a, pid_t daemon,
						   struct guard_page_links *l)
{
	struct sched_param sp = { .sched_priority = 1 };
	struct guard_arm_state st = { .on = true };
	struct pollfd pfd = { .events = POLLIN };
	struct guard_late lt = {};
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned int cpus = online > 0 ? (unsigned int)online : 1, next = GUARD_LOOK_MS;
	uint64_t due;
	int err;

	set_helper(a, getpid());
	/* The hook's window closes in the daemon: a copy here would keep it open. */
	probes__torch_drop(&a->session->probes);
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	prctl(PR_SET_NAME, "umtrace-arm");
	pfd.fd = pidfd__open(daemon);
	if (pfd.fd < 0 || getppid() != daemon)
		orphaned(a, l);
	/* Nothing written here: a full stderr would hold the looks (act). */
	if (sched_setscheduler(0, SCHED_FIFO, &sp))
		a->sh->sched_err = -errno;
	a->sh->memlock = guard__lock_memory(&err);
	session__drop_caps(a->session);
	measure(a, cpus);
	for (;;) {
		due = clock__mono_ns() + next * 1000000ULL;
		if (poll(&pfd, 1, (int)next) > 0)
			orphaned(a, l);
		note_late(a->sh, &lt, ((int64_t)clock__mono_ns() - (int64_t)due) / 1000);
		next = look(a, l, &st, cpus);
	}
}

/* The rest of the daemon cannot use them: see guardd/arm.h. */
static bool auto_allowed(struct guard_armer *a, const struct guard_opts *o, const char **why)
{
	*why = NULL;
	if (o->cfg.pages_always)
		*why = "--page-programs always";
	else if (o->ao.managed_faults)
		*why = "--managed-faults counts pages at every fault";
	else if (!guard_kernel__exact(&a->session->probes))
		*why = "the kernel's counters are not used";
	return !*why;
}

int guard_armer__start(struct guard_armer *a, struct session *session,
		       const struct guard_pins *pins, const struct guard_opts *o)
{
	struct sched_param sp = { .sched_priority = 1 }, normal = { .sched_priority = 0 };
	const char *why;
	uint64_t t0;
	bool fifo;
	pid_t pid;
	int err;

	a->session = session;
	a->pins = pins;
	a->pol = &o->pol;
	a->sh = mmap(NULL, sizeof(*a->sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		     -1, 0);
	if (a->sh == MAP_FAILED) {
		a->sh = NULL;
		return -errno;
	}
	memset(a->sh, 0, sizeof(*a->sh));
	/*
	 * Attached from the start: the helper detaches them once it knows it
	 * may. Timed as the helper will attach them, at its priority: on a
	 * host with every CPU busy the daemon's own wait for a CPU is no part
	 * of what the margin must cover.
	 */
	fifo = !sched_setscheduler(0, SCHED_FIFO, &sp);
	t0 = clock__mono_ns();
	err = guard_kernel__attach_pages(&a->session->probes, &a->links, a->pins->dir);
	a->sh->attach_us = (clock__mono_ns() - t0) / 1000;
	if (fifo)
		sched_setscheduler(0, SCHED_OTHER, &normal);
	if (err) {
		elog("cannot attach the page programs: %s", strerror(-err));
		return err;
	}
	a->sh->on = true;
	if (!auto_allowed(a, o, &why)) {
		a->sh->for_good = true;
		vlog("guard: page programs attached all the time: %s", why);
		return 0;
	}
	pid = fork();
	if (pid < 0) {
		a->sh->for_good = true;
		wlog("guard: cannot start the page programs' helper (%s): they stay attached",
		     strerror(errno));
		return 0;
	}
	if (!pid)
		helper_main(a, getppid(), &a->links);
	a->pid = pid;
	set_helper(a, pid);
	/* The helper and the pins hold them now. */
	guard_kernel__drop_pages(&a->links);
	return 0;
}

/* The helper died: keep the page programs attached from here on. */
static void helper_died(struct guard_armer *a, int status)
{

	a->pid = 0;
	a->sh->for_good = true;
	if (!guard_kernel__pages_pinned(&a->session->probes, a->pins->dir) &&
	    guard_kernel__attach_pages(&a->session->probes, &a->links, a->pins->dir)) {
		a->sh->on = false;
		wlog("guard: the page programs' helper died and they cannot be attached: only "
		     "GPU calls are checked");
		return;
	}
	a->sh->on = true;
	wlog("guard: the page programs' helper died (%s %d): they stay attached",
	     WIFSIGNALED(status) ? "signal" : "status",
	     WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
}

static void log_room(const char *what, int64_t room, const char *more)
{
	char b[32];

	vlog("guard: page programs %s: %s above the floor%s", what,
	     fmt_bytes_signed(room, false, b, sizeof(b)), more);
}

static void say_margin(const struct guard_arm_shared *sh, uint64_t margin, uint64_t before)
{
	char m[32], r[32];

	if (margin == UINT64_MAX && !before) {
		wlog("guard: cannot measure the fault rate: page programs stay attached");
		return;
	}
	if (before && margin < before)
		elog("guard: looks on time again: the page programs' margin narrows to %s above "
		     "low, for looks up to %.1f ms late", fmt_bytes(margin, m, sizeof(m)),
		     guard_arm__covered_late_us(GUARD_LOOK_MS, sh->covered_us) / 1000.0);
	else if (before)
		wlog("guard: a look came %.1f ms past its time: the page programs' margin widens to "
		     "%s above low", sh->covered_us / 1000.0, fmt_bytes(margin, m, sizeof(m)));
	else
		vlog("guard: page programs attached within %s above low: %u CPUs x %s/s x "
		     "(%u ms + %u ms late + %llu us) x %u", fmt_bytes(margin, m, sizeof(m)),
		     sh->cpus, fmt_bytes(sh->rate, r, sizeof(r)), GUARD_LOOK_MS, GUARD_LOOK_MS,
		     (unsigned long long)sh->attach_us, GUARD_FASTER);
}

/* What the helper could not do at its start, said once it looks. */
static void say_helper(struct guard_armer *a, const struct guard_arm_shared *sh)
{
	if (a->helper_said || !__atomic_load_n(&sh->looks, __ATOMIC_ACQUIRE))
		return;
	a->helper_said = true;
	if (sh->sched_err)
		vlog("guard: the page programs' helper runs at normal priority: %s",
		     strerror(-sh->sched_err));
	if (sh->memlock != MEM_LOCK_ALL)
		wlog("guard: the page programs' helper locked %s of its memory",
		     mem_lock__name(sh->memlock));
}

void guard_armer__tick(struct guard_armer *a)
{
	const struct guard_arm_shared *sh = a->sh;
	uint64_t arms, disarms, fails, margin;
	char what[64];

	if (!sh || !a->pid)
		return;
	/*
	 * Widened by a quarter or more (a noisy host's creeping lateness says
	 * little), or narrowed back.
	 */
	margin = __atomic_load_n(&sh->margin, __ATOMIC_ACQUIRE);
	if (margin && (!a->margin_said || margin < a->margin_said ||
		       margin - a->margin_said > a->margin_said / 4)) {
		say_margin(sh, margin, a->margin_said);
		a->margin_said = margin;
	}
	arms = __atomic_load_n(&sh->arms, __ATOMIC_ACQUIRE);
	disarms = __atomic_load_n(&sh->disarms, __ATOMIC_ACQUIRE);
	fails = __atomic_load_n(&sh->attach_failures, __ATOMIC_ACQUIRE);
	if (disarms != a->disarms_said && arms == a->arms_said)
		log_room("detached", sh->disarm_room, "");
	if (arms != a->arms_said) {
		snprintf(what, sizeof(what), "attached in %llu us",
			 (unsigned long long)sh->last_arm_us);
		log_room(what, sh->arm_room, arms - a->arms_said > 1 ? " (the last of several)" : "");
	}
	if (fails != a->fails_said)
		wlog("guard: cannot attach the page programs (%s): the helper tries again",
		     strerror(-sh->attach_err));
	say_helper(a, sh);
	a->arms_said = arms;
	a->disarms_said = disarms;
	a->fails_said = fails;
}

void guard_armer__reaped(struct guard_armer *a, pid_t pid, int status)
{
	if (pid > 0 && pid == a->pid)
		helper_died(a, status);
}

void guard_armer__stop(struct guard_armer *a)
{

	if (a->pid > 0) {
		kill(a->pid, SIGKILL);
		waitpid(a->pid, NULL, 0);
		a->pid = 0;
	}
	guard_kernel__drop_pages(&a->links);
	if (a->sh)
		munmap(a->sh, sizeof(*a->sh));
	a->sh = NULL;
}
