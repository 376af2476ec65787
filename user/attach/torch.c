// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "attach/torch.h"
#include "cookie.h"
#include "lib/log.h"
#include "lib/procfs.h"

#define CONF_MAX 512

/* 64-bit integers as the Itanium ABI mangles them: long, unsigned long, (unsigned) long long. */
static bool int64_code(char c)
{
	return c == 'l' || c == 'm' || c == 'x' || c == 'y';
}

int64_t torch_hook__cookie(const char *mangled)
{
	size_t plen = strlen(TORCH_HOOK_PREFIX);
	const char *p = mangled;
	int ints = 0;

	if (strncmp(p, TORCH_HOOK_PREFIX, plen))
		return -1;
	for (p += plen; int64_code(*p); p++)
		ints++;
	/* c10::Device: S_ is the first substitution, the namespace c10. */
	if (strcmp(p, "NS_6DeviceE") && strcmp(p, "N3c106DeviceE"))
		return -1;
	if (ints == 2)
		return (int64_t)UMT_TORCH_CK_TOTALS;
	if (ints == 0)
		return 0;
	return -1;
}

/* The forms as Debian's real builds export them: README, "Is it fragmentation?". */
const char *torch_hook__form(int64_t cookie)
{
	if (cookie & UMT_TORCH_CK_TOTALS)
		return "with the allocator's totals (int64_t in PyTorch 1.13, size_t in 2.x): "
		       "allocated and reserved as the allocator counts them";
	return "without totals (PyTorch 1.7 and older): reserved unknown, allocated summed "
	       "from the sizes since the probe went in, only leak or ok can be said";
}

/* xorshift64: where in its period a window opens, not a secret. */
static uint64_t next_rand(struct torch_window *w)
{
	w->rand ^= w->rand << 13;
	w->rand ^= w->rand >> 7;
	w->rand ^= w->rand << 17;
	return w->rand;
}

static void new_period(struct torch_window *w, uint64_t start_ns)
{
	w->period_ns = start_ns;
	w->open_ns = start_ns + next_rand(w) % w->every_ns;
	w->opened_now = false;
	w->cue_used = false;
}

void torch_window__init(struct torch_window *w, uint64_t every_ns, uint64_t now_ns)
{
	memset(w, 0, sizeof(*w));
	if (!every_ns)
		return;
	w->every_ns = every_ns;
	w->budget = TORCH_WINDOW_CALLS;
	w->rand = now_ns | 1;
	/* The first opens at once: a job already running is seen from the start. */
	new_period(w, now_ns);
	w->open_ns = now_ns;
}

static void open_window(struct torch_window *w)
{
	if (!w->on)
		w->opened++;
	w->on = true;
	w->fresh = true;
}

bool torch_window__want(struct torch_window *w, uint64_t now_ns, uint64_t cue_ns,
			uint64_t calls)
{
	bool cued = cue_ns > w->cue_ns;

	if (!w->every_ns)
		return w->on = true;
	if (cued)
		w->cue_ns = cue_ns;
	if (now_ns >= w->period_ns + w->every_ns)
		new_period(w, now_ns - (now_ns - w->period_ns) % w->every_ns);
	if (w->on && !w->fresh && calls >= w->budget) {
		w->on = false;
		w->spent++;
	}
	if (!w->opened_now && now_ns >= w->open_ns) {
		w->opened_now = true;
		open_window(w);
	} else if (!w->on && cued && !w->cue_used) {
		w->cue_used = true;
		w->cued++;
		open_window(w);
	}
	return w->on;
}

uint64_t torch_window__next_ns(const struct torch_window *w)
{
	if (!w->every_ns)
		return UINT64_MAX;
	return w->opened_now ? w->period_ns + w->every_ns : w->open_ns;
}

bool torch_hook__test_cpu(void)
{
	const char *v = getenv(TORCH_TEST_CPU_ENV);

	if (!v || strcmp(v, "1"))
		return false;
	/* Said every time: a figure of this mode must never pass for a GPU's. */
	wlog("TEST ONLY: %s=1: PyTorch's CPU allocator is counted as cuda:0 "
	     "(umtrace's own tests; never on a real host)", TORCH_TEST_CPU_ENV);
	return true;
}

size_t torch_hook__unseen(const struct torch_feed *f, const struct libcuda_set *libs,
			  uint64_t other_calls, const char **files, size_t max)
{
	size_t i, n = 0;

	if (f->sampled || !other_calls)
		return 0;
	for (i = 0; i < libs->n && n < max; i++)
		if (libs->libs[i].kind == LIB_C10 && libs->libs[i].n_probed)
			files[n++] = libs->libs[i].name;
	return n;
}

/* What the feed knows of a process. */
struct torch_feed_proc {
	uint32_t pid;				/* first: a pid_table row */
	bool conf_read;
	uint32_t conf;				/* TORCH_S_CONF* flags */
	uint64_t seen[UMT_TORCH_MAX_DEVS];	/* allocs + frees at its last sample */
	char comm[TASK_COMM_LEN];		/* its last record's; "" none yet */
};

