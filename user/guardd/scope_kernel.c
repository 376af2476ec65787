// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The guard's scope as the daemon keeps it (the spec itself is
 * guardd/scope.c): the kernel side checks it when it is
 * about to stop a process (a mode fixed at load, plus a pid map or a
 * cgroup), the sampled rule when it picks a victim. A comm regex cannot
 * run in BPF, but its verdict depends on the name alone: the kernel side
 * keeps a verdict per name, and asks for the names it has none for (at
 * exec, at a rename, at a decision); the processes running at start are
 * named here.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "guardd/daemon.h"
#include "guardd/kernel.h"
#include "lib/escape.h"
#include "lib/log.h"
#include "lib/procfs.h"


uint32_t guard_scoper__kind(const struct guard_scoper *sc)
{
	return sc->cfg->scope.spec ? sc->cfg->scope.kind : UMT_SCOPE_GPU;
}

static int set_cgroup(struct guard_scoper *sc)
{
	const char *root = cgroup2__root();
	char path[4200];
	int fd, err;

	if (!root) {
		elog("--scope %s: cgroup v2 is not mounted", sc->cfg->scope.spec);
		return -ENOENT;
	}
	snprintf(path, sizeof(path), "%s/%s", root, sc->cfg->scope.cgroup);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		elog("--scope %s: cannot open %s: %s", sc->cfg->scope.spec, path, strerror(errno));
		return err;
	}
	err = guard_kernel__scope_cgroup(sc->probes, fd);
	close(fd);
	if (err)
		elog("--scope %s: %s", sc->cfg->scope.spec, strerror(-err));
	return err;
}

static int name_verdict(struct guard_scoper *sc, const char *comm)
{
	bool in = guard_scope__match(&sc->cfg->scope, 0, comm, NULL);

	return guard_kernel__scope_comm(sc->probes, comm, in);
}

static int name_one(pid_t pid, void *sc)
{
	char comm[32];

	return proc__comm(pid, comm, sizeof(comm)) ? name_verdict(sc, comm) : 0;
}

/* The names of the processes already running. */
static int name_running(struct guard_scoper *sc)
{
	int err = proc__each_pid(name_one, sc);

	if (err)
		elog("--scope %s: cannot name the running processes: %s", sc->cfg->scope.spec,
		     strerror(-err));
	return err;
}

void guard_scoper__answer(struct guard_scoper *sc, const struct umt_scope_ask_rec *r)
{
	char comm[TASK_COMM_LEN + 1], e[ESC_TERM_LEN(TASK_COMM_LEN)];
	int err;

	if (!sc->cfg->scope.spec || sc->cfg->scope.kind != UMT_SCOPE_COMM)
		return;
	memcpy(comm, r->name.comm, TASK_COMM_LEN);
	comm[TASK_COMM_LEN] = '\0';
	err = name_verdict(sc, comm);
	if (err)
		wlog("guard: cannot keep the scope of \"%s\": %s", esc__term(comm, e, sizeof(e)),
		     strerror(-err));
}

int guard_scoper__setup(struct guard_scoper *sc)
{
	size_t i;
	int err;

	switch (guard_scoper__kind(sc)) {
	case UMT_SCOPE_CGROUP:
		return set_cgroup(sc);
	case UMT_SCOPE_PIDS:
		for (i = 0; i < sc->cfg->scope.n_pids; i++) {
			err = guard_kernel__scope_pid(sc->probes,
						      (uint32_t)sc->cfg->scope.pids[i], true);
			if (err) {
				elog("--scope: cannot add pid %d: %s", (int)sc->cfg->scope.pids[i],
				     strerror(-err));
				return err;
			}
		}
		return 0;
	case UMT_SCOPE_COMM:
		return name_running(sc);
	default:
		return 0;
	}
}

bool guard_scoper__in_scope(struct guard_scoper *sc, const struct guard_proc *p)
{
	char cg[512];

	if (!sc->cfg->scope.spec)
		return true;	/* the default: the GPU processes it knows */
	if (proc__cgroup((pid_t)p->pid, cg, sizeof(cg)))
		return false;
	return guard_scope__match(&sc->cfg->scope, (pid_t)p->pid, p->comm, cg);
}

int guard_scoper__setup_protect(struct guard_scoper *sc)
{
	char buf[PATH_MAX + 32];
	size_t i;
	int err;

	for (i = 0; i < sc->cfg->protect.n; i++) {
		const struct protect_entry *e = &sc->cfg->protect.v[i];

		if (e->found)
			vlog("guard: never stopped: %s", protect__describe(e, buf, sizeof(buf)));
	}
	err = protect__to_kernel(&sc->cfg->protect, sc->probes);
	if (err)
		elog("guard: cannot tell the kernel side who is protected: %s", strerror(-err));
	return err;
}

/*
 * An upgrade replaces a protected executable, a restarted service gets a
 * new cgroup: what the entries name is looked up again once a second.
 */
#define PROTECT_REFRESH_MS 1000

void guard_scoper__refresh_protect(struct guard_scoper *sc, uint64_t now_ms)
{
	int changed, err;

	if (now_ms < sc->next_protect_ms)
		return;
	sc->next_protect_ms = now_ms + PROTECT_REFRESH_MS;
	changed = protect__resolve(&sc->cfg->protect, false, NULL, 0);
	if (changed <= 0)
		return;
	vlog("guard: %d protected entries changed on the host", changed);
	err = protect__to_kernel(&sc->cfg->protect, sc->probes);
	if (err)
		wlog("guard: cannot tell the kernel side who is protected: %s", strerror(-err));
}

/* A process whose identity cannot be read (gone) is not protected: it is not there. */
bool guard_scoper__protected(struct guard_scoper *sc, const struct guard_proc *p)
{
	struct proc_id id;

	if (protect__read((pid_t)p->pid, &id))
		return false;
	return protect__match(&sc->cfg->protect, &id, sc->cfg->self_pid);
}
