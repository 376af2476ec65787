// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The timeline's model: host memory samples, each process's attributed
 * memory by sample, and the events (bursts, reclaim, guard stops), kept in
 * time order and bounded by the caps of user/export/timeline.h. Drawn by
 * export_timeline() in timeline_svg.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "export/timeline.h"
#include "stacks/stackset.h"

void timeline__init(struct timeline *t)
{
	memset(t, 0, sizeof(*t));
}

void timeline__free(struct timeline *t)
{
	size_t i;

	for (i = 0; i < t->n_procs; i++)
		free(t->procs[i].points);
	for (i = 0; i < t->n_torch; i++)
		free(t->torch[i].points);
	free(t->torch);
	free(t->samples);
	free(t->procs);
	free(t->bursts);
	free(t->reclaims);
	free(t->stops);
	timeline__init(t);
}

/*
 * The array v (of *cap entries of size bytes) with room for entry n: v
 * itself, or moved. NULL and *err -ENOSPC at max entries, or -ENOMEM.
 */
static void *grow(void *v, size_t *cap, size_t n, size_t size, size_t max, int *err)
{
	size_t c;
	void *p;

	*err = n >= max ? -ENOSPC : -ENOMEM;
	if (n < *cap)
		return v;
	if (n >= max)
		return NULL;
	c = *cap ? *cap * 2 : 64;
	if (c > max)
		c = max;
	p = realloc(v, c * size);
	if (!p)
		return NULL;
	*cap = c;
	return p;
}

static int refuse(struct timeline *t, int err)
{
	if (err == -ENOSPC)
		t->refused++;
	return err;
}

int timeline__add_sample(struct timeline *t, uint64_t t_ns, uint64_t mem_total,
			 uint64_t mem_available, uint64_t mem_free)
{
	struct timeline_sample *v;
	int err;

	if (t->n_samples && t_ns < t->samples[t->n_samples - 1].t_ns)
		return -EINVAL;
	v = grow(t->samples, &t->cap_samples, t->n_samples, sizeof(*v),
		 TIMELINE_MAX_SAMPLES, &err);
	if (!v)
		return refuse(t, err);
	t->samples = v;
	t->samples[t->n_samples++] = (struct timeline_sample){
		.t_ns = t_ns,
		.mem_total = mem_total,
		.mem_available = mem_available,
		.mem_free = mem_free,
	};
	return 0;
}

int timeline__set_pool(struct timeline *t, uint64_t bytes)
{
	if (!t->n_samples)
		return -EINVAL;
	t->samples[t->n_samples - 1].pool = bytes;
	return 0;
}

static struct timeline_proc *find_proc(struct timeline *t, uint32_t pid, const char *comm)
{
	struct timeline_proc *p;
	size_t i;
	int err;

