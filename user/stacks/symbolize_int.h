/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The symbolizer's insides, shared by its files and no one else:
 *
 *   symbolize.c          the API: a stack's addresses to frames
 *   symbolize_proc.c     per process: its libdwfl session, modules, maps
 *   symbolize_cache.c    per mapped file (by build-id): answers, LRU-bounded
 *   symbolize_perfmap.c  /tmp/perf-PID.map, for JIT code
 */
#ifndef UMTRACE_SYMBOLIZE_INT_H
#define UMTRACE_SYMBOLIZE_INT_H

#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include "lib/hashtab.h"
#include "lib/pid_table.h"
#include "lib/procfs.h"
#include "lib/strtab.h"
#include "stacks/symbolize.h"

#define REFRESH_NS	(100 * 1000 * 1000ULL)	/* maps, perf map: 10/s at most */
#define BUILD_ID_MAX	64
#define NO_FILE		STRTAB_NONE
#define SYM_NIL		UINT32_MAX	/* the end of the cache's LRU list */

struct file_ident {
	uint64_t dev, ino;
	int64_t mtime_s, mtime_ns;
};

/* (file, address in the file's own link-time space) -> answer. */
struct cache_ent {
	uint64_t rel;
	uint32_t file;		/* an id of symbolizer.files */
	uint32_t prev, next;	/* LRU list, most recent first */
	const char *func;
	uint64_t offset;
};

struct sym_cache {
	struct cache_ent *ents;
	struct hashtab index;	/* (file, rel) -> ents[] */
	uint32_t cap, used;
	uint32_t head, tail;
};

struct map_range {
	uint64_t lo, hi;
};

/*
 * Of n entries sorted by lo, stride bytes apart, each starting with its
 * struct map_range: the last that starts at or below addr, if it covers
 * addr; else NULL.
 */
