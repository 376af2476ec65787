// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * PyTorch's allocator hook, attached in windows (attach/torch.h says
 * when): each libc10 file's forms of the hook, their links made and
 * closed window by window, the closing in a thread of its own, and the
 * kernel's count of the calls a window took. The loader (probes.c) owns
 * the BPF object; this file only its hook's links.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <bpf/libbpf.h>
#include "attach/elf_syms.h"
#include "attach/probes.h"
#include "attach/torch.h"
#include "attach/uprobe_multi.h"
#include "cookie.h"
#include "lib/escape.h"
#include "lib/log.h"
#include "lib/sys.h"
#include "umtrace.skel.h"

/* PyTorch's hook has a few forms at most: 8 names leave room for aliases. */
#define TORCH_MAX_FORMS 8
/* Links a window's closing hands to its thread; more are closed in place. */
#define TORCH_REAP_MAX 64

/*
 * PyTorch's hook in one libc10 file, attached in windows: the file is held
 * open, so that each window attaches to the inode found (through
 * /proc/self/fd), even once the process it was found in is gone.
 */
struct torch_hook_site {
	int fd;
	uint64_t offs[TORCH_MAX_FORMS], cookies[TORCH_MAX_FORMS];
	unsigned int n;
	bool always;		/* never detached */
	int multi_fd;		/* -1: none */
	struct bpf_link *links[TORCH_MAX_FORMS];
	int pfds[TORCH_MAX_FORMS];	/* links[i]'s perf event, which it owns */
	unsigned int n_links;
};

/* The uprobe PMU's perf event type, or -errno. */
static int uprobe_pmu(void)
{
	static int type = -ENOENT;
	FILE *f;

	if (type >= 0)
		return type;
	f = fopen("/sys/bus/event_source/devices/uprobe/type", "re");
	if (!f)
		return -errno;
	if (fscanf(f, "%d", &type) != 1)
		type = -EINVAL;
	fclose(f);
	return type;
}

/*
 * A perf-event uprobe at off in path, on every process: its fd, or -errno.
 * Opened here, not by libbpf, so that a forked child can close its copy
 * (probes__torch_drop): a perf event still open keeps the breakpoint.
 */
