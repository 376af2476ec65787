/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Outstanding GPU allocations, keyed by (pid, handle space, handle). It
 * knows nothing of BPF: records from the ring buffer or from a file feed
 * it alike.
 */
#ifndef UMTRACE_ALLOC_TABLE_H
#define UMTRACE_ALLOC_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct alloc_key {
	uint32_t pid;
	uint32_t space;		/* enum umt_space */
	uint64_t handle;
};

struct alloc_entry {
	struct alloc_key key;
	uint32_t api;
	uint64_t size;		/* bytes requested */
	uint64_t host_bytes;	/* host bytes taken inside the call */
	uint64_t ts_ns;		/* the allocation's call entry */
	uint64_t ret_ns;	/* and return */
	uint32_t site;		/* call site id, 0 if none (user/model/callsites.h) */
};

struct alloc_table {
	void *root;		/* tsearch(3) tree of struct alloc_entry */
	size_t max;		/* 0: unbounded */
	uint64_t refused;	/* inserts refused because the table was full */
	size_t count;
	uint64_t size_bytes;
	uint64_t host_bytes;
};

/*
 * Insert e. A handle already present means its free was never seen (a
 * dropped record): the old entry is replaced and returned in *replaced.
 * Returns 1 if replaced, 0 if new, -ENOSPC when the table is at its
 * cap (counted in refused), -ENOMEM.
 */
int alloc_table__insert(struct alloc_table *t, const struct alloc_entry *e,
			struct alloc_entry *replaced);
/* The entry of k, or NULL; valid until the table changes. */
const struct alloc_entry *alloc_table__find(const struct alloc_table *t,
					    const struct alloc_key *k);
bool alloc_table__remove(struct alloc_table *t, const struct alloc_key *k,
			 struct alloc_entry *out);
/* Remove every entry of pid, handing each to fn first; returns how many. */
size_t alloc_table__remove_pid(struct alloc_table *t, uint32_t pid,
			       void (*fn)(const struct alloc_entry *e, void *ctx),
			       void *ctx);
void alloc_table__for_each(const struct alloc_table *t,
			   void (*fn)(const struct alloc_entry *e, void *ctx),
			   void *ctx);
void alloc_table__free(struct alloc_table *t);

#endif /* UMTRACE_ALLOC_TABLE_H */
