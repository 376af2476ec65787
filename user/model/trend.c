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

	if (s->n != (uint32_t)n) {
		s->n = (uint32_t)n;
		s->count = 0;
		s->mean = 0;
	}
	s->count++;
	/* A running mean: a sum of an hour's samples would outgrow a float. */
	s->mean = (float)(s->mean + (v - s->mean) / s->count);
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

/* How many slots a is after b: slot numbers wrap. */
static int32_t slot_diff(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b);
}

static int cmp_slot(const void *a, const void *b)
{
	int32_t d = slot_diff(((const struct trend_slot *)a)->n, ((const struct trend_slot *)b)->n);

	return (d > 0) - (d < 0);
}

/* The slots within the horizon that ends at slot now, oldest first. */
static unsigned int in_horizon(const struct trend *t, uint32_t now, struct trend_slot *out)
{
	unsigned int i, k = 0;
	int32_t age;

	for (i = 0; i < TREND_SLOTS; i++) {
		const struct trend_slot *s = &t->slots[i];

		age = slot_diff(now, s->n);
		if (s->n && s->count && age >= 0 && age < TREND_SLOTS)
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
	k = in_horizon(t, (uint32_t)(now_ns / t->slot_ns + 1), s);
	f->slots = k;
	if (k < TREND_MIN_SLOTS)
		return false;
	for (i = 0; i < k; i++) {
		vi = s[i].mean;
		for (j = i + 1; j < k; j++) {
			vj = s[j].mean;
			slopes[m++] = (vj - vi) / ((double)slot_diff(s[j].n, s[i].n) * slot_s);
			rise += (vj > vi) - (vj < vi);
		}
	}
	f->slope = median(slopes, m);
	f->agreement = (double)rise / (double)m;
	f->span_s = (double)slot_diff(s[k - 1].n, s[0].n) * slot_s;
	f->last = s[k - 1].mean;
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
