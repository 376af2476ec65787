// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>
#include "lib/sys.h"
#include "model/alloc_table.h"

static int key_cmp(const void *a, const void *b)
{
	const struct alloc_key *x = a, *y = b;

	return cmp__u64(x->pid, y->pid) ?: cmp__u64(x->space, y->space) ?:
	       cmp__u64(x->handle, y->handle);
}

static void account(struct alloc_table *t, const struct alloc_entry *e, int sign)
{
	t->count += sign;
	t->size_bytes += sign * e->size;
	t->host_bytes += sign * e->host_bytes;
}

int alloc_table__insert(struct alloc_table *t, const struct alloc_entry *e,
			struct alloc_entry *replaced)
{
	struct alloc_entry *n, **slot;

	if (t->max && t->count >= t->max && !tfind(&e->key, &t->root, key_cmp)) {
		t->refused++;
		return -ENOSPC;
	}
	n = malloc(sizeof(*n));
	if (!n)
		return -ENOMEM;
	*n = *e;
	slot = tsearch(n, &t->root, key_cmp);
	if (!slot) {
		free(n);
		return -ENOMEM;
	}
	if (*slot != n) {
		*replaced = **slot;
		account(t, *slot, -1);
		**slot = *e;
		free(n);
		account(t, e, 1);
		return 1;
	}
	account(t, e, 1);
	return 0;
}

const struct alloc_entry *alloc_table__find(const struct alloc_table *t,
					    const struct alloc_key *k)
{
	struct alloc_entry *const *slot = tfind(k, &t->root, key_cmp);

	return slot ? *slot : NULL;
}

bool alloc_table__remove(struct alloc_table *t, const struct alloc_key *k,
			 struct alloc_entry *out)
{
	struct alloc_entry **slot, *e;

	slot = tfind(k, &t->root, key_cmp);
	if (!slot)
		return false;
	e = *slot;
	tdelete(k, &t->root, key_cmp);
	account(t, e, -1);
	if (out)
		*out = *e;
	free(e);
	return true;
}

struct walk_ctx {
	void (*fn)(const struct alloc_entry *e, void *ctx);
	void *ctx;
};

static void walk(const void *node, VISIT which, void *arg)
{
	const struct walk_ctx *w = arg;

	if (which == postorder || which == leaf)
		w->fn(*(const struct alloc_entry *const *)node, w->ctx);
}

void alloc_table__for_each(const struct alloc_table *t,
			   void (*fn)(const struct alloc_entry *e, void *ctx),
			   void *ctx)
{
	struct walk_ctx w = { fn, ctx };

	twalk_r(t->root, walk, &w);
}

struct pid_keys {
	uint32_t pid;
	struct alloc_key *keys;
	size_t n, cap;
	bool oom;
};

static void collect_pid(const struct alloc_entry *e, void *ctx)
{
	struct pid_keys *pk = ctx;

	if (e->key.pid != pk->pid || pk->oom)
		return;
	if (pk->n == pk->cap) {
		size_t cap = pk->cap ? pk->cap * 2 : 64;
		struct alloc_key *v = realloc(pk->keys, cap * sizeof(*v));

		if (!v) {
			pk->oom = true;
			return;
		}
		pk->keys = v;
		pk->cap = cap;
	}
	pk->keys[pk->n++] = e->key;
}

/* tdelete() may rebalance the tree: collect the keys first, then delete. */
size_t alloc_table__remove_pid(struct alloc_table *t, uint32_t pid,
			       void (*fn)(const struct alloc_entry *e, void *ctx),
			       void *ctx)
{
	struct pid_keys pk = { .pid = pid };
	struct alloc_entry e;
	size_t i, n = 0;

	alloc_table__for_each(t, collect_pid, &pk);
	for (i = 0; i < pk.n; i++) {
		if (!alloc_table__remove(t, &pk.keys[i], &e))
			continue;
		if (fn)
			fn(&e, ctx);
		n++;
	}
	free(pk.keys);
	return n;
}

void alloc_table__free(struct alloc_table *t)
{
	tdestroy(t->root, free);
	memset(t, 0, sizeof(*t));
}
