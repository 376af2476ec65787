// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* A device's episodes, in bounded memory, and its root cause: see torch.h. */
#include <limits.h>
#include <string.h>
#include "model/torch_episode.h"

/* a goes on to where b ends. */
static void extend(struct torch_episode *a, const struct torch_episode *b)
{
	if (b->end_ns <= a->end_ns)
		return;
	a->end_ns = b->end_ns;
	a->reserved[1] = b->reserved[1];
	a->floor[1] = b->floor[1];
	a->peak[1] = b->peak[1];
	a->unused[1] = b->unused[1];
	if (b->horizon_s)
		a->per_hour = b->per_hour;
}

int torch_kind__severity(enum torch_kind k)
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

/* The root cause: the most severe, the earliest among equals (oldest first). */
static unsigned int root_of(const struct torch_episode *e, unsigned int n)
{
	unsigned int i, r = 0;

	for (i = 1; i < n; i++)
		if (torch_kind__severity(e[i].kind) > torch_kind__severity(e[r].kind))
			r = i;
	return r;
}

static bool less_important(const struct torch_episode *a, const struct torch_episode *b)
{
	int sa = torch_kind__severity(a->kind), sb = torch_kind__severity(b->kind);

	if (sa != sb)
		return sa < sb;
	return a->end_ns - a->start_ns < b->end_ns - b->start_ns;
}

static void drop(struct torch_dev *d, unsigned int i)
{
	memmove(&d->episodes[i], &d->episodes[i + 1],
		(d->n_episodes - i - 1) * sizeof(d->episodes[0]));
	d->n_episodes--;
}

/*
 * Full: the closest two neighbours of one kind become one; else the least
 * important goes, never the root cause nor the newest (where it is now).
 */
static void make_room(struct torch_dev *d)
{
	struct torch_episode *e = d->episodes;
	unsigned int root = root_of(e, d->n_episodes), i, best = UINT_MAX;
	uint64_t gap, closest = UINT64_MAX;

	for (i = 0; i + 1 < d->n_episodes; i++) {
		if (e[i].kind != e[i + 1].kind)
			continue;
		gap = e[i + 1].start_ns > e[i].end_ns ? e[i + 1].start_ns - e[i].end_ns : 0;
		if (gap < closest) {
			closest = gap;
			best = i;
		}
	}
	if (best != UINT_MAX) {
		extend(&e[best], &e[best + 1]);
		drop(d, best + 1);
		return;
	}
	for (i = 0; i + 1 < d->n_episodes; i++)
		if (i != root && (best == UINT_MAX || less_important(&e[i], &e[best])))
			best = i;
	drop(d, best);
}

void torch_episodes__keep(struct torch_dev *d, const struct torch_episode *e)
{
	struct torch_episode *last = d->n_episodes ? &d->episodes[d->n_episodes - 1] : NULL;

	struct torch_episode *next;

	if (last && last->kind == e->kind && (d->open || e->start_ns <= last->end_ns)) {
		extend(last, e);
		d->open = true;
		return;
	}
	if (d->n_episodes == TORCH_EPISODES)
		make_room(d);
	next = &d->episodes[d->n_episodes];
	*next = *e;
	if (d->n_episodes && next->start_ns < next[-1].end_ns) {
		/* Windows overlap: it begins where the one before ended. */
		next->start_ns = next[-1].end_ns;
		next->reserved[0] = next[-1].reserved[1];
		next->floor[0] = next[-1].floor[1];
		next->peak[0] = next[-1].peak[1];
		next->unused[0] = next[-1].unused[1];
	}
	d->n_episodes++;
	d->open = true;
}

size_t torch_dev__episodes(const struct torch_dev *d, const struct torch_episode **out)
{
	*out = d->episodes;
	return d->n_episodes;
}

bool torch_episodes__open(const struct torch_dev *d, enum torch_kind kind)
{
	return d->n_episodes && d->open && d->episodes[d->n_episodes - 1].kind == kind;
}

void torch_episodes__cause(const struct torch_dev *d, const struct torch_episode *now,
			   struct torch_verdict *v)
{
	unsigned int r = d->n_episodes ? root_of(d->episodes, d->n_episodes) : 0;

	if (d->n_episodes) {
		v->cause = d->episodes[r];
		v->has_cause = true;
	}
	if (now && (!v->has_cause ||
		    torch_kind__severity(now->kind) > torch_kind__severity(v->cause.kind))) {
		v->cause = *now;
		v->has_cause = true;
	}
}
