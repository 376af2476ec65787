// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "export/flame_build.h"

int flame__add_site(struct stackset *set, uint32_t pid, const char *comm,
		    const struct callsite *c, const uint64_t values[STACK_VAL__COUNT])
{
	const char *frames[UMT_STACK_MAX + 1];
	char *key, *tok, *save = NULL;
	size_t n = 0, i;
	int err;

	key = strdup(c->key);
	if (!key)
		return -ENOMEM;
	for (tok = strtok_r(key, ";", &save); tok && n < UMT_STACK_MAX + 1;
	     tok = strtok_r(NULL, ";", &save))
		frames[n++] = tok;
	/* The key is innermost first; a stack is outermost first. */
	for (i = 0; i < n / 2; i++) {
		const char *t = frames[i];

		frames[i] = frames[n - 1 - i];
		frames[n - 1 - i] = t;
	}
	err = n ? stackset__add(set, pid, comm, frames, n, values) : -EINVAL;
	free(key);
	return err;
}

struct held_ctx {
	struct stackset *set;
	const struct summary *s;
	const struct callsites *cs;
	uint32_t pid;
	uint64_t failed;
};

static void add_held(const struct alloc_entry *e, void *ctx)
{
	struct held_ctx *h = ctx;
	const struct summary_proc *p;
	const struct callsite *c;
	uint64_t v[STACK_VAL__COUNT];

	if (h->pid && e->key.pid != h->pid)
		return;
	c = e->site ? callsites__get(h->cs, e->site) : NULL;
	if (!c) {
		h->failed++;
		return;
	}
	p = summary__proc(h->s, e->key.pid);
	v[STACK_VAL__CALLS] = 1;
	v[STACK_VAL__HOST_BYTES] = e->host_bytes;
	v[STACK_VAL__GPU_BYTES] = e->size;
	if (flame__add_site(h->set, e->key.pid, p ? p->comm : c->comm, c, v))
		h->failed++;
}

uint64_t flame__add_held(struct stackset *set, const struct summary *s,
			 const struct callsites *cs, uint32_t pid)
{
	struct held_ctx h = { .set = set, .s = s, .cs = cs, .pid = pid };

	alloc_table__for_each(&s->table, add_held, &h);
	return h.failed;
}
