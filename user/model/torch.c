// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* PyTorch's caching allocator from its hook's samples: see torch.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "model/cuda_api.h"
#include "model/torch.h"
#include "model/torch_episode.h"
#include "model/torch_slide.h"

#define MIB (1ULL << 20)
/* The allocator's expandable segment pages: kSmallBuffer, kLargeBuffer. */
#define TORCH_PAGE_SMALL (2 * MIB)
#define TORCH_PAGE_LARGE (20 * MIB)
/* The unused share must rise by this much over a window to be "rising". */
#define TORCH_RISE 0.02

/* How a process got its segments, from its GPU calls. */
struct torch_proc {
	uint32_t pid;		/* first: a pid_table row */
	bool created;		/* a cuMemCreate of an expandable segment's page */
	bool segments;		/* a cuMemAlloc of whole 2 MiB */
	struct torch_site sites[TORCH_SITES];
	struct torch_seg_proc seg;	/* its segments, as its driver calls say */
};

void torch_rules__default(struct torch_rules *r)
{
	r->warmup_ns = 2000000000ULL;
	r->window_ns = 4000000000ULL;
	r->min_growth = 2 * MIB;
	r->growth_frac = 0.05;
	r->frag_share = 0.25;
	r->cache_share = 0.5;
	r->cache_min = 64 * MIB;
	r->horizon_s[0] = 60;
	r->horizon_s[1] = 900;
	r->horizon_s[2] = 3600;
	/* The tests' alone (torch.h): a spec it cannot read leaves these. */
	r->test_horizons = getenv(TORCH_TEST_HORIZONS) &&
			   !torch_rules__horizons(r, getenv(TORCH_TEST_HORIZONS));
}

void torch_model__init(struct torch_model *m, const struct torch_rules *rules)
{
	memset(m, 0, sizeof(*m));
	if (rules)
		m->rules = *rules;
	else
		torch_rules__default(&m->rules);
	if (m->rules.window_ns < TORCH_SLOTS)
		m->rules.window_ns = TORCH_SLOTS;
	pid_table__init(&m->procs, sizeof(struct torch_proc));
	m->segs.max = TORCH_SEG_MAX;
}

void torch_model__free(struct torch_model *m)
{
	free(m->devs);
	pid_table__free(&m->procs);
	alloc_table__free(&m->segs);
	memset(m, 0, sizeof(*m));
}

const char *torch_kind__name(enum torch_kind k)
{
	static const char *const names[TORCH__KINDS] = {
		"ok", "fragmentation", "leak", "cache-held",
	};

	return k < TORCH__KINDS ? names[k] : "ok";
}

/* "expandable_segments:True,max_split_size_mb:128" (PyTorch's syntax). */
uint32_t torch_conf__parse(const char *conf)
{
	const char *p = conf;
	uint32_t flags = TORCH_S_CONF_SET;
	size_t klen, vlen;

	if (!conf)
		return 0;
	while (*p) {
		p += strspn(p, " ,");
		klen = strcspn(p, ":,");
		vlen = p[klen] == ':' ? strcspn(p + klen + 1, ",") : 0;
		if (klen == 19 && !strncmp(p, "expandable_segments", klen) && vlen == 4 &&
		    !strncmp(p + klen + 1, "True", 4))
			flags |= TORCH_S_EXPANDABLE;
		if (klen == 17 && !strncmp(p, "max_split_size_mb", klen))
			flags |= TORCH_S_MAX_SPLIT;
		p += klen + (p[klen] == ':' ? 1 + vlen : 0);
	}
	return flags;
}

static uint64_t slot_ns(const struct torch_model *m)
{
	return m->rules.window_ns / TORCH_SLOTS;
}

static int cmp_dev(const struct torch_dev *a, uint32_t pid, uint32_t device)
{
	if (a->pid != pid)
		return a->pid < pid ? -1 : 1;
	if (a->device != device)
		return a->device < device ? -1 : 1;
	return 0;
}

