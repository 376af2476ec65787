// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Addresses to names with elfutils' libdwfl: one Dwfl per live process
 * (symbolize_proc.c), one cache of answers per mapped file
 * (symbolize_cache.c), perf maps for JIT code (symbolize_perfmap.c), and
 * every name interned once (lib/strtab.h).
 */
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "lib/sys.h"
#include "stacks/symbolize_int.h"

/* libstdc++'s demangler (-lstdc++), declared here to keep this file C. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len,
			    int *status);

/* Above any user address on x86 (5-level paging) and arm64 (52-bit VA). */
#define USER_ADDR_END	(1ULL << 56)

/* C++ (and legacy Rust) names demangled; anything else as it is. */
static const char *intern_func(struct strtab *t, const char *name)
{
	const char *r;
	char *d;
	int status;

	if (strncmp(name, "_Z", 2))
		return strtab__intern_str(t, name);
	d = __cxa_demangle(name, NULL, NULL, &status);
	if (!d || status)
		r = strtab__intern_str(t, name);
	else
		r = strtab__intern_str(t, d);
	free(d);
	return r;
}

static void lookup_symbol(struct symbolizer *s, Dwfl_Module *mod,
			  struct sym_frame *f)
{
	const char *name;
	GElf_Off off;
	GElf_Sym sym;

	name = dwfl_module_addrinfo(mod, f->addr, &off, &sym, NULL, NULL, NULL);
	if (!name || !*name)
		return;
	/* A broken frame chain can point into data: no variable names. */
	switch (GELF_ST_TYPE(sym.st_info)) {
	case STT_FUNC:
	case STT_GNU_IFUNC:
	case STT_NOTYPE:	/* hand-written assembly */
		break;
	default:
		return;
	}
	f->func = intern_func(&s->names, name);
	if (f->func)
		f->offset = off;
}

/*
 * Where the module's file puts addr: the address less the load bias, as
 * addr2line -e FILE takes it. A module whose ELF could not be opened has
 * no bias: the offset from its lowest mapped address stands in.
 */
static uint64_t mod_offset(Dwfl_Module *mod, const struct sym_mod *m, uint64_t addr)
{
	Dwarf_Addr start = 0;

	if (m->have_bias)
		return addr - m->bias;
	dwfl_module_info(mod, NULL, &start, NULL, NULL, NULL, NULL, NULL);
	return addr >= start ? addr - start : addr;
}

static void resolve_in_module(struct symbolizer *s, struct sym_proc *p,
			      Dwfl_Module *mod, struct sym_frame *f)
{
	struct sym_mod *m = sym_mod__get(s, p, mod);
	const struct cache_ent *e;
	uint64_t rel;

	if (!m)
		return;
	f->module = m->base;
	if (!m->elf_tried)
		sym_mod__open(s, mod, m);
	rel = mod_offset(mod, m, f->addr);
	f->offset = rel;	/* until a function is found */
	if (m->file == NO_FILE)
		return;
	e = sym_cache__find(&s->cache, m->file, rel);
	if (e) {
		s->st.hits++;
		f->func = e->func;
		f->offset = e->offset;
		return;
	}
	s->st.misses++;
	lookup_symbol(s, mod, f);
	sym_cache__insert(s, m->file, rel, f->func, f->offset);
}

static void resolve_one(struct symbolizer *s, struct sym_proc *p,
			struct sym_frame *f)
{
	Dwfl_Module *mod;

	if (f->addr < 4096 || f->addr >= USER_ADDR_END)
		return;
	mod = sym_proc__module(p, f->addr);
	if (mod)
		goto found;
	/* JIT code first: it would otherwise re-read maps for every frame. */
	if (perf_map__resolve(s, p, f, false))
		return;
	/* Maybe mapped since we looked (dlopen). */
	if (clock__mono_ns() - p->reported_ns >= REFRESH_NS && !sym_proc__report(s, p)) {
		mod = sym_proc__module(p, f->addr);
		if (mod)
			goto found;
	}
	perf_map__resolve(s, p, f, true);
	return;
found:
	resolve_in_module(s, p, mod, f);
}

int symbolizer__resolve(struct symbolizer *s, uint32_t pid,
			const uint64_t *addrs, size_t n, struct sym_frame *out)
{
	struct sym_proc *p;
	size_t i;
	int err;

	for (i = 0; i < n; i++)
		out[i] = (struct sym_frame){ .addr = addrs[i] };
	err = sym_proc__get(s, pid, &p);
	if (err)
		return err;
	for (i = 0; i < n; i++)
		resolve_one(s, p, &out[i]);
	return 0;
}

Dwfl *symbolizer__dwfl(struct symbolizer *s, uint32_t pid, uint64_t addr)
{
	struct sym_proc *p;
	int err;

	err = sym_proc__get(s, pid, &p);
	if (err) {
		errno = -err;
		return NULL;
	}
	if (!sym_proc__module(p, addr) &&
	    clock__mono_ns() - p->reported_ns >= REFRESH_NS)
		sym_proc__report(s, p);
	sym_proc__prepare_mods(s, p);
	return p->dwfl;
}

void symbolizer__forget(struct symbolizer *s, uint32_t pid)
{
	sym_proc__forget(s, pid);
}

void symbolizer__stats(const struct symbolizer *s, struct sym_stats *st)
{
	*st = s->st;
}

struct symbolizer *symbolizer__new_cap(size_t cache_cap)
{
	struct symbolizer *s = calloc(1, sizeof(*s));
	int err;

	if (!s)
		return NULL;
	sym_procs__init(s);
	err = sym_cache__init(&s->cache, cache_cap);
	if (err)
		goto err_free;
	s->perf_module = strtab__intern_str(&s->names, "[perf-map]");
	if (!s->perf_module) {
		err = -ENOMEM;
		goto err_free;
	}
	return s;

err_free:
	symbolizer__free(s);
	errno = -err;
	return NULL;
}

struct symbolizer *symbolizer__new(void)
{
	return symbolizer__new_cap(SYM_CACHE_CAP_DEFAULT);
}

void symbolizer__free(struct symbolizer *s)
{
	if (!s)
		return;
	sym_procs__free(s);
	sym_cache__free(&s->cache);
	strtab__free(&s->files);
	strtab__free(&s->names);
	free(s);
}
