// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <stdlib.h>
#include <string.h>
#include "model/trend.h"

#define PAIRS (TREND_SLOTS * (TREND_SLOTS - 1) / 2)

void trend__init(struct trend *t, uint64_t horizon_ns)
{
	memset(t, 0, sizeof(*t));
	t->slot_ns = horizon_ns / TREND_SLOTS ? horizon_ns / TREND_SLOTS : 1;
}

void trend__add(struct trend *t, uint64_t ts_ns, double v)
{
	uint64_t n = ts_ns / t->slot_ns + 1;
	struct trend_slot *s = &t->slots[n % TREND_SLOTS];

	if (s->n != n) {
		s->n = n;
		s->count = 0;
		s->sum = 0;
	}
	s->count++;
	s->sum += v;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int cmp_slot(const void *a, const void *b)
{
	uint64_t x = ((const struct trend_slot *)a)->n, y = ((const struct trend_slot *)b)->n;

	return (x > y) - (x < y);
}

/* The slots within the horizon that ends at slot now, oldest first. */
static unsigned int in_horizon(const struct trend *t, uint64_t now, struct trend_slot *out)
{
	unsigned int i, k = 0;

	for (i = 0; i < TREND_SLOTS; i++) {
		const struct trend_slot *s = &t->slots[i];

		if (s->n && s->count && s->n <= now && s->n + TREND_SLOTS > now)
			out[k++] = *s;
	}
	qsort(out, k, sizeof(*out), cmp_slot);
	return k;
}

bool trend__fit(const struct trend *t, uint64_t now_ns, struct trend_fit *f)
{
	struct trend_slot s[TREND_SLOTS];
	double slopes[PAIRS], slot_s = (double)t->slot_ns / 1e9, vi, vj;
	unsigned int i, j, k, m = 0;
	int rise = 0;

	memset(f, 0, sizeof(*f));
	k = in_horizon(t, now_ns / t->slot_ns + 1, s);
	f->slots = k;
	if (k < TREND_MIN_SLOTS)
		return false;
	for (i = 0; i < k; i++) {
		vi = s[i].sum / (double)s[i].count;
		for (j = i + 1; j < k; j++) {
			vj = s[j].sum / (double)s[j].count;
			slopes[m++] = (vj - vi) / ((double)(s[j].n - s[i].n) * slot_s);
			rise += (vj > vi) - (vj < vi);
		}
	}
	qsort(slopes, m, sizeof(slopes[0]), cmp_double);
	f->slope = m % 2 ? slopes[m / 2] : (slopes[m / 2 - 1] + slopes[m / 2]) / 2;
	f->agreement = (double)rise / (double)m;
	f->span_s = (double)(s[k - 1].n - s[0].n) * slot_s;
	f->last = s[k - 1].sum / (double)s[k - 1].count;
	return true;
}

bool trend_fit__slides(const struct trend_fit *f, int sign, double min_move)
{
	if (f->slots < TREND_MIN_SLOTS)
		return false;
	return f->agreement * sign >= TREND_AGREEMENT && f->slope * sign * f->span_s >= min_move;
}

double trend__seconds_to(double headroom, double rate)
{
	if (headroom <= 0)
		return 0;
	if (rate <= 0)
		return -1;
	return headroom / rate;
}