/* The index of (pid, device), or where it would go (*found false). */
static size_t find(const struct torch_model *m, uint32_t pid, uint32_t device, bool *found)
{
	size_t lo = 0, hi = m->n, mid;
	int c;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		c = cmp_dev(&m->devs[mid], pid, device);
		if (!c) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

static struct torch_dev *dev_of(struct torch_model *m, uint32_t pid, uint32_t device)
{
	struct torch_dev *v;
	bool found;
	size_t i = find(m, pid, device, &found);

	if (found)
		return &m->devs[i];
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 16;

		v = realloc(m->devs, cap * sizeof(*v));
		if (!v)
			return NULL;
		m->devs = v;
		m->cap = cap;
	}
	memmove(&m->devs[i + 1], &m->devs[i], (m->n - i) * sizeof(*m->devs));
	m->n++;
	memset(&m->devs[i], 0, sizeof(m->devs[i]));
	m->devs[i].pid = pid;
	m->devs[i].device = device;
	return &m->devs[i];
}

static void into_slot(const struct torch_model *m, struct torch_dev *d,
		      const struct torch_sample *s)
{
	uint64_t n = s->ts_ns / slot_ns(m) + 1;
	struct torch_slot *sl = &d->slots[n % TORCH_SLOTS];
	uint64_t low = s->alloc_low < s->allocated ? s->alloc_low : s->allocated;
	uint64_t high = s->alloc_high > s->allocated ? s->alloc_high : s->allocated;

	if (sl->n > n)
		return;		/* older than what the slot holds now */
	if (sl->n < n) {
		sl->n = n;
		sl->ts = sl->ts_last = s->ts_ns;
		sl->reserved_max = s->reserved;
		sl->low = low;
		sl->high = high;
		return;
	}
	if (s->ts_ns < sl->ts)
		sl->ts = s->ts_ns;
	if (s->ts_ns > sl->ts_last)
		sl->ts_last = s->ts_ns;
	if (s->reserved > sl->reserved_max)
		sl->reserved_max = s->reserved;
	if (low < sl->low)
		sl->low = low;
	if (high > sl->high)
		sl->high = high;
}

static void note(const struct torch_model *m, struct torch_dev *d, bool horizons);

/* The only device of pid the model has, or NULL (none, or several). */
static struct torch_dev *only_dev(struct torch_model *m, uint32_t pid)
{
	bool found;
	size_t i = find(m, pid, 0, &found);

	if (i >= m->n || m->devs[i].pid != pid)
		return NULL;
	if (i + 1 < m->n && m->devs[i + 1].pid == pid)
		return NULL;
	return &m->devs[i];
}

/*
 * A newer sample with the allocator's totals: checked against its
 * process's driver calls (torch_seg.h). The calls do not say which device
 * their segments are for: a process on several is never moved by them.
 */
static void seg_sample(struct torch_model *m, struct torch_dev *d, const struct torch_sample *s)
{
	const struct torch_proc *p;
	bool found;
	size_t i;

	if (!(s->flags & TORCH_S_TOTALS))
		return;
	/*
	 * No hook call since the sample before: nothing new (the one sent at
	 * its exit, timed then, repeats the last call's figures).
	 */
	if (d->last.ts_ns && s->allocs + s->frees == d->last.allocs + d->last.frees)
		return;
	if (only_dev(m, s->pid) != d) {
		for (i = find(m, s->pid, 0, &found); i < m->n && m->devs[i].pid == s->pid; i++)
			m->devs[i].seg.anchored = m->devs[i].seg.confirmed = false;
		return;
	}
	p = pid_table__find(&m->procs, s->pid);
	torch_seg__sample(&d->seg, p ? &p->seg : NULL, s->ts_ns, s->reserved);
}

int torch_model__add(struct torch_model *m, const struct torch_sample *s)
{
	struct torch_dev *d = dev_of(m, s->pid, s->device);
	uint64_t n = s->ts_ns / slot_ns(m) + 1;

	if (!d)
		return -ENOMEM;
	if (d->exited && s->ts_ns > d->last.ts_ns) {
		/* The pid is another process's now: start afresh. */
		memset(d, 0, sizeof(*d));
		d->pid = s->pid;
		d->device = s->device;
	}
	/* A new slot: the window that ended with the one before is whole. */
	if (d->slot_n && n > d->slot_n) {
		note(m, d, torch_slide__turns(&m->rules, d->last.ts_ns, s->ts_ns));
		d->slot_n = n;
	} else if (!d->slot_n) {
		d->slot_n = n;
	}
	if (!d->first_ns || s->ts_ns < d->first_ns)
		d->first_ns = s->ts_ns;
	into_slot(m, d, s);
	torch_slide__add(&m->rules, d, s);
	/* Samples may come out of order (the table read beside the ring buffer). */
	if (s->allocs + s->frees >= d->last.allocs + d->last.frees) {
		seg_sample(m, d, s);
		d->last = *s;
	}
	return 0;
}

