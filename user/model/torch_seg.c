// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Reserved moved by the driver calls that make segments: see torch_seg.h. */
#include <string.h>
#include "model/cuda_api.h"
#include "model/torch_seg.h"

#define MIB (1ULL << 20)
/* Every segment is whole 2 MiB; an expandable one's pages 2 or 20 MiB. */
#define SEG_ROUND (2 * MIB)
#define SEG_PAGE_LARGE (20 * MIB)

static bool seg_alloc(const struct umt_call_rec *r)
{
	if (r->api == UMT_API_MEM_CREATE)
		return r->size == SEG_ROUND || r->size == SEG_PAGE_LARGE;
	return (r->api == UMT_API_MEM_ALLOC_V2 || r->api == UMT_API_MEM_ALLOC) &&
	       r->size && !(r->size % SEG_ROUND);
}

static bool seg_free(const struct umt_call_rec *r)
{
	return r->api == UMT_API_MEM_FREE_V2 || r->api == UMT_API_MEM_FREE ||
	       r->api == UMT_API_MEM_RELEASE;
}

static void take(struct torch_seg_proc *p, uint64_t bytes)
{
	p->bytes -= bytes < p->bytes ? bytes : p->bytes;
}

bool torch_seg__call(struct alloc_table *t, struct torch_seg_proc *p,
		     const struct umt_call_rec *r)
{
	const struct cuda_api *api = cuda_api__get(r->api);
	struct alloc_entry e, old;
	uint64_t before = p->bytes;
	int ret;

	if (!api || r->end != UMT_END_RETURNED || r->ret)
		return false;
	memset(&e, 0, sizeof(e));
	e.key = (struct alloc_key){ r->pid, api->space, r->handle };
	if (seg_free(r)) {
		/* Not one of its segments (or made before umtrace started): no move. */
		if (!alloc_table__remove(t, &e.key, &old))
			return false;
		take(p, old.size);
	} else if (seg_alloc(r)) {
		e.api = r->api;
		e.size = r->size;
		e.ts_ns = r->ts_ns;
		e.ret_ns = r->ts_ns + r->duration_ns;
		ret = alloc_table__insert(t, &e, &old);
		/* A full table: the next sample disagrees, and anchors afresh. */
		if (ret < 0)
			return false;
		if (ret == 1)
			take(p, old.size);	/* its free was lost */
		p->bytes += r->size;
	} else {
		return false;
	}
	if (p->bytes == before)
		return false;
	p->seq++;
	p->log[p->seq % TORCH_SEG_LOG] = (struct torch_seg_point){
		r->ts_ns + r->duration_ns, p->bytes,
	};
	return true;
}

static bool kept(const struct torch_seg_proc *p, uint64_t i)
{
	return i <= p->seq && p->seq - i < TORCH_SEG_LOG;
}

static uint64_t bytes_at(const struct torch_seg_proc *p, uint64_t i)
{
	return p->log[i % TORCH_SEG_LOG].bytes;
}

/* The driver's point at ts: the last call that returned by then, not before from. */
static uint64_t point_at(const struct torch_seg_proc *p, uint64_t from, uint64_t ts)
{
	uint64_t i = p->seq;

	while (i > from && kept(p, i) && p->log[i % TORCH_SEG_LOG].ts_ns > ts)
		i--;
	return i;
}

/*
 * The first point from at where the driver said want: a sample's figures
 * are of its time, or (read from the kernel's table) of up to 15 hook calls
 * after it. Never before at: a sample that repeats an older figure is a
 * disagreement, as when a buffer the allocator does not count was made.
 */
static bool match(const struct torch_seg_proc *p, uint64_t at, uint64_t want, uint64_t *out)
{
	uint64_t i;

	for (i = at; i <= p->seq && kept(p, i); i++) {
		if (bytes_at(p, i) == want) {
			*out = i;
			return true;
		}
	}
	return false;
}

void torch_seg__sample(struct torch_seg_dev *d, const struct torch_seg_proc *p,
		       uint64_t ts_ns, uint64_t reserved)
{
	static const struct torch_seg_proc none;	/* no call yet: point 0, 0 bytes */
	int64_t want;
	uint64_t at, j;

	if (!p)
		p = &none;
	at = point_at(p, d->anchored ? d->point : 0, ts_ns);
	/*
	 * Older than the log (read from the table a tick after its window
	 * closed, the job's segments moving since): nothing to check it
	 * against, and no news of the calls: the state stays.
	 */
	if (!kept(p, at))
		return;
	want = (int64_t)reserved - d->offset;
	if (d->anchored && want >= 0 && match(p, at, (uint64_t)want, &j)) {
		/* Both moved alike: the calls are its segments. Neither: no news. */
		if (reserved != d->hook_reserved)
			d->confirmed = true;
		d->point = j;
		d->hook_reserved = reserved;
		return;
	}
	d->anchored = true;
	d->confirmed = false;
	d->offset = (int64_t)reserved - (int64_t)bytes_at(p, at);
	d->point = at;
	d->hook_reserved = reserved;
}

/* The driver's figure now: the process's, or the one kept at its end. */
static bool bytes_now(const struct torch_seg_dev *d, const struct torch_seg_proc *p,
		      uint64_t *out)
{
	if (d->ended)
		*out = d->end_bytes;
	else if (p)
		*out = p->bytes;
	return d->ended || p;
}

bool torch_seg__reserved(const struct torch_seg_dev *d, const struct torch_seg_proc *p,
			 uint64_t *out)
{
	uint64_t bytes;
	int64_t v;

	if (!d->confirmed || !bytes_now(d, p, &bytes))
		return false;
	v = d->offset + (int64_t)bytes;
	*out = v > 0 ? (uint64_t)v : 0;
	return true;
}

bool torch_seg__moved(const struct torch_seg_dev *d, const struct torch_seg_proc *p)
{
	uint64_t v;

	return torch_seg__reserved(d, p, &v) && v != d->hook_reserved;
}

void torch_seg__end(struct torch_seg_dev *d, const struct torch_seg_proc *p)
{
	if (d->ended)
		return;
	d->end_bytes = p ? p->bytes : 0;
	d->ended = true;
}
