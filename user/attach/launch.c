// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "attach/launch.h"
#include "lib/escape.h"
#include "lib/log.h"

static void child_run(int rd, char *const argv[])
{
	char go, name[ESC_TERM_LEN(256)];
	int err;

	/* EOF instead of a byte means umtrace gave up: do not run untraced. */
	if (read(rd, &go, 1) != 1)
		_exit(127);
	close(rd);
	execvp(argv[0], argv);
	err = errno;
	fprintf(stderr, "umtrace: cannot run '%s': %s\n",
		esc__term(argv[0], name, sizeof(name)), strerror(err));
	errno = err;
	_exit(errno == ENOENT ? 127 : 126);
}

int launch__start(struct launched *l, char *const argv[])
{
	int fds[2];
	pid_t pid;

	memset(l, 0, sizeof(*l));
	l->go_fd = -1;
	if (pipe2(fds, O_CLOEXEC))
		return -errno;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		int err = -errno;

		close(fds[0]);
		close(fds[1]);
		return err;
	}
	if (!pid) {
		close(fds[1]);
		child_run(fds[0], argv);
	}
	close(fds[0]);
	l->pid = pid;
	l->go_fd = fds[1];
	return 0;
}

int launch__release(struct launched *l)
{
	char go = 1;
	int err = 0;

	if (write(l->go_fd, &go, 1) != 1)
		err = -errno;
	close(l->go_fd);
	l->go_fd = -1;
	return err;
}

bool launch__done(struct launched *l)
{
	pid_t r;

	if (l->reaped)
		return true;
	r = waitpid(l->pid, &l->status, WNOHANG);
	if (r == l->pid || (r < 0 && errno == ECHILD))
		l->reaped = true;
	return l->reaped;
}

int launch__exit_code(const struct launched *l)
{
	if (!l->reaped)
		return 1;
	if (WIFEXITED(l->status))
		return WEXITSTATUS(l->status);
	if (WIFSIGNALED(l->status))
		return 128 + WTERMSIG(l->status);
	return 1;
}

void launch__abort(struct launched *l)
{
	if (l->go_fd >= 0) {
		close(l->go_fd);
		l->go_fd = -1;
	}
	if (!l->reaped && waitpid(l->pid, &l->status, 0) == l->pid)
		l->reaped = true;
}