/* Bytes allocated at a site: kept if among the process's TORCH_SITES largest. */
static void add_site(struct torch_site *sites, uint32_t id, uint64_t bytes)
{
	unsigned int i, least = 0;

	for (i = 0; i < TORCH_SITES; i++) {
		if (sites[i].id == id) {
			sites[i].bytes += bytes;
			return;
		}
		if (sites[i].bytes < sites[least].bytes)
			least = i;
	}
	if (sites[least].bytes <= bytes)
		sites[least] = (struct torch_site){ id, bytes };
}

/* Memory a segment can be made of: device, managed, VMM physical. */
static bool segment_call(const struct cuda_api *api)
{
	return api && !api->is_free && (api->class == UMT_CLASS_DEVICE ||
					 api->class == UMT_CLASS_MANAGED ||
					 api->class == UMT_CLASS_VMM_PHYS);
}

/*
 * Reserved moved by a call at ts: its slot's highest, so that a segment
 * made and given back between two samples is in the window. A slot no
 * sample opened takes the last sample's allocated, all the model knows.
 */
static void seg_into_slot(const struct torch_model *m, struct torch_dev *d, uint64_t ts,
			  uint64_t reserved)
{
	uint64_t n = ts / slot_ns(m) + 1;
	struct torch_slot *sl = &d->slots[n % TORCH_SLOTS];

	if (sl->n > n)
		return;
	if (sl->n < n) {
		*sl = (struct torch_slot){
			.n = n, .ts = ts, .ts_last = ts, .reserved_max = reserved,
			.low = d->last.allocated, .high = d->last.allocated,
		};
		return;
	}
	if (reserved > sl->reserved_max)
		sl->reserved_max = reserved;
}

/* p's segments moved (r): its device's reserved with them, while confirmed. */
static void seg_moved(struct torch_model *m, const struct torch_proc *p,
		      const struct umt_call_rec *r)
{
	struct torch_dev *d = only_dev(m, r->pid);
	uint64_t reserved;

	if (!d || d->exited || !torch_seg__reserved(&d->seg, &p->seg, &reserved))
		return;
	if (reserved > d->seg.peak)
		d->seg.peak = reserved;
	seg_into_slot(m, d, r->ts_ns + r->duration_ns, reserved);
}

void torch_model__call(struct torch_model *m, const struct umt_call_rec *r, uint32_t site)
{
	const struct cuda_api *api = cuda_api__get(r->api);
	struct torch_proc *p;

	if (r->end != UMT_END_RETURNED || r->ret)
		return;
	if (api && api->is_free) {
		p = pid_table__find(&m->procs, r->pid);
		if (p && torch_seg__call(&m->segs, &p->seg, r))
			seg_moved(m, p, r);
		return;
	}
	if (!segment_call(api))
		return;
	p = pid_table__get(&m->procs, r->pid);
	if (!p)
		return;
	if (torch_seg__call(&m->segs, &p->seg, r))
		seg_moved(m, p, r);
	if (r->api == UMT_API_MEM_CREATE &&
	    (r->size == TORCH_PAGE_SMALL || r->size == TORCH_PAGE_LARGE))
		p->created = true;
	else if ((r->api == UMT_API_MEM_ALLOC_V2 || r->api == UMT_API_MEM_ALLOC) &&
		 r->size && !(r->size % TORCH_PAGE_SMALL))
		p->segments = true;
	if (site)
		add_site(p->sites, site, r->size);
}

