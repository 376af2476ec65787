// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * empty_tp: attach the empty mm_page_alloc program, say "attached" on
 * stdout, and stay attached until SIGINT or SIGTERM. The overhead benchmark
 * runs the page-fault storm under it to measure the bare BPF dispatch cost.
 * empty_tp --uprobe PATH:SYMBOL attaches the empty uprobe program there
 * instead: the floor of a uprobe (PyTorch's allocator hook).
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <bpf/libbpf.h>
#include "empty_tp.skel.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* libbpf's debug chatter would only bury the one line the script waits for. */
static int print_warnings(enum libbpf_print_level level, const char *fmt,
			  va_list ap)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/*
 * Handlers rather than sigwait(): a shell starts background jobs with
 * SIGINT ignored, and installing a handler is what undoes that.
 */
static int install_signals(sigset_t *old)
{
	struct sigaction sa = { .sa_handler = on_signal };
	sigset_t block;

	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	/* Blocked until sigsuspend(), so a signal cannot slip in unseen. */
	if (sigprocmask(SIG_BLOCK, &block, old))
		return -errno;
	if (sigaction(SIGINT, &sa, NULL) || sigaction(SIGTERM, &sa, NULL))
		return -errno;
	return 0;
}

/* "PATH:SYMBOL": the empty uprobe on that function. */
static int attach_uprobe(struct empty_tp_bpf *skel, char *spec)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts);
	char *colon = strrchr(spec, ':');

	if (!colon || colon == spec || !colon[1])
		return -EINVAL;
	*colon = '\0';
	opts.func_name = colon + 1;
	skel->links.empty_uprobe = bpf_program__attach_uprobe_opts(skel->progs.empty_uprobe, -1,
								   spec, 0, &opts);
	return skel->links.empty_uprobe ? 0 : -errno;
}

int main(int argc, char **argv)
{
	struct empty_tp_bpf *skel = NULL;
	char *uprobe = NULL;
	sigset_t old;
	int err;

	if (argc == 3 && !strcmp(argv[1], "--uprobe")) {
		uprobe = argv[2];
	} else if (argc != 1) {
		fprintf(stderr, "usage: empty_tp [--uprobe PATH:SYMBOL]\n");
		return 2;
	}

	libbpf_set_print(print_warnings);
	err = install_signals(&old);
	if (err) {
		fprintf(stderr, "empty_tp: signals: %s\n", strerror(-err));
		return 1;
	}
	skel = empty_tp_bpf__open();
	if (!skel) {
		err = -errno;
		fprintf(stderr, "empty_tp: cannot open: %s\n", strerror(errno));
		goto cleanup;
	}
	/* The floor is the alloc program alone; interleave uses the free one. */
	bpf_program__set_autoload(skel->progs.empty_free, false);
	bpf_program__set_autoload(skel->progs.empty_alloc, !uprobe);
	bpf_program__set_autoload(skel->progs.empty_uprobe, !!uprobe);
	err = empty_tp_bpf__load(skel);
	if (err) {
		fprintf(stderr, "empty_tp: cannot load: %s\n", strerror(-err));
		goto cleanup;
	}
	err = uprobe ? attach_uprobe(skel, uprobe) : empty_tp_bpf__attach(skel);
	if (err) {
		fprintf(stderr, "empty_tp: cannot attach: %s\n", strerror(-err));
		goto cleanup;
	}
	printf("attached\n");
	fflush(stdout);
	while (!stop)
		sigsuspend(&old);
cleanup:
	empty_tp_bpf__destroy(skel);
	return err ? 1 : 0;
}
