// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The guard's scope in both halves: the kernel side checks it when it is
 * about to stop a process (a mode fixed at load, plus a pid map or a
 * cgroup), the sampled rule when it picks a victim. A comm regex cannot
 * run in BPF: the matching pids are found in /proc and kept in the map.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "guard.h"
#include "guard_kernel.h"
#include "log.h"

#define COMM_SCAN_MS 1000

uint32_t guard__scope_kind(const struct guard *g)
{
	if (!g->cfg.scope.spec)
		return UMT_SCOPE_GPU;
	switch (g->cfg.scope.kind) {
	case GUARD_SCOPE_GPU:
		return UMT_SCOPE_GPU;
	case GUARD_SCOPE_ALL:
		return UMT_SCOPE_ALL;
	case GUARD_SCOPE_CGROUP:
		return UMT_SCOPE_CGROUP;
	default:
		return UMT_SCOPE_PIDS;	/* pid: and comm: */
	}
}

static int set_cgroup(struct guard *g)
{
	const char *root = cgroup2__root();
	char path[4200];
	int fd, err;

	if (!root) {
		elog("--scope %s: cgroup v2 is not mounted", g->cfg.scope.spec);
		return -ENOENT;
	}
	snprintf(path, sizeof(path), "%s/%s", root, g->cfg.scope.cgroup);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		elog("--scope %s: cannot open %s: %s", g->cfg.scope.spec, path, strerror(errno));
		return err;
	}
	err = guard_kernel__scope_cgroup(&g->session.probes, fd);
	close(fd);
	if (err)
		elog("--scope %s: %s", g->cfg.scope.spec, strerror(-err));
	return err;
}

int guard__setup_scope(struct guard *g)
{
	size_t i;
	int err;

	switch (guard__scope_kind(g)) {
	case UMT_SCOPE_CGROUP:
		return set_cgroup(g);
	case UMT_SCOPE_PIDS:
		for (i = 0; i < g->cfg.scope.n_pids; i++) {
			err = guard_kernel__scope_pid(&g->session.probes,
						      (uint32_t)g->cfg.scope.pids[i], true);
			if (err) {
				elog("--scope: cannot add pid %d: %s", (int)g->cfg.scope.pids[i],
				     strerror(-err));
				return err;
			}
		}
		guard__update_scope(g);
		return 0;
	default:
		return 0;
	}
}

static bool read_comm(pid_t pid, char *buf, size_t len)
{
	char path[64];
	FILE *f;
	bool ok;

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return ok;
}

/* Drop pids that no longer match (gone, renamed, recycled). */
static void prune_comm_pids(struct guard *g)
{
	int fd = guard_kernel__scope_pids_fd(&g->session.probes);
	uint32_t key, next, *prev = NULL;
	char comm[32];

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (read_comm((pid_t)key, comm, sizeof(comm)) &&
		    guard_scope__match(&g->cfg.scope, (pid_t)key, comm, NULL))
			continue;
		bpf_map_delete_elem(fd, &key);
		prev = NULL;	/* the walk restarts: the key is gone */
	}
}

void guard__update_scope(struct guard *g)
{
	static uint64_t next_scan;
	struct timespec ts;
	struct dirent *de;
	char comm[32];
	uint64_t now;
	DIR *d;

	if (!g->cfg.scope.spec || g->cfg.scope.kind != GUARD_SCOPE_COMM)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	if (now < next_scan)
		return;
	next_scan = now + COMM_SCAN_MS;
	prune_comm_pids(g);
	d = opendir("/proc");
	if (!d)
		return;
	while ((de = readdir(d))) {
		pid_t pid;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		pid = (pid_t)atoi(de->d_name);
		if (read_comm(pid, comm, sizeof(comm)) &&
		    guard_scope__match(&g->cfg.scope, pid, comm, NULL))
			guard_kernel__scope_pid(&g->session.probes, (uint32_t)pid, true);
	}
	closedir(d);
}

bool guard__in_scope(struct guard *g, const struct guard_proc *p)
{
	char cg[512];

	if (!g->cfg.scope.spec)
		return true;	/* the default: the GPU processes it knows */
	if (proc__cgroup((pid_t)p->pid, cg, sizeof(cg)))
		return false;
	return guard_scope__match(&g->cfg.scope, (pid_t)p->pid, p->comm, cg);
}

bool guard__protected(struct guard *g, const struct guard_proc *p)
{
	return guard_protected(&g->cfg, (pid_t)p->pid, p->comm, false);
}