void torch_model__exit(struct torch_model *m, uint32_t pid)
{
	const struct torch_proc *p = pid_table__find(&m->procs, pid);
	size_t i, k = 0;

	for (i = 0; i < m->n; i++) {
		if (m->devs[i].pid == pid && m->forget_exited)
			continue;
		if (m->devs[i].pid == pid) {
			/* Its last window is whole now. */
			if (!m->devs[i].exited)
				note(m, &m->devs[i], true);
			m->devs[i].exited = true;
			m->devs[i].created |= p && p->created;
			m->devs[i].segments |= p && p->segments;
			torch_seg__end(&m->devs[i].seg, p ? &p->seg : NULL);
			if (p)
				memcpy(m->devs[i].sites, p->sites, sizeof(p->sites));
		}
		m->devs[k++] = m->devs[i];
	}
	m->n = k;
	/* A pid used again is another process: its calls tell afresh. */
	pid_table__remove(&m->procs, pid);
	alloc_table__remove_pid(&m->segs, pid, NULL, NULL);
}

const struct torch_dev *torch_model__dev(const struct torch_model *m, size_t i)
{
	return i < m->n ? &m->devs[i] : NULL;
}

static enum torch_es expandable_of(const struct torch_model *m, const struct torch_dev *d)
{
	const struct torch_proc *p = d->exited ? NULL : pid_table__find(&m->procs, d->pid);
	bool created = d->created || (p && p->created), segments = d->segments || (p && p->segments);
	uint32_t f = d->last.flags;

	if (created || (f & TORCH_S_EXPANDABLE))
		return TORCH_ES_ON;
	if ((f & TORCH_S_CONF) || segments)
		return TORCH_ES_OFF;
	return TORCH_ES_UNKNOWN;
}

static double share(uint64_t part, uint64_t whole)
{
	return whole ? (double)part / (double)whole : 0.0;
}

/* The window's slots after the warm-up, oldest first; how many. */
static unsigned int window(const struct torch_model *m, const struct torch_dev *d,
			   struct torch_slot *out)
{
	uint64_t sns = slot_ns(m);
	uint64_t end = d->last.ts_ns / sns + 1;
	/* the first slot wholly after the warm-up */
	uint64_t steady = (d->first_ns + m->rules.warmup_ns + sns - 1) / sns + 1;
	unsigned int i, k = 0;
	uint64_t n;

	for (n = end >= TORCH_SLOTS ? end - TORCH_SLOTS + 1 : 1; n <= end; n++) {
		if (n < steady)
			continue;
		i = n % TORCH_SLOTS;
		if (d->slots[i].n == n)
			out[k++] = d->slots[i];
	}
	return k;
}

struct halves {
	uint64_t r_early, r_late;	/* reserved's highest */
	uint64_t f_early, f_late;	/* allocated's lowest */
	uint64_t u_early, u_late;	/* allocated's highest */
	unsigned int r_steps, f_steps;	/* slot to slot rises */
};

static void halves_of(const struct torch_slot *w, unsigned int n, struct halves *h)
{
	unsigned int half = n / 2, i;

	memset(h, 0, sizeof(*h));
	h->f_early = h->f_late = UINT64_MAX;
	for (i = 0; i < n; i++) {
		bool early = i < half, late = i >= n - half;

		if (early) {
			h->r_early = w[i].reserved_max > h->r_early ? w[i].reserved_max : h->r_early;
			h->u_early = w[i].high > h->u_early ? w[i].high : h->u_early;
			h->f_early = w[i].low < h->f_early ? w[i].low : h->f_early;
		}
		if (late) {
			h->r_late = w[i].reserved_max > h->r_late ? w[i].reserved_max : h->r_late;
			h->u_late = w[i].high > h->u_late ? w[i].high : h->u_late;
			h->f_late = w[i].low < h->f_late ? w[i].low : h->f_late;
		}
		if (i && w[i].reserved_max > w[i - 1].reserved_max)
			h->r_steps++;
		if (i && w[i].low > w[i - 1].low)
			h->f_steps++;
	}
}

static bool significant(const struct torch_rules *r, int64_t growth, uint64_t base)
{
	double need = r->growth_frac * (double)base;

	if (need < (double)r->min_growth)
		need = (double)r->min_growth;
	return growth > 0 && (double)growth >= need;
}