static inline const void *map_range__find(const void *v, size_t n, size_t stride, uint64_t addr)
{
	const struct map_range *r;
	size_t lo = 0, hi = n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		r = (const void *)((const char *)v + mid * stride);
		if (r->lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	r = (const void *)((const char *)v + (lo - 1) * stride);
	return addr < r->hi ? r : NULL;
}

struct perf_ent {
	struct map_range range;	/* first, for map_range__find */
	uint32_t seq;		/* line order: a later line wins a tie */
	char *name;
};

/* /tmp/perf-PID.map as read so far; the process only appends to it. */
struct perf_map {
	struct perf_ent *ents;
	size_t n, cap;
	size_t name_bytes;	/* held by the names, at most PERF_MAP_MAX_BYTES */
	off_t read_off;
	uint64_t dev, ino;
	uint64_t checked_ns;
	bool checked;
};

struct sym_proc;

/* Ours, behind each Dwfl_Module's userdata slot. */
struct sym_mod {
	struct sym_mod *next;		/* every one of the process's */
	struct sym_proc *proc;
	const char *base;		/* interned basename */
	uint32_t file;			/* NO_FILE: no ELF or no identity */
	Dwarf_Addr bias;		/* valid when have_bias */
	struct file_ident ident;	/* of the file find_elf opened */
	bool have_ident;
	bool have_bias;			/* its ELF was opened */
	bool elf_tried;
};

struct sym_proc {
	uint32_t pid;
	uint32_t nspid;		/* its pid in its own namespace; 0: not read */
	Dwfl *dwfl;
	struct sym_mod *mods;
	uint64_t reported_ns;
	uint64_t prepared_ns;		/* reported_ns when every module had its sym_mod */
	/*
	 * Its root directory and mount table, taken while it lived: its
	 * files are still opened the same way once it has exited, before
	 * its last stacks are symbolized. root -1: not ours to enter;
	 * mountinfo "": nothing is on FUSE, NULL: not read yet.
	 */
	int root;
	char *mountinfo;
	struct perf_map pm;
	/*
	 * Where files are mapped, from the same read of the maps. libdwfl
	 * can give a module more than its file's mappings (the gap after a
	 * library's .bss), where an anonymous JIT region or a library
	 * dlopen'ed later may land: an address outside these is not the
	 * module's.
	 */
	struct map_range *files;
	size_t n_files;
};

struct symbolizer {
	/*
	 * Of { pid, struct sym_proc * }: a few dozen processes at most, each
	 * looked up once a stack; libdwfl keeps a sym_proc, so it stays put.
	 */
	struct pid_table procs;
	/*
	 * Mapped files however many processes map them, known by their
	 * build-id or, without one, by dev, inode and mtime: the id is the
	 * cache's key. Kept until symbolizer__free.
	 */
	struct strtab files;
	struct sym_cache cache;
	struct strtab names;		/* every name handed out */
	const char *perf_module;
	struct sym_stats st;
};

/* symbolize_proc.c */
/* pid's state, made (its maps read) when first asked. 0 or -errno. */
int sym_proc__get(struct symbolizer *s, uint32_t pid, struct sym_proc **out);
/* Read its maps again. 0 or -errno (what was known is kept). */
int sym_proc__report(struct symbolizer *s, struct sym_proc *p);
/*
 * path from its maps, opened under the root held from its first look
 * (proc__open_seen: the process arranges its own files, and may serve
 * them itself); fd or -errno.
 */
static inline int sym_proc__open(const struct sym_proc *p, const char *path, struct stat *st)
{
	return proc__open_seen((pid_t)p->pid, p->root, p->mountinfo, path, st);
}
/* dwfl's module for addr, if addr is in one of the process's files. */
Dwfl_Module *sym_proc__module(struct sym_proc *p, uint64_t addr);
/* A sym_mod for each of its modules (an unwinder meets them unasked). */
void sym_proc__prepare_mods(struct symbolizer *s, struct sym_proc *p);
void sym_proc__forget(struct symbolizer *s, uint32_t pid);
void sym_procs__init(struct symbolizer *s);
void sym_procs__free(struct symbolizer *s);
/* The module's sym_mod, made on first sight. NULL when out of memory. */
struct sym_mod *sym_mod__get(struct symbolizer *s, struct sym_proc *p, Dwfl_Module *mod);
/* Open the module's ELF (via find_elf) and name its file for the cache. */
void sym_mod__open(struct symbolizer *s, Dwfl_Module *mod, struct sym_mod *m);

/* symbolize_cache.c */
int sym_cache__init(struct sym_cache *c, size_t cap);
/* Keep an answer, the least recently used making room. */
void sym_cache__insert(struct symbolizer *s, uint32_t file, uint64_t rel, const char *func,
		       uint64_t offset);
void sym_cache__free(struct sym_cache *c);
/* The id of the file known by key (see struct symbolizer), or NO_FILE. */
uint32_t sym_files__get(struct symbolizer *s, const void *key, size_t len);

/* The cache's hot path, inline: it is what nearly every frame of every call costs. */

static inline void sym_cache__unlink(struct sym_cache *c, uint32_t i)
{
	struct cache_ent *e = &c->ents[i];

	if (e->prev != SYM_NIL)
		c->ents[e->prev].next = e->next;
	else
		c->head = e->next;
	if (e->next != SYM_NIL)
		c->ents[e->next].prev = e->prev;
	else
		c->tail = e->prev;
}

/* Make ents[i] the most recently used. */
static inline void sym_cache__push(struct sym_cache *c, uint32_t i)
{
	struct cache_ent *e = &c->ents[i];

	e->prev = SYM_NIL;
	e->next = c->head;
	if (c->head != SYM_NIL)
		c->ents[c->head].prev = i;
	else
		c->tail = i;
	c->head = i;
}

static inline uint64_t sym_cache__hash(uint32_t file, uint64_t rel)
{
	uint64_t x = rel ^ ((uint64_t)file * 0x9e3779b97f4a7c15ULL);

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	return x ^ (x >> 33);
}

/* The answer for (file, rel), now the most recently used; or NULL. */
static inline const struct cache_ent *sym_cache__find(struct sym_cache *c, uint32_t file,
						      uint64_t rel)
{
	struct hashtab_iter it;
	uint32_t i;

	for (i = hashtab__first(&c->index, sym_cache__hash(file, rel), &it);
	     i != HASHTAB_NONE; i = hashtab__next(&c->index, &it)) {
		if (c->ents[i].file != file || c->ents[i].rel != rel)
			continue;
		if (c->head != i) {
			sym_cache__unlink(c, i);
			sym_cache__push(c, i);
		}
		return &c->ents[i];
	}
	return NULL;
}

/* symbolize_perfmap.c */
/*
 * Name f from p's perf map, as read so far or (refresh) after reading
 * what was appended since. Whether it is in the map.
 */
bool perf_map__resolve(struct symbolizer *s, struct sym_proc *p, struct sym_frame *f,
		       bool refresh);
void perf_map__clear(struct perf_map *pm);

#endif /* UMTRACE_SYMBOLIZE_INT_H */
