// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "attach/libcuda_scan.h"
#include "lib/procfs.h"
#include "libcuda_scan.skel.h"

static bool same(const struct umt_proc_exec *a, const struct umt_proc_exec *b)
{
	return a->start_ns == b->start_ns && a->exec_vm == b->exec_vm;
}

void libcuda_scan__diff(const struct umt_proc_exec *last, size_t n_last,
			const struct umt_proc_exec *now, size_t n_now,
			void (*fn)(const struct umt_proc_exec *p, void *ctx), void *ctx)
{
	size_t i = 0, j;

	for (j = 0; j < n_now; j++) {
		while (i < n_last && last[i].tgid < now[j].tgid)
			i++;	/* gone */
		if (i < n_last && last[i].tgid == now[j].tgid && same(&last[i], &now[j]))
			continue;
		fn(&now[j], ctx);
	}
}

struct scan_ctx {
	struct libcuda_set *set;
	int added;
};

static void look(const struct umt_proc_exec *p, void *ctx)
{
	struct scan_ctx *c = ctx;
	int n = libcuda_set__scan_pid(c->set, (pid_t)p->tgid);

	c->added += n > 0 ? n : 0;
}

/*
 * Every process, as the iterator sees it now; *v, set on success only, is
 * the caller's to free.
 */
static int list(struct libcuda_scan *sc, struct umt_proc_exec **v, size_t *n)
{
	size_t len;
	char *buf;
	int fd, err;

	fd = bpf_iter_create(bpf_link__fd(sc->link));
	if (fd < 0)
		return -errno;
	buf = proc__read_fd(fd, &len);
	err = buf ? 0 : -errno;
	close(fd);
	if (err)
		return err;
	*v = (struct umt_proc_exec *)buf;
	*n = len / sizeof(**v);
	return 0;
}

int libcuda_scan__open(struct libcuda_scan *sc)
{
	int err;

	memset(sc, 0, sizeof(*sc));
	sc->skel = libcuda_scan_bpf__open_and_load();
	if (!sc->skel)
		return errno ? -errno : -EINVAL;
	sc->link = bpf_program__attach_iter(sc->skel->progs.list_exec_vm, NULL);
	err = sc->link ? list(sc, &sc->last, &sc->n_last) :
			 (errno ? -errno : -EINVAL);
	if (err)
		libcuda_scan__close(sc);
	return err;
}

int libcuda_scan__run(struct libcuda_scan *sc, struct libcuda_set *set)
{
	struct scan_ctx c = { .set = set };
	struct umt_proc_exec *now;
	size_t n;
	int err;

	err = list(sc, &now, &n);
	if (err)
		return err;
	libcuda_scan__diff(sc->last, sc->n_last, now, n, look, &c);
	free(sc->last);
	sc->last = now;
	sc->n_last = n;
	return c.added;
}

void libcuda_scan__close(struct libcuda_scan *sc)
{
	bpf_link__destroy(sc->link);
	libcuda_scan_bpf__destroy(sc->skel);
	free(sc->last);
	memset(sc, 0, sizeof(*sc));
}