/* The fix for a kind, given how the process gets its segments. */
static unsigned int advise(const struct torch_verdict *v, enum torch_kind kind)
{
	switch (kind) {
	case TORCH_FRAGMENTATION:
		if (v->expandable != TORCH_ES_ON)
			return TORCH_ADV_EXPANDABLE | (v->max_split ? TORCH_ADV_NO_MAX_SPLIT : 0);
		if (v->max_split)
			return TORCH_ADV_NO_MAX_SPLIT;
		return TORCH_ADV_EMPTY_CACHE | TORCH_ADV_FRACTION;
	case TORCH_CACHE_HELD:
		return TORCH_ADV_EMPTY_CACHE | TORCH_ADV_FRACTION;
	case TORCH_LEAK:
		return TORCH_ADV_LEAK_SITES;
	default:
		return 0;
	}
}

static void decide(const struct torch_rules *r, const struct halves *h, struct torch_verdict *v)
{
	int64_t r_growth = (int64_t)(h->r_late - h->r_early);
	uint64_t unused_early = 0;
	bool leak, grows, rising;

	v->reserved_growth = v->reserved_known ? r_growth : 0;
	v->floor_growth = (int64_t)(h->f_late - h->f_early);
	v->peak_growth = (int64_t)(h->u_late - h->u_early);
	v->used = h->u_late > h->u_early ? h->u_late : h->u_early;
	if (v->reserved_known) {
		v->unused = h->r_late > h->u_late ? h->r_late - h->u_late : 0;
		v->unused_share = share(v->unused, h->r_late);
		unused_early = h->r_early > h->u_early ? h->r_early - h->u_early : 0;
		v->unused_share_early = share(unused_early, h->r_early);
	}
	leak = significant(r, v->floor_growth, h->f_early) && h->f_steps >= 2;
	if (leak) {
		v->kind = TORCH_LEAK;
		return;
	}
	if (!v->reserved_known)
		return;
	grows = significant(r, r_growth, h->r_early) && h->r_steps >= 2;
	/*
	 * Rising: its share, or (once the share nears 1 and can rise no more)
	 * its bytes, by as much as reserved must grow to count.
	 */
	rising = v->unused_share >= v->unused_share_early + TORCH_RISE ||
		 significant(r, (int64_t)(v->unused - unused_early), h->r_early);
	if (grows && r_growth > 2 * (v->peak_growth > 0 ? v->peak_growth : 0) &&
	    v->unused_share >= r->frag_share && rising)
		v->kind = TORCH_FRAGMENTATION;
	else if (!significant(r, r_growth, h->r_early) && v->unused_share >= r->cache_share &&
		 v->unused >= r->cache_min)
		v->kind = TORCH_CACHE_HELD;
}

static int by_bytes(const void *a, const void *b)
{
	const struct torch_site *x = a, *y = b;

	return x->bytes != y->bytes ? (x->bytes < y->bytes ? 1 : -1) : 0;
}

/* Its segments' call sites, most bytes first. */
static void sites_of(const struct torch_model *m, const struct torch_dev *d,
		     struct torch_verdict *v)
{
	const struct torch_proc *p = d->exited ? NULL : pid_table__find(&m->procs, d->pid);
	struct torch_site s[TORCH_SITES];
	unsigned int i;

	memcpy(s, p ? p->sites : d->sites, sizeof(s));
	qsort(s, TORCH_SITES, sizeof(s[0]), by_bytes);
	for (i = 0; i < TORCH_SITES && s[i].id; i++)
		v->sites[v->n_sites++] = s[i].id;
}

uint64_t torch_model__reserved(const struct torch_model *m, const struct torch_dev *d,
			      bool *from_calls)
{
	const struct torch_proc *p = d->exited ? NULL : pid_table__find(&m->procs, d->pid);
	const struct torch_seg_proc *seg = p ? &p->seg : NULL;
	uint64_t reserved = d->last.reserved;

	*from_calls = (d->last.flags & TORCH_S_TOTALS) && torch_seg__moved(&d->seg, seg);
	if (*from_calls)
		torch_seg__reserved(&d->seg, seg, &reserved);
	return reserved;
}

