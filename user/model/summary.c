// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stddef.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/sys.h"
#include "model/cuda_api.h"
#include "model/summary.h"

static int row_cmp(const void *a, const void *b)
{
	const struct summary_row *x = a, *y = b;

	return cmp__u64(x->pid, y->pid) ?: cmp__u64(x->api, y->api);
}

_Static_assert(offsetof(struct summary_proc, pid) == 0, "a pid_table row starts with its pid");

static int proc_cmp(const void *a, const void *b)
{
	const struct summary_proc *x = a, *y = b;

	return cmp__u64(x->pid, y->pid);
}

const struct summary_proc *summary__proc(const struct summary *s, uint32_t pid)
{
	return pid_table__find(&s->procs, pid);
}

static struct summary_proc *proc_get(struct summary *s, uint32_t pid)
{
	struct summary_proc *p = pid_table__find(&s->procs, pid);

	if (p)
		return p;
	if (s->procs.n >= s->max_procs) {
		s->procs_refused++;
		return NULL;
	}
	return pid_table__get(&s->procs, pid);
}

/* What counts as GPU memory held: not address space, not a second view. */
static bool holds_memory(enum umt_class c)
{
	return c != UMT_CLASS_VA && c != UMT_CLASS_VMM_MAP;
}

void summary__init(struct summary *s, uint64_t page_size)
{
	memset(s, 0, sizeof(*s));
	s->page_size = page_size;
	s->max_rows = SUMMARY_MAX_ROWS;
	s->max_procs = SUMMARY_MAX_PROCS;
	s->table.max = SUMMARY_MAX_ALLOCS;
	pid_table__init(&s->procs, sizeof(struct summary_proc));
	platform__init(&s->platform, PLATFORM_AUTO);
}

static struct summary_row *row_get(struct summary *s, uint32_t pid, uint32_t api)
{
	struct summary_row key = { .pid = pid, .api = api }, *n, **slot;

	slot = tfind(&key, &s->rows, row_cmp);
	if (slot)
		return *slot;
	if (s->n_rows >= s->max_rows) {
		s->rows_refused++;
		return NULL;
	}
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->pid = pid;
	n->api = api;
	slot = tsearch(n, &s->rows, row_cmp);
	if (!slot) {
		free(n);
		return NULL;
	}
	s->n_rows++;
	return n;
}

static void proc_held_add(struct summary *s, const struct alloc_entry *e, int sign)
{
	struct summary_proc *p = proc_get(s, e->key.pid);
	enum umt_class c = cuda_api__get(e->api)->class;

	if (!p)
		return;
	p->held_count += sign;
	p->held_size[c] += sign * e->size;
	p->held_observed[c] += sign * e->host_bytes;
	p->held_host += sign * e->host_bytes;
	if (holds_memory(c))
		p->held_gpu += sign * e->size;
}

static void unfreed_add(struct summary *s, const struct alloc_entry *e, int sign)
{
	struct summary_row *row = row_get(s, e->key.pid, e->api);

	proc_held_add(s, e, sign);
	if (!row)
		return;
	row->unfreed += sign;
	row->unfreed_size += sign * e->size;
	row->unfreed_host += sign * e->host_bytes;
}

/*
 * An address handed out again while its free was still in flight (the
 * two calls on two threads): remember the last few, so that the late
 * free is known for what it is even after the new owner freed it too.
 */
static void note_replaced(struct summary *s, const struct alloc_entry *e)
{
	struct summary_replaced *r = &s->replaced[s->n_replaced++ % SUMMARY_REPLACED];

	r->key = e->key;
	r->ret_ns = e->ret_ns;
}

static bool was_replaced(const struct summary *s, const struct alloc_key *k, uint64_t ts_ns)
{
	size_t i;

	for (i = 0; i < SUMMARY_REPLACED && i < s->n_replaced; i++)
		if (!memcmp(&s->replaced[i].key, k, sizeof(*k)) &&
		    ts_ns < s->replaced[i].ret_ns)
			return true;
	return false;
}

static void pool_call(struct summary *s, uint32_t api_id, bool is_free, uint64_t size,
		      const struct umt_call_rec *r)
{
	const struct cuda_api *api = cuda_api__get(api_id);

	if (api && !s->pages_unseen)
		driver_pool__call(&s->pool, api->class, is_free, size, r->pages_taken,
				  r->pages_freed, s->page_size);
}