void torch_feed__init(struct torch_feed *f, const struct umt_torch_slot *slots)
{
	memset(f, 0, sizeof(*f));
	pid_table__init(&f->procs, sizeof(struct torch_feed_proc));
	f->slots = slots;
}

void torch_feed__free(struct torch_feed *f)
{
	pid_table__free(&f->procs);
}

/*
 * The allocator reads its config from the environment at start (the new
 * name first, as PyTorch does). Unreadable: unknown, and no flag says read.
 */
static uint32_t read_conf(uint32_t pid)
{
	static const char *const names[] = { "PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF" };
	char conf[CONF_MAX];
	size_t i;
	int err;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		err = proc__environ((pid_t)pid, names[i], conf, sizeof(conf));
		if (!err)
			return TORCH_S_CONF | torch_conf__parse(conf);
		if (err != -ENOENT)
			return 0;
	}
	return TORCH_S_CONF;
}

static struct torch_feed_proc *proc_of(struct torch_feed *f, uint32_t pid)
{
	struct torch_feed_proc *p = pid_table__get(&f->procs, pid);

	if (p && !p->conf_read) {
		p->conf = read_conf(pid);
		p->conf_read = true;
	}
	return p;
}

static uint32_t feed_conf(const struct torch_feed *f, const struct torch_feed_proc *p)
{
	return (p ? p->conf : 0) | (f->windowed ? TORCH_S_WINDOWED : 0);
}

static void fill(struct torch_sample *s, uint32_t pid, uint32_t device, uint64_t ts,
		 const struct umt_torch_dev *d, uint32_t conf)
{
	/* Without totals the hook is never windowed (probes__attach_torch). */
	bool windowed = conf & TORCH_S_WINDOWED && d->flags & UMT_TORCH_TOTALS;

	memset(s, 0, sizeof(*s));
	s->ts_ns = ts;
	s->pid = pid;
	s->device = device;
	s->flags = (conf & ~TORCH_S_WINDOWED) | (d->flags & UMT_TORCH_TOTALS ? TORCH_S_TOTALS : 0) |
		   (windowed ? TORCH_S_WINDOWED : 0);
	s->allocated = d->allocated;
	s->reserved = d->reserved;
	s->peak_allocated = d->peak_allocated;
	s->peak_reserved = d->peak_reserved;
	s->alloc_low = d->alloc_low;
	s->alloc_high = d->alloc_high;
	s->allocs = d->allocs;
	s->frees = d->frees;
}

void torch_feed__record(struct torch_feed *f, const struct umt_torch_rec *r,
			struct torch_sample *s)
{
	struct torch_feed_proc *p = proc_of(f, r->pid);

	fill(s, r->pid, r->device, r->ts_ns, &r->d, feed_conf(f, p));
	f->sampled = true;
	memcpy(s->comm, r->comm, sizeof(s->comm));
	s->comm[sizeof(s->comm) - 1] = '\0';
	if (!p)
		return;
	memcpy(p->comm, s->comm, sizeof(p->comm));
	if (r->device < UMT_TORCH_MAX_DEVS)
		p->seen[r->device] = r->d.allocs + r->d.frees;
}

/*
 * The kernel writes a slot while it is read here: a copy may mix two
 * calls' figures, which the next flush or record puts right.
 */
void torch_feed__flush(struct torch_feed *f, torch_sample_fn fn, void *ctx)
{
	struct torch_feed_proc *p;
	struct torch_sample s;
	struct umt_torch_dev d;
	uint32_t pid, device;
	uint64_t moved, key;
	size_t i;

	for (i = 0; f->slots && i < UMT_TORCH_SLOTS; i++) {
		key = __atomic_load_n(&f->slots[i].key, __ATOMIC_ACQUIRE);
		if (!key)
			continue;
		memcpy(&d, &f->slots[i].d, sizeof(d));
		pid = (uint32_t)(key >> 32);
		device = (uint32_t)key;
		p = device < UMT_TORCH_MAX_DEVS ? proc_of(f, pid) : NULL;
		moved = d.allocs + d.frees;
		if (!p || p->seen[device] == moved)
			continue;
		p->seen[device] = moved;
		fill(&s, pid, device, d.last_ns, &d, feed_conf(f, p));
		f->sampled = true;
		/* The process's name: its records have it; /proc if none came yet. */
		if (!p->comm[0] && !proc__comm((pid_t)pid, p->comm, sizeof(p->comm)))
			snprintf(p->comm, sizeof(p->comm), "?");
		memcpy(s.comm, p->comm, sizeof(s.comm));
		fn(ctx, &s);
	}
}

void torch_feed__forget(struct torch_feed *f, uint32_t pid)
{
	pid_table__remove(&f->procs, pid);
}