/* Reserved and its peak now, with what its segments' calls said since. */
static void reserved_of(const struct torch_model *m, const struct torch_dev *d,
			struct torch_verdict *v)
{
	v->reserved = torch_model__reserved(m, d, &v->reserved_from_calls);
	v->peak_reserved = d->last.peak_reserved;
	if (v->reserved_known && d->seg.peak > v->peak_reserved)
		v->peak_reserved = d->seg.peak;
}

/* The figures at its last sample (reserved: now), and its segments' call sites. */
static void figures_of(const struct torch_model *m, const struct torch_dev *d,
		       struct torch_verdict *v)
{
	const struct torch_sample *s = &d->last;

	memset(v, 0, sizeof(*v));
	v->reserved_known = s->flags & TORCH_S_TOTALS;
	v->expandable = expandable_of(m, d);
	v->max_split = s->flags & TORCH_S_MAX_SPLIT;
	v->allocated = s->allocated;
	reserved_of(m, d, v);
	v->peak_allocated = s->peak_allocated;
	v->cached = v->reserved > s->allocated ? v->reserved - s->allocated : 0;
	v->cached_share = share(v->cached, v->reserved);
	v->first_ns = d->first_ns;
	v->last_ns = s->ts_ns;
	v->n_episodes = d->n_episodes;
	sites_of(m, d, v);
}

/*
 * The window's verdict, and the horizons' when asked: false in the
 * warm-up. w: the window's slots, *n of them.
 */
static bool judge_now(const struct torch_model *m, const struct torch_dev *d, bool horizons,
		      struct torch_slide *keep, struct torch_verdict *v, struct torch_slot *w,
		      unsigned int *n)
{
	struct halves h;

	*n = window(m, d, w);
	if (d->last.ts_ns - d->first_ns < m->rules.warmup_ns || *n < TORCH_MIN_SLOTS) {
		v->warmup = true;
		return false;
	}
	v->slots = *n;
	v->span_ns = (w[*n - 1].n - w[0].n + 1) * slot_ns(m);
	halves_of(w, *n, &h);
	decide(&m->rules, &h, v);
	if (horizons)
		torch_slide__judge(m, d, v, keep);
	return true;
}

static bool rose(const struct torch_slot *w, unsigned int i, enum torch_kind k)
{
	if (k == TORCH_LEAK)
		return w[i].low > w[i - 1].low;
	return k == TORCH_FRAGMENTATION && w[i].reserved_max > w[i - 1].reserved_max;
}

/*
 * The window's first and last slots that rose over the one before: the
 * floor for a leak, reserved for fragmentation; else its first and last.
 */
static void rise_of(const struct torch_slot *w, unsigned int n, enum torch_kind k,
		    unsigned int *first, unsigned int *last)
{
	unsigned int i;

	*first = 0;
	*last = n - 1;
	for (i = 1; i < n && !rose(w, i, k); i++)
		;
	if (i == n)
		return;
	*first = i;
	for (i = n - 1; i > *first && !rose(w, i, k); i--)
		;
	*last = i;
}

/*
 * A judgement as an episode: on a horizon, over its fit; on the window,
 * from the first slot that grew to the last (the whole window for
 * cache-held), its figures the level before and at the top.
 */
static void episode_of(const struct torch_model *m, const struct torch_dev *d,
		       const struct torch_verdict *v, const struct torch_slot *w, unsigned int n,
		       struct torch_episode *e)
{
	const struct torch_slot *ends[2];
	unsigned int i, j, k;

	memset(e, 0, sizeof(*e));
	e->kind = v->kind;
	if (v->slide_horizon) {
		torch_slide__episode(&m->rules, d, v, e);
		return;
	}
	/* From where it began to grow (its figures the level before) to where it stopped. */
	rise_of(w, n, v->kind, &i, &j);
	ends[0] = &w[i ? i - 1 : 0];
	ends[1] = &w[j];
	e->start_ns = w[i].ts;
	e->end_ns = j == n - 1 ? d->last.ts_ns : w[j].ts_last;
	for (k = 0; k < 2; k++) {
		e->reserved[k] = v->reserved_known ? ends[k]->reserved_max : 0;
		e->floor[k] = ends[k]->low;
		e->peak[k] = ends[k]->high;
		e->unused[k] = e->reserved[k] > e->peak[k] ? e->reserved[k] - e->peak[k] : 0;
	}
}