/* A successful call changes the table of outstanding allocations. */
static int track(struct summary *s, const struct umt_call_rec *r,
		 const struct cuda_api *api, uint32_t site)
{
	struct alloc_entry e = {
		.key = { r->pid, api->space, r->handle },
		.api = r->api,
		.size = r->size,
		.host_bytes = r->pages_taken * s->page_size,
		.ts_ns = r->ts_ns,
		.ret_ns = r->ts_ns + r->duration_ns,
		.site = site,
	}, old;
	const struct alloc_entry *cur;
	int err;

	if (api->is_free) {
		/*
		 * Records arrive as calls return. A free that began before
		 * the allocation now holding its address returned was freeing
		 * the one before it, which that allocation already replaced:
		 * another thread got the address back from the driver first.
		 */
		cur = alloc_table__find(&s->table, &e.key);
		if (cur && r->ts_ns < cur->ret_ns) {
			s->frees_overtaken++;
			return 0;
		}
		if (!alloc_table__remove(&s->table, &e.key, &old)) {
			/* Or the one that replaced it was freed too, before it. */
			if (was_replaced(s, &e.key, r->ts_ns))
				s->frees_overtaken++;
			else
				s->unmatched_frees++;
			return 0;
		}
		unfreed_add(s, &old, -1);
		pool_call(s, old.api, true, old.size, r);
		if (s->on_release)
			s->on_release(&old, false, s->release_ctx);
		return 0;
	}
	pool_call(s, r->api, false, r->size, r);
	err = alloc_table__insert(&s->table, &e, &old);
	if (err == -ENOSPC)
		return 0;	/* counted in table.refused */
	if (err < 0)
		return err;
	if (err) {
		note_replaced(s, &e);
		unfreed_add(s, &old, -1);
		if (s->on_release)
			s->on_release(&old, false, s->release_ctx);
	}
	unfreed_add(s, &e, 1);
	return 0;
}

static void count_row(struct summary *s, struct summary_row *row,
		      const struct umt_call_rec *r, const struct cuda_api *api)
{
	/* Name the row after the process (its main thread), not a worker. */
	memcpy(row->comm, r->pcomm, sizeof(row->comm));
	row->comm[sizeof(row->comm) - 1] = '\0';
	row->calls++;
	row->host_taken += r->pages_taken * s->page_size;
	row->device_taken += r->device_pages * s->page_size;
	row->host_freed += r->pages_freed * s->page_size;
	if (r->end != UMT_END_RETURNED && r->end != UMT_END_LOST_RETURN)
		row->died++;
	else if (r->ret)
		row->failed++;
	else if (!api->is_free)
		row->size_bytes += r->size;
}

static void account_proc(struct summary *s, const struct umt_call_rec *r)
{
	struct summary_proc *p = proc_get(s, r->pid);

	if (!p)
		return;
	/* A new process that got a pid seen exit before. */
	p->exited = false;
	memcpy(p->comm, r->pcomm, sizeof(p->comm));
	p->comm[sizeof(p->comm) - 1] = '\0';
	p->calls++;
	p->host_taken += r->pages_taken * s->page_size;
}

int summary__consume(struct summary *s, const struct umt_call_rec *r)
{
	return summary__consume_site(s, r, 0);
}

int summary__consume_site(struct summary *s, const struct umt_call_rec *r,
			  uint32_t site)
{
	const struct cuda_api *api = cuda_api__get(r->api);
	struct summary_row *row;

	if (!api)
		return -EINVAL;
	s->records++;
	s->device_taken += r->device_pages * s->page_size;
	platform__observe(&s->platform, r, s->page_size);
	account_proc(s, r);
	/*
	 * Past the row cap (counted in rows_refused) the totals of the row
	 * are lost, but what the call allocated or freed is still tracked:
	 * who holds what must stay right.
	 */
	row = row_get(s, r->pid, r->api);
	if (row)
		count_row(s, row, r, api);
	if (r->end != UMT_END_RETURNED && r->end != UMT_END_LOST_RETURN)
		return 0;
	if (r->ret)
		return 0;
	return track(s, r, api, site);
}

static void release_at_exit(const struct alloc_entry *e, void *ctx)
{
	struct summary *s = ctx;
	struct summary_row *row;

	unfreed_add(s, e, -1);
	if (s->on_release)
		s->on_release(e, true, s->release_ctx);
	s->exit_freed++;
	s->exit_freed_host += e->host_bytes;
	row = row_get(s, e->key.pid, e->api);
	if (!row)
		return;
	row->exit_freed++;
	row->exit_freed_size += e->size;
	row->exit_freed_host += e->host_bytes;
}