	for (i = t->n_procs; i-- > 0;)
		if (t->procs[i].pid == pid)
			return &t->procs[i];
	/* Past the cap every newcomer shares the one "other" series (pid 0). */
	if (t->n_procs >= TIMELINE_MAX_PROCS && pid) {
		t->refused++;
		return find_proc(t, 0, "other processes");
	}
	p = grow(t->procs, &t->cap_procs, t->n_procs, sizeof(*p), TIMELINE_MAX_PROCS + 1, &err);
	if (!p)
		return NULL;
	t->procs = p;
	p = &t->procs[t->n_procs++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	text__clean(p->comm, sizeof(p->comm), comm ? comm : "?");
	return p;
}

int timeline__set_proc_value(struct timeline *t, uint32_t pid, const char *comm,
			     uint64_t host_bytes)
{
	struct timeline_proc *p;
	struct timeline_point *last, *v;
	size_t now;
	int err;

	if (!t->n_samples)
		return -EINVAL;
	now = t->n_samples - 1;
	p = find_proc(t, pid, comm);
	if (!p)
		return -ENOMEM;
	last = p->n_points ? &p->points[p->n_points - 1] : NULL;
	if (last && last->sample == now) {
		/* "other" sums the processes it stands for; others are replaced. */
		last->bytes = p->pid ? host_bytes : last->bytes + host_bytes;
	} else {
		v = grow(p->points, &p->cap_points, p->n_points, sizeof(*v),
			 TIMELINE_MAX_SAMPLES, &err);
		if (!v)
			return refuse(t, err);
		p->points = v;
		last = &p->points[p->n_points++];
		last->sample = now;
		last->bytes = host_bytes;
	}
	if (last->bytes > p->peak)
		p->peak = last->bytes;
	return 0;
}

int timeline__add_burst(struct timeline *t, uint64_t t_ns, uint32_t pid, uint64_t bytes)
{
	struct timeline_burst *v;
	int err;

	v = grow(t->bursts, &t->cap_bursts, t->n_bursts, sizeof(*v), TIMELINE_MAX_EVENTS, &err);
	if (!v)
		return refuse(t, err);
	t->bursts = v;
	t->bursts[t->n_bursts++] = (struct timeline_burst){ t_ns, pid, bytes };
	return 0;
}

int timeline__add_reclaim(struct timeline *t, uint64_t t_ns, uint64_t count)
{
	struct timeline_reclaim *v;
	int err;

	v = grow(t->reclaims, &t->cap_reclaims, t->n_reclaims, sizeof(*v), TIMELINE_MAX_EVENTS,
		 &err);
	if (!v)
		return refuse(t, err);
	t->reclaims = v;
	t->reclaims[t->n_reclaims++] = (struct timeline_reclaim){ t_ns, count };
	return 0;
}

int timeline__add_stop(struct timeline *t, uint64_t t_ns, uint32_t pid, const char *comm,
		       const char *reason, uint64_t available)
{
	struct timeline_stop *s;
	int err;

	s = grow(t->stops, &t->cap_stops, t->n_stops, sizeof(*s), TIMELINE_MAX_EVENTS, &err);
	if (!s)
		return refuse(t, err);
	t->stops = s;
	s = &t->stops[t->n_stops++];
	s->t_ns = t_ns;
	s->pid = pid;
	s->available = available;
	text__clean(s->comm, sizeof(s->comm), comm ? comm : "?");
	text__clean(s->reason, sizeof(s->reason), reason ? reason : "");
	return 0;
}

static struct timeline_torch *torch_series(struct timeline *t, uint32_t pid, uint32_t device,
					   const char *comm, int *err)
{
	struct timeline_torch *v;
	size_t i;

	for (i = 0; i < t->n_torch; i++)
		if (t->torch[i].pid == pid && t->torch[i].device == device)
			return &t->torch[i];
	v = grow(t->torch, &t->cap_torch, t->n_torch, sizeof(*v), TIMELINE_MAX_TORCH, err);
	if (!v)
		return NULL;
	t->torch = v;
	v = &t->torch[t->n_torch++];
	memset(v, 0, sizeof(*v));
	v->pid = pid;
	v->device = device;
	text__clean(v->comm, sizeof(v->comm), comm ? comm : "?");
	return v;
}

int timeline__add_torch(struct timeline *t, uint64_t t_ns, uint32_t pid, uint32_t device,
			const char *comm, uint64_t reserved, bool reserved_known,
			uint64_t alloc_low, uint64_t alloc_high)
{
	struct timeline_torch_point *p;
	struct timeline_torch *s;
	int err;

	s = torch_series(t, pid, device, comm, &err);
	if (!s)
		return refuse(t, err);
	if (s->n_points && t_ns < s->points[s->n_points - 1].t_ns)
		return 0;
	p = grow(s->points, &s->cap_points, s->n_points, sizeof(*p), TIMELINE_MAX_SAMPLES, &err);
	if (!p)
		return refuse(t, err);
	s->points = p;
	s->points[s->n_points++] = (struct timeline_torch_point){
		.t_ns = t_ns,
		.reserved = reserved_known ? reserved : 0,
		.alloc_low = alloc_low,
		.alloc_high = alloc_high,
	};
	s->reserved_known |= reserved_known;
	if (reserved_known && reserved > s->peak)
		s->peak = reserved;
	if (alloc_high > s->peak)
		s->peak = alloc_high;
	return 0;
}

int timeline__add_torch_band(struct timeline *t, uint32_t pid, uint32_t device,
			     const char *kind, uint64_t start_ns, uint64_t end_ns)
{
	struct timeline_torch_band *b;
	size_t i;

	for (i = 0; i < t->n_torch; i++)
		if (t->torch[i].pid == pid && t->torch[i].device == device)
			break;
	if (i == t->n_torch || !t->torch[i].n_points)
		return -ENOENT;
	if (t->torch[i].n_bands == TIMELINE_TORCH_BANDS)
		return -E2BIG;
	b = &t->torch[i].bands[t->torch[i].n_bands++];
	b->start_ns = start_ns;
	b->end_ns = end_ns > start_ns ? end_ns : start_ns;
	text__clean(b->kind, sizeof(b->kind), kind ? kind : "?");
	return 0;
}