static int uprobe_perf_open(const char *path, uint64_t off)
{
	struct perf_event_attr attr = { .size = sizeof(attr) };
	int type = uprobe_pmu(), fd;

	if (type < 0)
		return type;
	attr.type = (uint32_t)type;
	attr.config1 = (uint64_t)(uintptr_t)path;
	attr.config2 = off;
	fd = (int)syscall(__NR_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static int site_attach(struct probes *p, struct torch_hook_site *t)
{
	struct bpf_program *prog = p->skel->progs.torch_hook;
	char path[32];
	unsigned int i;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", t->fd);
	if (p->multi) {
		t->multi_fd = uprobe_multi__attach(bpf_program__fd(prog), path, t->offs,
						   t->cookies, t->n, false);
		return t->multi_fd < 0 ? t->multi_fd : 0;
	}
	for (i = 0; i < t->n; i++) {
		LIBBPF_OPTS(bpf_perf_event_opts, opts, .bpf_cookie = t->cookies[i]);
		int pfd = uprobe_perf_open(path, t->offs[i]), err;

		if (pfd < 0)
			return pfd;
		t->links[i] = bpf_program__attach_perf_event_opts(prog, pfd, &opts);
		if (!t->links[i]) {
			err = -errno;
			close(pfd);
			return err;
		}
		t->pfds[i] = pfd;
		t->n_links = i + 1;
	}
	return 0;
}

/*
 * The hook's links of a window, closed by a thread of their own: a close
 * waits for a grace period (tens of ms), which the loop should not.
 */
struct torch_reap {
	int fds[TORCH_REAP_MAX];
	struct bpf_link *links[TORCH_REAP_MAX];
	unsigned int n_fds, n_links;
	uint64_t took_ns;
};

static void *reap(void *arg)
{
	struct torch_reap *r = arg;
	uint64_t t0 = clock__mono_ns();
	unsigned int i;

	for (i = 0; i < r->n_fds; i++)
		close(r->fds[i]);
	for (i = 0; i < r->n_links; i++)
		bpf_link__destroy(r->links[i]);
	r->took_ns = clock__mono_ns() - t0;
	return NULL;
}

/* The last window's closing is done: its time counted. */
static void reaped(struct probes *p)
{
	if (!p->reap)
		return;
	pthread_join(p->reaper, NULL);
	p->torch_switch_ns[0] += p->reap->took_ns;
	free(p->reap);
	p->reap = NULL;
}

/* Hand t's links to r, or close them here when r is full. */
static void site_detach(struct torch_hook_site *t, struct torch_reap *r)
{
	unsigned int i;

	if (t->multi_fd >= 0) {
		if (r && r->n_fds < TORCH_REAP_MAX)
			r->fds[r->n_fds++] = t->multi_fd;
		else
			close(t->multi_fd);
	}
	t->multi_fd = -1;
	for (i = 0; i < t->n_links; i++) {
		if (r && r->n_links < TORCH_REAP_MAX)
			r->links[r->n_links++] = t->links[i];
		else
			bpf_link__destroy(t->links[i]);
	}
	t->n_links = 0;
}

/* Close every windowed site's links, in a thread if one can start. */
static void sites_detach(struct probes *p)
{
	struct torch_reap *r;
	size_t i;

	reaped(p);
	r = calloc(1, sizeof(*r));
	for (i = 0; i < p->n_torch; i++)
		if (!p->torch[i].always)
			site_detach(&p->torch[i], r);
	if (!r)
		return;
	if (pthread_create(&p->reaper, NULL, reap, r)) {
		reap(r);
		p->torch_switch_ns[0] += r->took_ns;
		free(r);
		return;
	}
	p->reap = r;
}

static struct torch_hook_site *new_site(struct probes *p, const char *file)
{
	struct torch_hook_site *v, *t;
	int fd = open(file, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	v = realloc(p->torch, (p->n_torch + 1) * sizeof(*v));
	if (!v) {
		close(fd);
		return NULL;
	}
	p->torch = v;
	t = &v[p->n_torch++];
	memset(t, 0, sizeof(*t));
	t->fd = fd;
	t->multi_fd = -1;
	return t;
}

/* The hook's forms in file: how many (offs, cookies), or -errno. */
static int torch_forms(const char *file, const char *name, bool discovered,
		       uint64_t *offs, uint64_t *cookies)
{
	struct elf_sym_hit hits[TORCH_MAX_FORMS];
	char shown[ESC_TERM_LEN(sizeof(hits[0].name))];
	const char *why;
	int found, i;
	unsigned int n = 0;
	int64_t ck;

	found = elf_syms__find_prefix(file, TORCH_HOOK_PREFIX, hits, TORCH_MAX_FORMS, &why);
	if (found < 0) {
		if (found == -ENOENT && discovered)
			vlog("%s: %s", name, why);
		else
			elog("%s: %s", name, why);
		return found;
	}
	for (i = 0; i < found; i++) {
		ck = torch_hook__cookie(hits[i].name);
		if (ck < 0) {
			vlog("%s: %s: not a form of the hook umtrace knows", name,
			     esc__term(hits[i].name, shown, sizeof(shown)));
			continue;
		}
		offs[n] = hits[i].offset;
		cookies[n] = (uint64_t)ck;
		if (elf_syms__dup_offset(offs, n))
			continue;
		vlog("%s: PyTorch's allocator hook, %s: %s", name,
		     esc__term(hits[i].name, shown, sizeof(shown)), torch_hook__form(ck));
		n++;
	}
	return (int)n;
}

/*
 * A site for the forms of the hook in offs/cookies that always (or, not,
 * in windows) are attached: 0, or -errno.
 */
static int add_site(struct probes *p, const char *file, const char *name,
		    const uint64_t *offs, const uint64_t *cookies, unsigned int n, bool always)
{
	struct torch_hook_site *t;
	unsigned int i;
	int err;

	t = new_site(p, file);
	if (!t) {
		err = -errno;
		elog("%s: %s", name, strerror(errno));
		return err;
	}
	for (i = 0; i < n; i++) {
		/* Without totals, allocated is summed from every call: none may be missed. */
		if (always == !(cookies[i] & UMT_TORCH_CK_TOTALS) || !p->torch_windowed) {
			t->offs[t->n] = offs[i];
			t->cookies[t->n++] = cookies[i];
		}
	}
	t->always = always;
	if (!t->n) {
		close(t->fd);
		p->n_torch--;
		return 0;
	}
	if (!always && !p->torch_on)
		return 0;
	err = site_attach(p, t);
	if (err) {
		site_detach(t, NULL);
		elog("%s: cannot attach uprobes: %s", name, strerror(-err));
	}
	return err;
}

int probes__attach_torch(struct probes *p, const char *file, const char *name,
			 bool discovered)
{
	uint64_t offs[TORCH_MAX_FORMS], cookies[TORCH_MAX_FORMS];
	int n, err;

	if (!bpf_program__autoload(p->skel->progs.torch_hook))
		return 0;
	n = torch_forms(file, name, discovered, offs, cookies);
	if (n <= 0)
		return n;
	err = add_site(p, file, name, offs, cookies, (unsigned int)n, true);
	if (!err && p->torch_windowed)
		err = add_site(p, file, name, offs, cookies, (unsigned int)n, false);
	return err ? err : n;
}

/* Attach or detach the hook where it goes in windows; sums the time taken. */
int probes__torch_set(struct probes *p, bool on)
{
	uint64_t t0 = clock__mono_ns();
	int err = 0, e;
	size_t i;

	if (p->torch_on == on)
		return 0;
	p->torch_on = on;
	p->torch_switches[on]++;
	if (!on) {
		sites_detach(p);
		p->skel->bss->torch_asleep = true;
		return 0;
	}
	p->skel->bss->torch_asleep = false;
	for (i = 0; i < p->n_torch; i++) {
		struct torch_hook_site *t = &p->torch[i];

		if (t->always)
			continue;
		e = site_attach(p, t);
		if (e) {
			site_detach(t, NULL);
			err = err ? err : e;
		}
	}
	p->torch_switch_ns[1] += clock__mono_ns() - t0;
	return err;
}

void probes__torch_drop(struct probes *p)
{
	size_t i;
	unsigned int j;

	for (i = 0; i < p->n_torch; i++) {
		struct torch_hook_site *t = &p->torch[i];

		if (t->always)
			continue;
		if (t->multi_fd >= 0)
			close(t->multi_fd);
		for (j = 0; j < t->n_links; j++) {
			close(bpf_link__fd(t->links[j]));
			close(t->pfds[j]);
		}
		t->multi_fd = -1;
		t->n_links = 0;
	}
}

uint64_t probes__torch_cue_ns(const struct probes *p)
{
	return p->skel ? __atomic_load_n(&p->skel->bss->torch_cue_ns, __ATOMIC_RELAXED) : 0;
}

uint64_t probes__torch_calls(const struct probes *p)
{
	return p->skel ? __atomic_load_n(&p->skel->bss->torch_spent, __ATOMIC_RELAXED) : 0;
}

void probes__torch_fresh(struct probes *p)
{
	__atomic_store_n(&p->skel->bss->torch_spent, 0, __ATOMIC_RELAXED);
}

void probes__torch_free(struct probes *p)
{
	size_t i;

	reaped(p);
	for (i = 0; i < p->n_torch; i++) {
		site_detach(&p->torch[i], NULL);
		close(p->torch[i].fd);
	}
	free(p->torch);
}
