// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The horizons beyond the window, and the slides they name: see torch.h. */
#include <errno.h>
#include <stdlib.h>
#include "model/torch_slide.h"

#define NS 1000000000ULL
/* A slot of the shortest should hold a few of a job's samples, 100 ms apart. */
#define HORIZON_MIN_S 10
#define HORIZON_MAX_S (7 * 24 * 3600ULL)

int torch_rules__horizons(struct torch_rules *r, const char *spec)
{
	uint64_t h[TORCH_HORIZONS];
	const char *p = spec;
	unsigned int i;
	char *end;

	if (!spec)
		return 0;
	for (i = 0; i < TORCH_HORIZONS; i++, p = end + 1) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		h[i] = strtoull(p, &end, 10);
		if (h[i] < HORIZON_MIN_S || h[i] > HORIZON_MAX_S || (i && h[i] <= h[i - 1]) ||
		    *end != (i + 1 < TORCH_HORIZONS ? ',' : '\0'))
			return -EINVAL;
	}
	for (i = 0; i < TORCH_HORIZONS; i++)
		r->horizon_s[i] = h[i];
	return 0;
}

void torch_slide__add(const struct torch_rules *r, struct torch_dev *d,
		      const struct torch_sample *s)
{
	uint64_t low = s->alloc_low < s->allocated ? s->alloc_low : s->allocated;
	uint64_t high = s->alloc_high > s->allocated ? s->alloc_high : s->allocated;
	uint64_t unused = s->reserved > high ? s->reserved - high : 0;
	unsigned int i;

	for (i = 0; i < TORCH_HORIZONS; i++) {
		if (!d->floor_t[i].slot_ns) {	/* new: made zeroed */
			trend__init(&d->floor_t[i], r->horizon_s[i] * NS);
			trend__init(&d->reserved_t[i], r->horizon_s[i] * NS);
			trend__init(&d->unused_t[i], r->horizon_s[i] * NS);
		}
		trend__add(&d->floor_t[i], s->ts_ns, (double)low);
		if (!(s->flags & TORCH_S_TOTALS))
			continue;
		trend__add(&d->reserved_t[i], s->ts_ns, (double)s->reserved);
		trend__add(&d->unused_t[i], s->ts_ns, (double)unused);
	}
}

bool torch_slide__turns(const struct torch_rules *r, uint64_t a_ns, uint64_t b_ns)
{
	uint64_t hs = r->horizon_s[0] * NS / TREND_SLOTS;

	return a_ns / hs != b_ns / hs;
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

/* Horizon i at now: a leak, fragmentation, or ok; its rate per hour. */
static void slide_on(const struct torch_model *m, const struct torch_dev *d, unsigned int i,
		     const struct torch_verdict *v, struct torch_slide *out)
{
	const uint64_t *horizon_s = m->rules.horizon_s;
	uint64_t now = d->last.ts_ns;
	double reserved_h, unused_h;

	out->kind = TORCH_OK;
	out->per_hour = 0;
	if (slides_up(&m->rules, &d->floor_t[i], horizon_s[i], now, -1, &out->per_hour)) {
		out->kind = TORCH_LEAK;
	} else if (v->reserved_known &&
		   slides_up(&m->rules, &d->reserved_t[i], horizon_s[i], now, -1, &reserved_h) &&
		   /* new segments no tensor needs: not demand */
		   slides_up(&m->rules, &d->unused_t[i], horizon_s[i], now,
			     (double)v->reserved - reserved_h * horizon_s[i] / 3600, &unused_h)) {
		out->kind = TORCH_FRAGMENTATION;
		out->per_hour = reserved_h;
	}
}

void torch_slide__judge(const struct torch_model *m, const struct torch_dev *d,
			struct torch_verdict *v, struct torch_slide *keep)
{
	const struct torch_slide *h;
	struct torch_slide fresh;
	uint64_t slot;
	unsigned int i;

	if (v->kind == TORCH_LEAK || v->kind == TORCH_FRAGMENTATION)
		return;		/* named in the window already */
	for (i = 0; i < TORCH_HORIZONS; i++) {
		slot = d->floor_t[i].slot_ns ? d->last.ts_ns / d->floor_t[i].slot_ns + 1 : 0;
		h = &d->slides[i];
		/* note() judges as a slot turns, so the one before counts too */
		if (!slot || (h->slot != slot && h->slot + 1 != slot)) {
			slide_on(m, d, i, v, &fresh);
			fresh.slot = slot;
			if (keep)
				keep[i] = fresh;
			h = &fresh;
		}
		if (h->kind == TORCH_OK)
			continue;
		v->kind = h->kind;
		v->slide_per_hour = h->per_hour;
		v->slide_horizon = m->rules.horizon_s[i];
		return;
	}
}

static uint64_t clamp(double x)
{
	return x > 0 ? (uint64_t)x : 0;
}

/* A horizon's fit at its start ([0]) and end ([1]); 0s when too few slots. */
static void fit_ends(const struct trend *t, uint64_t now, uint64_t *out, double *span_s)
{
	struct trend_fit f;

	if (!trend__fit(t, now, &f))
		return;
	out[0] = clamp(f.last - f.slope * f.span_s);
	out[1] = clamp(f.last);
	if (f.span_s > *span_s)
		*span_s = f.span_s;
}

void torch_slide__episode(const struct torch_rules *r, const struct torch_dev *d,
			  const struct torch_verdict *v, struct torch_episode *e)
{
	uint64_t now = d->last.ts_ns, span;
	unsigned int i, k;
	double span_s = 0;

	for (i = 0; i + 1 < TORCH_HORIZONS && r->horizon_s[i] != v->slide_horizon; i++)
		;
	fit_ends(&d->floor_t[i], now, e->floor, &span_s);
	fit_ends(&d->reserved_t[i], now, e->reserved, &span_s);
	fit_ends(&d->unused_t[i], now, e->unused, &span_s);
	for (k = 0; k < 2; k++)
		e->peak[k] = e->reserved[k] > e->unused[k] ? e->reserved[k] - e->unused[k] :
			     e->floor[k];
	span = (uint64_t)(span_s * 1e9);
	e->horizon_s = v->slide_horizon;
	e->per_hour = v->slide_per_hour;
	e->start_ns = now - d->first_ns > span ? now - span : d->first_ns;
	e->end_ns = now;
}

