// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * lifecycle: a process that ends, execs, forks or hands its pid on while
 * GPU calls are in flight, for tests/integration/test_faults.py. It drives
 * the fake libcuda.so.1 and writes what it did as JSON ground truth, one
 * file per process image: PREFIX.ROLE.json.
 *
 * usage: lifecycle MODE -o PREFIX [-t THREADS] [-n ITERS] [-s SIZE]
 *                  [-w HOLD_MS] [-- COMMAND [ARGS...]]
 *
 *   exit      THREADS threads each make ITERS cuMemAlloc_v2 (kept) and
 *             cuMemHostAlloc/cuMemFreeHost pairs, then enter one more
 *             cuMemAlloc_v2 that sleeps inside the fake; once all are
 *             asleep the process writes PREFIX.exit.json and exits.
 *   kill      the same without the ending: threads loop on allocation
 *             and free pairs (slow with FAKECUDA_DELAY_MS) until killed.
 *             What was started and finished is counted in PREFIX.kill.map
 *             (a shared mapping of counters) so that it survives SIGKILL;
 *             PREFIX.kill.json says whose they are and their layout:
 *             "apis" names the entry points in the order of "started"
 *             and then "finished", u64 each, native byte order.
 *   exec      as exit, but the first thread's handler for SIGUSR1 execs
 *             COMMAND while that thread sleeps inside its call: the exec
 *             happens inside a GPU call, and the other threads die in
 *             theirs. PREFIX.exec.json is written before.
 *   fork      ITERS cuMemAlloc_v2 kept; a second thread enters a call that
 *             sleeps; the main thread forks meanwhile. The child makes
 *             ITERS alloc/free and cuMemHostAlloc/cuMemFreeHost pairs and
 *             ITERS cuMemAlloc_v2 it keeps (released by its exit), the
 *             parent ITERS alloc/free pairs at
 *             the same time; each writes PREFIX.parent.json or
 *             PREFIX.child.json.
 *   pidreuse  a child A makes ITERS cuMemAlloc_v2 and exits holding them
 *             (HOLD_MS later);
 *             once it is reaped a child B is created with A's pid (clone3
 *             set_tid: root) and execs COMMAND (default: this program in
 *             role "b": ITERS alloc/free pairs, 2 x ITERS kept, so that
 *             its holdings differ from A's, HOLD_MS held).
 *             PREFIX.a.json, PREFIX.b.json (role b), PREFIX.pidreuse.json
 *             with both pids and whether the pid was reused.
 *
 * Every JSON file has "role", "pid", "tids", "calls" (entry point name:
 * calls made, counted before each call so a call in flight is counted),
 * "kept" (allocations never freed) and "inflight" (tids asleep in a call
 * when the image ended).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/sched.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuda_fake.h"

#define LC_MAX_THREADS	256
#define LC_ASLEEP_MS	30000	/* a call in flight outlives any test */
#define LC_WAIT_MS	20000

static struct {
	const char *mode;
	const char *prefix;
	unsigned int threads;
	unsigned long iters;
	uint64_t size;
	unsigned long hold_ms;
	char **cmd;		/* after "--" */
} opt = {
	.threads = 1,
	.iters = 1,
	.size = 1 << 20,
};

/* Calls made by this image, by fake entry point; shared with SIGKILL mode. */
struct lc_counts {
	unsigned long long started[FAKECUDA_API_COUNT];
	unsigned long long finished[FAKECUDA_API_COUNT];
	unsigned long long kept;
};

static struct lc_counts lc_local;
static struct lc_counts *lc = &lc_local;
static pid_t lc_tids[LC_MAX_THREADS];
static pid_t lc_inflight[LC_MAX_THREADS];
static unsigned int lc_ninflight;
static pthread_barrier_t lc_barrier;
/* workers past their ordinary calls, about to enter the last one */
static unsigned int lc_at_last;

#define LC_CALL(name, call) ({						\
	CUresult __r;							\
	__atomic_add_fetch(&lc->started[FAKECUDA_API_##name], 1, __ATOMIC_SEQ_CST); \
	__r = name call;						\
	__atomic_add_fetch(&lc->finished[FAKECUDA_API_##name], 1, __ATOMIC_SEQ_CST); \
	__r;								\
})

static void lc_sleep_ms(unsigned long ms)
{
	struct timespec ts = {
		.tv_sec = ms / 1000,
		.tv_nsec = (long)(ms % 1000) * 1000000L,
	};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void __attribute__((noreturn)) lc_die(const char *what)
{
	fprintf(stderr, "lifecycle: %s: %s\n", what, strerror(errno));
	_exit(1);
}

/* ---- ground truth ---- */

static int lc_write_json(const char *role, const char *extra)
{
	char path[4096], tmp[4200];
	const char *sep = "";
	unsigned int i;
	FILE *f;

	snprintf(path, sizeof(path), "%s.%s.json", opt.prefix, role);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return -1;
	fprintf(f, "{\"role\": \"%s\", \"pid\": %d, \"size\": %llu, \"tids\": [",
		role, (int)getpid(), (unsigned long long)opt.size);
	for (i = 0; i < opt.threads && lc_tids[i]; i++)
		fprintf(f, "%s%d", i ? ", " : "", (int)lc_tids[i]);
	fprintf(f, "], \"calls\": {");
	for (i = 0; i < FAKECUDA_API_COUNT; i++) {
		unsigned long long n = __atomic_load_n(&lc->started[i], __ATOMIC_SEQ_CST);

		if (!n)
			continue;
		fprintf(f, "%s\"%s\": %llu", sep, fakecuda_api_name(i), n);
		sep = ", ";
	}
	fprintf(f, "}, \"kept\": %llu, \"inflight\": [", lc->kept);
	for (i = 0; i < lc_ninflight; i++)
		fprintf(f, "%s%d", i ? ", " : "", (int)lc_inflight[i]);
	fprintf(f, "]%s%s}\n", extra ? ", " : "", extra ? extra : "");
	if (fclose(f))
		return -1;
	return rename(tmp, path);
}

/* ---- building blocks ---- */

static void lc_alloc_kept(unsigned long n)
{
	CUdeviceptr p;
	unsigned long i;

	for (i = 0; i < n; i++)
		if (!LC_CALL(cuMemAlloc_v2, (&p, opt.size)))
			__atomic_add_fetch(&lc->kept, 1, __ATOMIC_SEQ_CST);
}

static void lc_alloc_free(unsigned long n)
{
	CUdeviceptr p;
	unsigned long i;

	for (i = 0; i < n; i++)
		if (!LC_CALL(cuMemAlloc_v2, (&p, opt.size)))
			LC_CALL(cuMemFree_v2, (p));
}

static void lc_host_pairs(unsigned long n)
{
	unsigned long i;
	void *h;

	for (i = 0; i < n; i++)
		if (!LC_CALL(cuMemHostAlloc, (&h, opt.size, 0)))
			LC_CALL(cuMemFreeHost, (h));
}

/* One more call that sleeps in the fake until the image ends. */
static void lc_call_forever(void)
{
	CUdeviceptr p;

	fakecuda_set_thread_delay_ms(LC_ASLEEP_MS);
	LC_CALL(cuMemAlloc_v2, (&p, opt.size));
}

/*
 * Wait until n threads sleep inside calls; the fake counts them. With
 * FAKECUDA_DELAY_MS every call sleeps: count only once at_last (if given)
 * says the threads have no other call left to make.
 */
static int lc_wait_asleep(unsigned long long n, const unsigned int *at_last)
{
	struct fakecuda_stats st;
	int i;

	for (i = 0; i < LC_WAIT_MS; i++) {
		fakecuda_stats(&st);
		if (st.sleeping >= n &&
		    (!at_last || __atomic_load_n(at_last, __ATOMIC_SEQ_CST) >= n))
			return 0;
		lc_sleep_ms(1);
	}
	fprintf(stderr, "lifecycle: %llu of %llu threads asleep in a call\n", st.sleeping, n);
	return -1;
}

/* ---- exit, exec, kill: threads ---- */

static char **lc_exec_argv;

/* Runs on the first worker, asleep inside cuMemAlloc_v2. */
static void lc_exec_handler(int sig)
{
	(void)sig;
	execv(lc_exec_argv[0], lc_exec_argv);
	_exit(127);
}

static void *lc_worker(void *arg)
{
	unsigned int idx = (unsigned int)(uintptr_t)arg;
	char name[16];

	lc_tids[idx] = gettid();
	snprintf(name, sizeof(name), "lc-worker-%u", idx);
	pthread_setname_np(pthread_self(), name);
	pthread_barrier_wait(&lc_barrier);
	if (!strcmp(opt.mode, "kill")) {
		for (;;) {
			lc_alloc_free(1);
			lc_host_pairs(1);
		}
	}
	lc_alloc_kept(opt.iters);
	lc_host_pairs(opt.iters);
	lc_inflight[idx] = gettid();
	__atomic_add_fetch(&lc_at_last, 1, __ATOMIC_SEQ_CST);
	lc_call_forever();
	return NULL;
}

static void lc_start_workers(void)
{
	pthread_t th;
	unsigned int i;

	if (pthread_barrier_init(&lc_barrier, NULL, opt.threads + 1))
		lc_die("barrier");
	for (i = 0; i < opt.threads; i++)
		if (pthread_create(&th, NULL, lc_worker, (void *)(uintptr_t)i))
			lc_die("pthread_create");
	pthread_barrier_wait(&lc_barrier);
}

static int lc_mode_exit(bool exec)
{
	struct sigaction sa = { .sa_handler = lc_exec_handler };

	if (exec) {
		if (!opt.cmd)
			return 2;
		lc_exec_argv = opt.cmd;
		sigaction(SIGUSR1, &sa, NULL);
	}
	lc_start_workers();
	if (lc_wait_asleep(opt.threads, &lc_at_last))
		return 1;
	lc_ninflight = opt.threads;
	if (lc_write_json(exec ? "exec" : "exit", NULL))
		lc_die("writing the ground truth");
	if (!exec)
		_exit(0);	/* the worker threads die inside their calls */
	/* The first worker execs from inside its call; the rest die in theirs. */
	if (tgkill(getpid(), lc_tids[0], SIGUSR1))
		lc_die("tgkill");
	for (;;)
		pause();
}

static int lc_write_layout(void)
{
	char extra[2048];
	size_t len;
	unsigned int i;

	len = (size_t)snprintf(extra, sizeof(extra), "\"apis\": [");
	for (i = 0; i < FAKECUDA_API_COUNT && len < sizeof(extra); i++)
		len += (size_t)snprintf(extra + len, sizeof(extra) - len, "%s\"%s\"",
					i ? ", " : "", fakecuda_api_name(i));
	if (len >= sizeof(extra) - 2)
		return -1;
	strcat(extra, "]");
	return lc_write_json("kill", extra);
}

/* Counters in a file mapping: they outlive a SIGKILL. */
static int lc_mode_kill(void)
{
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s.kill.map", opt.prefix);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, sizeof(*lc)))
		lc_die(path);
	lc = mmap(NULL, sizeof(*lc), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (lc == MAP_FAILED)
		lc_die("mmap");
	close(fd);
	lc_start_workers();
	if (lc_write_layout())
		lc_die("writing the layout");
	for (;;)
		pause();
	return 0;
}

/* ---- fork ---- */

static void *lc_fork_sleeper(void *arg)
{
	(void)arg;
	lc_tids[1] = gettid();
	pthread_setname_np(pthread_self(), "lc-asleep");
	lc_inflight[0] = gettid();
	fakecuda_set_thread_delay_ms(300);
	lc_alloc_kept(1);
	return NULL;
}

static int lc_mode_fork(void)
{
	pthread_t th;
	int status;
	pid_t child;

	opt.threads = 1;
	lc_tids[0] = gettid();
	lc_alloc_kept(opt.iters);
	if (pthread_create(&th, NULL, lc_fork_sleeper, NULL))
		lc_die("pthread_create");
	if (lc_wait_asleep(1, NULL))
		return 1;
	child = fork();
	if (child < 0)
		lc_die("fork");
	if (!child) {
		/* only this thread exists here: the counts start again */
		memset(&lc_local, 0, sizeof(lc_local));
		lc_tids[0] = gettid();
		lc_tids[1] = 0;
		lc_alloc_free(opt.iters);
		lc_host_pairs(opt.iters);
		lc_alloc_kept(opt.iters);
		if (lc_write_json("child", NULL))
			lc_die("writing the ground truth");
		_exit(0);
	}
	lc_alloc_free(opt.iters);
	pthread_join(th, NULL);
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status))
		return 1;
	opt.threads = 2;
	if (lc_write_json("parent", NULL))
		lc_die("writing the ground truth");
	return 0;
}

/* ---- pid reuse ---- */

/* fork() with the pid chosen: clone3's set_tid (Linux 5.5, CAP_SYS_ADMIN). */
static pid_t lc_fork_as(pid_t pid)
{
	struct clone_args args = {
		.exit_signal = SIGCHLD,
		.set_tid = (uint64_t)(uintptr_t)&pid,
		.set_tid_size = 1,
	};

	return (pid_t)syscall(SYS_clone3, &args, sizeof(args));
}

static int lc_mode_pidreuse(char *self)
{
	char extra[128], iters[32], size[32], hold[32];
	char *b_argv[] = { self, "b", "-o", (char *)opt.prefix, "-n", iters, "-s", size,
			   "-w", hold, NULL };
	char **argv = opt.cmd ? opt.cmd : b_argv;
	pid_t a, b;
	int status, err = 0;

	snprintf(iters, sizeof(iters), "%lu", opt.iters);
	snprintf(size, sizeof(size), "%llu", (unsigned long long)opt.size);
	snprintf(hold, sizeof(hold), "%lu", opt.hold_ms);
	a = fork();
	if (a < 0)
		lc_die("fork");
	if (!a) {
		lc_tids[0] = gettid();
		lc_alloc_kept(opt.iters);
		if (lc_write_json("a", NULL))
			lc_die("writing the ground truth");
		if (opt.hold_ms)
			lc_sleep_ms(opt.hold_ms);
		_exit(0);	/* holding everything */
	}
	if (waitpid(a, &status, 0) != a || !WIFEXITED(status) || WEXITSTATUS(status))
		return 1;
	b = lc_fork_as(a);
	if (b < 0) {
		err = errno;
		b = fork();	/* the test says why it could not check reuse */
	}
	if (b < 0)
		lc_die("fork");
	if (!b) {
		/* straight to exec: glibc knows nothing of a clone3 child */
		execv(argv[0], argv);
		_exit(127);
	}
	if (waitpid(b, &status, 0) != b || !WIFEXITED(status) || WEXITSTATUS(status))
		return 1;
	snprintf(extra, sizeof(extra), "\"a_pid\": %d, \"b_pid\": %d, \"reused\": %s, \"errno\": %d",
		 (int)a, (int)b, a == b ? "true" : "false", err);
	return lc_write_json("pidreuse", extra) ? 1 : 0;
}

/* Role b: whatever pid it got, an ordinary GPU process. */
static int lc_mode_b(void)
{
	lc_tids[0] = gettid();
	lc_alloc_free(opt.iters);
	lc_alloc_kept(2 * opt.iters);
	if (opt.hold_ms)
		lc_sleep_ms(opt.hold_ms);
	return lc_write_json("b", NULL) ? 1 : 0;
}

/* ---- command line ---- */

static void lc_usage(void)
{
	fprintf(stderr, "usage: lifecycle exit|kill|exec|fork|pidreuse -o PREFIX [-t THREADS] [-n ITERS]\n"
		"                 [-s SIZE] [-w HOLD_MS] [-- COMMAND [ARGS...]]\n");
	exit(2);
}

static unsigned long long lc_number(const char *s)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		lc_usage();
	switch (*end) {
	case 'K':
		v <<= 10;
		end++;
		break;
	case 'M':
		v <<= 20;
		end++;
		break;
	}
	if (*end)
		lc_usage();
	return v;
}

int main(int argc, char **argv)
{
	int c;

	if (argc < 2)
		lc_usage();
	opt.mode = argv[1];
	optind = 2;
	while ((c = getopt(argc, argv, "o:t:n:s:w:")) != -1) {
		switch (c) {
		case 'o':
			opt.prefix = optarg;
			break;
		case 't':
			opt.threads = (unsigned int)lc_number(optarg);
			break;
		case 'n':
			opt.iters = lc_number(optarg);
			break;
		case 's':
			opt.size = lc_number(optarg);
			break;
		case 'w':
			opt.hold_ms = lc_number(optarg);
			break;
		default:
			lc_usage();
		}
	}
	if (optind < argc)
		opt.cmd = &argv[optind];
	if (!opt.prefix || !opt.threads || opt.threads > LC_MAX_THREADS || !opt.size)
		lc_usage();
	/* Not counted: cuInit is not probed. */
	if (cuInit(0)) {
		fprintf(stderr, "lifecycle: cuInit failed\n");
		return 1;
	}
	if (!strcmp(opt.mode, "exit"))
		return lc_mode_exit(false);
	if (!strcmp(opt.mode, "exec"))
		return lc_mode_exit(true);
	if (!strcmp(opt.mode, "kill"))
		return lc_mode_kill();
	if (!strcmp(opt.mode, "fork"))
		return lc_mode_fork();
	if (!strcmp(opt.mode, "pidreuse"))
		return lc_mode_pidreuse(argv[0]);
	if (!strcmp(opt.mode, "b"))
		return lc_mode_b();
	lc_usage();
	return 2;
}