/*
 * Judge the window that ends at its last sample, into its episodes.
 * Without the horizons (between turns of the shortest's slot) only the
 * window's leak and fragmentation are said: ok or cache-held then may be
 * a horizon's slide, which waits for its turn.
 */
static void note(const struct torch_model *m, struct torch_dev *d, bool horizons)
{
	struct torch_slot w[TORCH_SLOTS];
	struct torch_verdict v;
	struct torch_episode e;
	unsigned int n;

	memset(&v, 0, sizeof(v));
	v.reserved_known = d->last.flags & TORCH_S_TOTALS;
	v.reserved = d->last.reserved;
	if (!judge_now(m, d, horizons, d->slides, &v, w, &n))
		return;
	if (!horizons && v.kind != TORCH_LEAK && v.kind != TORCH_FRAGMENTATION)
		return;
	if (v.kind == TORCH_OK) {
		d->open = false;
		return;
	}
	episode_of(m, d, &v, w, n, &e);
	torch_episodes__keep(d, &e);
}

void torch_model__judge(const struct torch_model *m, const struct torch_dev *d,
			struct torch_verdict *v)
{
	struct torch_slot w[TORCH_SLOTS];
	struct torch_episode now;
	unsigned int n;
	bool judged;

	figures_of(m, d, v);
	judged = judge_now(m, d, true, NULL, v, w, &n) && v->kind != TORCH_OK;
	/* Most often the episodes hold it already: its figures only when not. */
	if (judged && !torch_episodes__open(d, v->kind))
		episode_of(m, d, v, w, n, &now);
	else
		judged = false;
	torch_episodes__cause(d, judged ? &now : NULL, v);
	v->advice = advise(v, v->has_cause ? v->cause.kind : v->kind);
}

/* What a process shows: the worst root cause, then the worst window. */
static bool worse(const struct torch_verdict *a, const struct torch_verdict *b)
{
	int ca = a->has_cause ? torch_kind__severity(a->cause.kind) : 0;
	int cb = b->has_cause ? torch_kind__severity(b->cause.kind) : 0;

	if (ca != cb)
		return ca > cb;
	if (a->kind != b->kind)
		return torch_kind__severity(a->kind) > torch_kind__severity(b->kind);
	return a->warmup < b->warmup;
}

bool torch_model__judge_pid(const struct torch_model *m, uint32_t pid,
			    struct torch_verdict *v)
{
	struct torch_verdict one, sum;
	bool found, any = false, all_warm = true;
	size_t i = find(m, pid, 0, &found);

	memset(&sum, 0, sizeof(sum));
	for (; i < m->n && m->devs[i].pid == pid; i++) {
		torch_model__judge(m, &m->devs[i], &one);
		if (!any || worse(&one, v))
			*v = one;
		all_warm &= one.warmup;
		sum.allocated += one.allocated;
		sum.reserved += one.reserved;
		sum.cached += one.cached;
		sum.peak_allocated += one.peak_allocated;
		sum.peak_reserved += one.peak_reserved;
		sum.reserved_known |= one.reserved_known;
		sum.reserved_from_calls |= one.reserved_from_calls;
		sum.n_episodes += one.n_episodes;
		if (!any || one.first_ns < sum.first_ns)
			sum.first_ns = one.first_ns;
		if (one.last_ns > sum.last_ns)
			sum.last_ns = one.last_ns;
		any = true;
	}
	if (!any)
		return false;
	v->warmup = all_warm;
	v->allocated = sum.allocated;
	v->reserved = sum.reserved;
	v->cached = sum.cached;
	v->cached_share = share(sum.cached, sum.reserved);
	v->peak_allocated = sum.peak_allocated;
	v->peak_reserved = sum.peak_reserved;
	v->reserved_known = sum.reserved_known;
	v->reserved_from_calls = sum.reserved_from_calls;
	v->n_episodes = sum.n_episodes;
	v->first_ns = sum.first_ns;
	v->last_ns = sum.last_ns;
	return true;
}
