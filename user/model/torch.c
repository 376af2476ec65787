// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* PyTorch's caching allocator from its hook's samples: see torch.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "model/cuda_api.h"
#include "model/torch.h"

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
}

void torch_model__free(struct torch_model *m)
{
	free(m->devs);
	pid_table__free(&m->procs);
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
		sl->reserved_max = s->reserved;
		sl->low = low;
		sl->high = high;
		return;
	}
	if (s->reserved > sl->reserved_max)
		sl->reserved_max = s->reserved;
	if (low < sl->low)
		sl->low = low;
	if (high > sl->high)
		sl->high = high;
}

static const uint64_t horizon_s[TORCH_HORIZONS] = { 60, 900, 3600 };

static void into_trends(struct torch_dev *d, const struct torch_sample *s)
{
	uint64_t low = s->alloc_low < s->allocated ? s->alloc_low : s->allocated;
	uint64_t high = s->alloc_high > s->allocated ? s->alloc_high : s->allocated;
	uint64_t unused = s->reserved > high ? s->reserved - high : 0;
	unsigned int i;

	for (i = 0; i < TORCH_HORIZONS; i++) {
		if (!d->floor_t[i].slot_ns) {	/* new: made zeroed */
			trend__init(&d->floor_t[i], horizon_s[i] * 1000000000ULL);
			trend__init(&d->reserved_t[i], horizon_s[i] * 1000000000ULL);
			trend__init(&d->unused_t[i], horizon_s[i] * 1000000000ULL);
		}
		trend__add(&d->floor_t[i], s->ts_ns, (double)low);
		if (!(s->flags & TORCH_S_TOTALS))
			continue;
		trend__add(&d->reserved_t[i], s->ts_ns, (double)s->reserved);
		trend__add(&d->unused_t[i], s->ts_ns, (double)unused);
	}
}

int torch_model__add(struct torch_model *m, const struct torch_sample *s)
{
	struct torch_dev *d = dev_of(m, s->pid, s->device);

	if (!d)
		return -ENOMEM;
	if (d->exited && s->ts_ns > d->last.ts_ns) {
		/* The pid is another process's now: start afresh. */
		memset(d, 0, sizeof(*d));
		d->pid = s->pid;
		d->device = s->device;
	}
	if (!d->first_ns || s->ts_ns < d->first_ns)
		d->first_ns = s->ts_ns;
	into_slot(m, d, s);
	into_trends(d, s);
	/* Samples may come out of order (the table read beside the ring buffer). */
	if (s->allocs + s->frees >= d->last.allocs + d->last.frees)
		d->last = *s;
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

void torch_model__call(struct torch_model *m, const struct umt_call_rec *r, uint32_t site)
{
	const struct cuda_api *api = cuda_api__get(r->api);
	struct torch_proc *p;

	if (r->end != UMT_END_RETURNED || r->ret || !segment_call(api))
		return;
	p = pid_table__get(&m->procs, r->pid);
	if (!p)
		return;
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
			m->devs[i].exited = true;
			m->devs[i].created |= p && p->created;
			m->devs[i].segments |= p && p->segments;
			if (p)
				memcpy(m->devs[i].sites, p->sites, sizeof(p->sites));
		}
		m->devs[k++] = m->devs[i];
	}
	m->n = k;
	/* A pid used again is another process: its calls tell afresh. */
	pid_table__remove(&m->procs, pid);
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

static unsigned int advise(const struct torch_verdict *v)
{
	switch (v->kind) {
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

/*
 * A trend over horizon seconds that rises by a significant growth of base
 * (or, base < 0, of its own level) over slots spanning half of it at least.
 */
static bool slides_up(const struct torch_rules *r, const struct trend *t, uint64_t horizon,
		      uint64_t now, double base, double *per_hour)
{
	struct trend_fit f;
	double need;

	if (!trend__fit(t, now, &f) || f.span_s * 2 < (double)horizon)
		return false;
	if (base < 0)
		base = f.last - f.slope * f.span_s;
	need = r->growth_frac * (base > 0 ? base : 0);
	if (need < (double)r->min_growth)
		need = (double)r->min_growth;
	*per_hour = f.slope * 3600;
	return trend_fit__slides(&f, 1, need);
}

/* What the window cannot see: a slide on the shortest horizon that names one. */
static void judge_slide(const struct torch_model *m, const struct torch_dev *d,
			struct torch_verdict *v)
{
	uint64_t now = d->last.ts_ns;
	double floor_h, reserved_h, unused_h;
	unsigned int i;

	if (v->kind == TORCH_LEAK || v->kind == TORCH_FRAGMENTATION)
		return;		/* named in the window already */
	for (i = 0; i < TORCH_HORIZONS; i++) {
		if (slides_up(&m->rules, &d->floor_t[i], horizon_s[i], now, -1, &floor_h)) {
			v->kind = TORCH_LEAK;
			v->slide_per_hour = floor_h;
		} else if (v->reserved_known &&
			   slides_up(&m->rules, &d->reserved_t[i], horizon_s[i], now, -1,
				     &reserved_h) &&
			   /* new segments no tensor needs: not demand */
			   slides_up(&m->rules, &d->unused_t[i], horizon_s[i], now,
				     (double)v->reserved - reserved_h * horizon_s[i] / 3600,
				     &unused_h)) {
			v->kind = TORCH_FRAGMENTATION;
			v->slide_per_hour = reserved_h;
		} else {
			continue;
		}
		v->slide_horizon = horizon_s[i];
		return;
	}
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

void torch_model__judge(const struct torch_model *m, const struct torch_dev *d,
			struct torch_verdict *v)
{
	struct torch_slot w[TORCH_SLOTS];
	const struct torch_sample *s = &d->last;
	struct halves h;
	unsigned int n;

	memset(v, 0, sizeof(*v));
	v->reserved_known = s->flags & TORCH_S_TOTALS;
	v->expandable = expandable_of(m, d);
	v->max_split = s->flags & TORCH_S_MAX_SPLIT;
	v->allocated = s->allocated;
	v->reserved = s->reserved;
	v->peak_allocated = s->peak_allocated;
	v->peak_reserved = s->peak_reserved;
	v->cached = s->reserved > s->allocated ? s->reserved - s->allocated : 0;
	v->cached_share = share(v->cached, s->reserved);
	sites_of(m, d, v);
	n = window(m, d, w);
	if (s->ts_ns - d->first_ns < m->rules.warmup_ns || n < TORCH_MIN_SLOTS) {
		v->warmup = true;
		return;
	}
	v->slots = n;
	v->span_ns = (w[n - 1].n - w[0].n + 1) * slot_ns(m);
	halves_of(w, n, &h);
	decide(&m->rules, &h, v);
	judge_slide(m, d, v);
	v->advice = advise(v);
}

/* Which of two verdicts a process shows: the one that grows without bound first. */
static int severity(enum torch_kind k)
{
	switch (k) {
	case TORCH_LEAK:
		return 3;
	case TORCH_FRAGMENTATION:
		return 2;
	case TORCH_CACHE_HELD:
		return 1;
	default:
		return 0;
	}
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
		if (!any || severity(one.kind) > severity(v->kind) ||
		    (one.kind == v->kind && one.warmup < v->warmup))
			*v = one;
		all_warm &= one.warmup;
		sum.allocated += one.allocated;
		sum.reserved += one.reserved;
		sum.cached += one.cached;
		sum.peak_allocated += one.peak_allocated;
		sum.peak_reserved += one.peak_reserved;
		sum.reserved_known |= one.reserved_known;
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
	return true;
}
