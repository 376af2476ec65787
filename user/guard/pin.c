// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "guard/pin.h"
#include "lib/log.h"
#include "umtrace.skel.h"

#define OWNER "owner"

#define BPF_FS_MAGIC_NR 0xcafe4a11
#define BPF_FS_MOUNT "/sys/fs/bpf"

static bool on_bpffs(const char *path)
{
	struct statfs sf;

	return !statfs(path, &sf) && sf.f_type == BPF_FS_MAGIC_NR;
}

/* As bpftool does: a private bpffs where none is mounted. */
static int ensure_bpffs(void)
{
	if (on_bpffs(BPF_FS_MOUNT))
		return 0;
	if (mkdir(BPF_FS_MOUNT, 0700) && errno != EEXIST)
		return -errno;
	if (mount("bpf", BPF_FS_MOUNT, "bpf", 0, "mode=0700"))
		return -errno;
	return 0;
}

/* Unlink the pins in dir; how many there were. */
static int clear_dir(const char *dir)
{
	char path[4200];
	struct dirent *de;
	int n = 0;
	DIR *d = opendir(dir);

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (!unlink(path))
			n++;
	}
	closedir(d);
	return n;
}

int guard_pins__open(struct guard_pins *gp, const char *dir, bool *stale)
{
	int err;

	memset(gp, 0, sizeof(*gp));
	*stale = false;
	if (!strncmp(dir, BPF_FS_MOUNT "/", sizeof(BPF_FS_MOUNT)) && (err = ensure_bpffs()))
		return err;
	if (mkdir(dir, 0700) && errno != EEXIST)
		return -errno;
	if (!on_bpffs(dir))
		return -ENOTSUP;
	*stale = clear_dir(dir) > 0;
	gp->dir = dir;
	return 0;
}

static int pin_fd(const char *dir, const char *kind, size_t i, int fd)
{
	char name[64];

	snprintf(name, sizeof(name), "%s-%zu", kind, i);
	return guard_pins__pin_fd(dir, name, fd);
}

int guard_pins__pin_fd(const char *dir, const char *name, int fd)
{
	char path[4200];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return bpf_obj_pin(fd, path) ? -errno : 0;
}

void guard_pins__unpin(const char *dir, const char *name)
{
	char path[4200];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path);
}

bool guard_pins__has(const char *dir, const char *name)
{
	char path[4200];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return !access(path, F_OK);
}

int guard_pins__sync(struct guard_pins *gp, struct probes *p)
{
	int err;

	if (!gp->dir)
		return 0;
	for (; gp->links < p->n_links; gp->links++) {
		err = pin_fd(gp->dir, "link", gp->links, bpf_link__fd(p->links[gp->links]));
		if (err)
			return err;
	}
	for (; gp->multi < p->n_multi; gp->multi++) {
		err = pin_fd(gp->dir, "uprobes", gp->multi, p->multi_fds[gp->multi]);
		if (err)
			return err;
	}
	if (!gp->owner) {
		err = guard_pins__pin_fd(gp->dir, OWNER, bpf_map__fd(p->skel->maps.bss));
		if (err)
			return err;
		gp->owner = true;
	}
	return 0;
}

static uint32_t map_id(int fd)
{
	struct bpf_map_info info = {};
	uint32_t len = sizeof(info);

	return fd >= 0 && !bpf_obj_get_info_by_fd(fd, &info, &len) ? info.id : 0;
}

bool guard_pins__owned(const char *dir, const struct probes *p)
{
	char path[4200];
	uint32_t id;
	int fd;

	snprintf(path, sizeof(path), "%s/" OWNER, dir);
	fd = bpf_obj_get(path);
	id = map_id(fd);
	if (fd >= 0)
		close(fd);
	return id && id == map_id(bpf_map__fd(p->skel->maps.bss));
}

void guard_pins__remove(struct guard_pins *gp)
{
	if (!gp->dir)
		return;
	clear_dir(gp->dir);
	rmdir(gp->dir);
	gp->dir = NULL;
}

bool guard_pins__armed(const char *dir)
{
	struct dirent *de;
	bool any = false;
	DIR *d = opendir(dir);

	if (!d)
		return false;
	while (!any && (de = readdir(d)))
		any = de->d_name[0] != '.';
	closedir(d);
	return any;
}
