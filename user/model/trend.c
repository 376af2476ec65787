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

/*
 * The k-th smallest of a[0..n) (Hoare's selection), a[] reordered so that
 * those before k are no larger: the median of 435 slopes without sorting
 * them, as often as hundreds of processes' horizons are judged.
 */
static double nth(double *a, unsigned int n, unsigned int k)
{
	int lo = 0, hi = (int)n - 1, i, j;
	double pivot, x;

	while (lo < hi) {
		pivot = a[lo + (hi - lo) / 2];
		i = lo;
		j = hi;
		do {
			while (a[i] < pivot)
				i++;
			while (a[j] > pivot)
				j--;
			if (i <= j) {
				x = a[i];
				a[i++] = a[j];
				a[j--] = x;
			}
		} while (i <= j);
		/* now a[lo..j] <= pivot <= a[i..hi], and a[j+1..i-1] == pivot */
		if ((int)k <= j)
			hi = j;
		else if ((int)k >= i)
			lo = i;
		else
			break;
	}
	return a[k];
}

/* The median: for an even count, the mean of the two middle ones. */
static double median(double *a, unsigned int n)
{
	double hi = nth(a, n, n / 2), lo = a[0];
	unsigned int i;

	if (n % 2)
		return hi;
	for (i = 1; i < n / 2; i++)	/* the largest of those below */
		lo = a[i] > lo ? a[i] : lo;
	return (lo + hi) / 2;
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
	f->slope = median(slopes, m);
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