_Static_assert(sizeof(struct summary_row) ==
	       offsetof(struct summary_row, calls) + 13 * sizeof(uint64_t),
	       "fold_row adds the counters from calls to the end");

/* Add a row of a process that is gone into the row of all such. */
static void fold_row(struct summary *s, const struct summary_row *r)
{
	struct summary_row *all = row_get(s, 0, r->api);
	uint64_t *dst, *end;
	const uint64_t *src;

	if (!all)
		return;
	snprintf(all->comm, sizeof(all->comm), "[exited]");
	/* Every counter of the row, from calls on, is a u64 to add. */
	dst = &all->calls;
	end = &all->exit_freed_host + 1;
	for (src = &r->calls; dst < end; dst++, src++)
		*dst += *src;
}

/*
 * A daemon does not keep the rows of the processes that come and go;
 * with fold, their counts go into the pid 0 "[exited]" rows.
 */
static void forget_proc(struct summary *s, uint32_t pid, bool fold)
{
	struct summary_row rkey = { .pid = pid }, **slot, *row;
	uint32_t api;

	for (api = 0; api < UMT_API__COUNT; api++) {
		rkey.api = api;
		slot = tfind(&rkey, &s->rows, row_cmp);
		if (!slot)
			continue;
		row = *slot;
		tdelete(&rkey, &s->rows, row_cmp);
		s->n_rows--;
		if (fold)
			fold_row(s, row);
		free(row);
	}
	pid_table__remove(&s->procs, pid);
}

void summary__proc_exit(struct summary *s, const struct umt_proc_exit_rec *r)
{
	struct summary_proc *p = proc_get(s, r->pid);

	if (p) {
		p->exited = true;
		memcpy(p->comm, r->comm, sizeof(p->comm));
		p->comm[sizeof(p->comm) - 1] = '\0';
	}
	s->exits++;
	alloc_table__remove_pid(&s->table, r->pid, release_at_exit, s);
	if (s->forget_exited) {
		forget_proc(s, r->pid, false);
		return;
	}
	/*
	 * Keep the last SUMMARY_EXITED_KEPT exited processes' rows apart;
	 * older ones are folded, so that a long trace over thousands of
	 * short jobs holds a bounded table.
	 */
	if (s->n_exited >= SUMMARY_EXITED_KEPT)
		forget_proc(s, s->exited_ring[s->n_exited % SUMMARY_EXITED_KEPT], true);
	s->exited_ring[s->n_exited++ % SUMMARY_EXITED_KEPT] = r->pid;
}

/*
 * An in-order walk of a tsearch(3) tree visits internal nodes at
 * "postorder" and leaves at "leaf", in key order: the copy comes sorted.
 */
struct tree_copy {
	char *out;
	size_t size, n;
};

static void copy_node(const void *node, VISIT which, void *arg)
{
	struct tree_copy *c = arg;

	if (which != postorder && which != leaf)
		return;
	memcpy(c->out + c->n * c->size, *(void *const *)node, c->size);
	c->n++;
}

static void *tree_to_array(const void *root, size_t count, size_t size, size_t *n)
{
	struct tree_copy c = { calloc(count + 1, size), size, 0 };

	*n = 0;
	if (!c.out)
		return NULL;
	twalk_r(root, copy_node, &c);
	*n = c.n;
	return c.out;
}

struct summary_row *summary__rows(const struct summary *s, size_t *n)
{
	return tree_to_array(s->rows, s->n_rows, sizeof(struct summary_row), n);
}

uint64_t summary__proc_holds(const struct summary *s, const struct summary_proc *p)
{
	uint64_t holds = 0;
	int c;

	for (c = 0; c < UMT_CLASS__COUNT; c++)
		holds += platform__holds(&s->platform, (enum umt_class)c,
					 p->held_size[c], p->held_observed[c]);
	return holds;
}

struct summary_proc *summary__procs(const struct summary *s, size_t *n)
{
	struct summary_proc *v = pid_table__sorted_copy(&s->procs, proc_cmp);

	*n = v ? s->procs.n : 0;
	return v;
}

static void free_row(void *p)
{
	free(p);
}

void summary__free(struct summary *s)
{
	tdestroy(s->rows, free_row);
	pid_table__free(&s->procs);
	alloc_table__free(&s->table);
	memset(s, 0, sizeof(*s));
}

uint64_t summary__pool_holds(const struct summary *s, bool *device)
{
	bool dev = platform__current(&s->platform) != PLATFORM_DISCRETE;

	if (device)
		*device = dev;
	return driver_pool__holds(&s->pool, dev);
}
