// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Addresses to names with elfutils' libdwfl: one Dwfl per live process,
 * built from /proc/PID/maps, and one cache of answers per mapped file.
 *
 * What libdwfl 0.188 does not do for us, and why it is done here:
 * - Its dwfl_linux_proc_find_elf opens the path from /proc/PID/maps as it
 *   is, in our mount namespace: wrong for a process in a container. Our
 *   find_elf opens it under /proc/PID/root.
 * - Its standard find_debuginfo ends in a debuginfod network fetch when
 *   DEBUGINFOD_URLS is set; we look in /usr/lib/debug by build-id only.
 * - Paths inside a container are the container's to change: one swapped
 *   for a FIFO would block an open, one for a device (/dev/nvidia-uvm is
 *   mapped too) would run its driver. We open regular files only, checked
 *   before and after the open, and look for debug files on the host only.
 */
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "lib/procfs.h"
#include "stacks/symbolize.h"

/* libstdc++'s demangler (-lstdc++), declared here to keep this file C. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len,
			    int *status);

#define PROC_BUCKETS	256
#define REFRESH_NS	(100 * 1000 * 1000ULL)	/* maps, perf map: 10/s at most */
#define BUILD_ID_MAX	64
#define NIL		UINT32_MAX
/* Above any user address on x86 (5-level paging) and arm64 (52-bit VA). */
#define USER_ADDR_END	(1ULL << 56)
/* A perf map is written by the traced process: bound what it can cost us. */
#define PERF_MAP_MAX_ENTS	(1U << 20)
#define PERF_MAP_MAX_LINE	4096

/* A string handed to callers: lives until symbolizer__free. */
struct istr {
	struct istr *next;
	uint64_t hash;
	char s[];
};

struct intern {
	struct istr **b;
	size_t nb, count;
};

/*
 * A mapped file however many processes map it, known by its build-id or,
 * without one, by dev, inode and mtime. Kept until symbolizer__free:
 * modules of live Dwfls point at it.
 */
struct sym_file {
	struct sym_file *next;
	uint32_t id;
	uint32_t key_len;
	unsigned char key[1 + BUILD_ID_MAX];
};

struct file_ident {
	uint64_t dev, ino;
	int64_t mtime_s, mtime_ns;
};

/* (file, address in the file's own link-time space) -> answer. */
struct cache_ent {
	uint64_t rel;
	const struct sym_file *file;
	const char *func;
	uint64_t offset;
	uint32_t hnext;		/* bucket chain */
	uint32_t prev, next;	/* LRU list, most recent first */
};

struct sym_cache {
	struct cache_ent *ents;
	uint32_t *b;
	uint32_t mask;
	uint32_t cap, used;
	uint32_t head, tail;
};

struct perf_ent {
	uint64_t start, end;
	uint32_t seq;		/* line order: a later line wins a tie */
	char *name;
};

struct map_range {
	uint64_t lo, hi;
};

/* /tmp/perf-PID.map as read so far; the process only appends to it. */
struct perf_map {
	struct perf_ent *ents;
	size_t n, cap;
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
	const struct sym_file *file;	/* NULL: no ELF or no identity */
	Dwarf_Addr bias;		/* valid when have_bias */
	struct file_ident ident;	/* of the file find_elf opened */
	bool have_ident;
	bool have_bias;			/* its ELF was opened */
	bool elf_tried;
};

struct sym_proc {
	struct sym_proc *next;
	uint32_t pid;
	uint32_t nspid;		/* its pid in its own namespace; 0: not read */
	Dwfl *dwfl;
	struct sym_mod *mods;
	uint64_t reported_ns;
	uint64_t prepared_ns;		/* reported_ns when every module had its sym_mod */
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
	struct sym_proc *procs[PROC_BUCKETS];
	struct sym_file *files;
	uint32_t nfiles;
	struct sym_cache cache;
	struct intern names;
	const char *perf_module;
	struct sym_stats st;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* ---- interned strings ---- */

static uint64_t hash_str(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;	/* FNV-1a */

	while (*s)
		h = (h ^ (unsigned char)*s++) * 0x100000001b3ULL;
	return h;
}

static int intern_grow(struct intern *t)
{
	size_t nb = t->nb ? t->nb * 2 : 1024, i;
	struct istr **b = calloc(nb, sizeof(*b));

	if (!b)
		return -ENOMEM;
	for (i = 0; i < t->nb; i++) {
		struct istr *e = t->b[i], *next;

		for (; e; e = next) {
			next = e->next;
			e->next = b[e->hash & (nb - 1)];
			b[e->hash & (nb - 1)] = e;
		}
	}
	free(t->b);
	t->b = b;
	t->nb = nb;
	return 0;
}

/* Returns NULL only when out of memory. */
static const char *intern(struct intern *t, const char *s)
{
	uint64_t h = hash_str(s);
	struct istr *e;
	size_t len;

	if (t->nb) {
		for (e = t->b[h & (t->nb - 1)]; e; e = e->next)
			if (e->hash == h && !strcmp(e->s, s))
				return e->s;
	}
	if (t->count >= t->nb && intern_grow(t))
		return NULL;
	len = strlen(s) + 1;
	e = malloc(sizeof(*e) + len);
	if (!e)
		return NULL;
	e->hash = h;
	memcpy(e->s, s, len);
	e->next = t->b[h & (t->nb - 1)];
	t->b[h & (t->nb - 1)] = e;
	t->count++;
	return e->s;
}

static void intern_free(struct intern *t)
{
	size_t i;

	for (i = 0; i < t->nb; i++) {
		struct istr *e = t->b[i], *next;

		for (; e; e = next) {
			next = e->next;
			free(e);
		}
	}
	free(t->b);
}

/* C++ (and legacy Rust) names demangled; anything else as it is. */
static const char *intern_func(struct intern *t, const char *name)
{
	const char *r;
	char *d;
	int status;

	if (strncmp(name, "_Z", 2))
		return intern(t, name);
	d = __cxa_demangle(name, NULL, NULL, &status);
	if (!d || status)
		r = intern(t, name);
	else
		r = intern(t, d);
	free(d);
	return r;
}

/* ---- the per-file cache: bounded, least recently used goes first ---- */

static uint32_t cache_hash(const struct sym_cache *c, uint32_t id, uint64_t rel)
{
	uint64_t x = rel ^ ((uint64_t)id * 0x9e3779b97f4a7c15ULL);

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return (uint32_t)x & c->mask;
}

static int cache_init(struct sym_cache *c, size_t cap)
{
	size_t nb = 1, i;

	if (!cap || cap > (1U << 30))
		return -EINVAL;
	while (nb < cap)
		nb <<= 1;
	c->ents = calloc(cap, sizeof(*c->ents));
	c->b = malloc(nb * sizeof(*c->b));
	if (!c->ents || !c->b)
		return -ENOMEM;
	for (i = 0; i < nb; i++)
		c->b[i] = NIL;
	c->mask = nb - 1;
	c->cap = cap;
	c->head = c->tail = NIL;
	return 0;
}

static void lru_unlink(struct sym_cache *c, uint32_t i)
{
	struct cache_ent *e = &c->ents[i];

	if (e->prev != NIL)
		c->ents[e->prev].next = e->next;
	else
		c->head = e->next;
	if (e->next != NIL)
		c->ents[e->next].prev = e->prev;
	else
		c->tail = e->prev;
}

static void lru_push(struct sym_cache *c, uint32_t i)
{
	struct cache_ent *e = &c->ents[i];

	e->prev = NIL;
	e->next = c->head;
	if (c->head != NIL)
		c->ents[c->head].prev = i;
	else
		c->tail = i;
	c->head = i;
}

static struct cache_ent *cache_find(struct sym_cache *c,
				    const struct sym_file *f, uint64_t rel)
{
	uint32_t i = c->b[cache_hash(c, f->id, rel)];

	for (; i != NIL; i = c->ents[i].hnext) {
		if (c->ents[i].file != f || c->ents[i].rel != rel)
			continue;
		if (c->head != i) {
			lru_unlink(c, i);
			lru_push(c, i);
		}
		return &c->ents[i];
	}
	return NULL;
}

/* Take the least recently used entry out of its bucket and the list. */
static uint32_t cache_evict(struct sym_cache *c)
{
	uint32_t i = c->tail, *p;
	struct cache_ent *e = &c->ents[i];

	p = &c->b[cache_hash(c, e->file->id, e->rel)];
	while (*p != i)
		p = &c->ents[*p].hnext;
	*p = e->hnext;
	lru_unlink(c, i);
	return i;
}

static void cache_insert(struct symbolizer *s, const struct sym_file *f,
			 uint64_t rel, const char *func, uint64_t offset)
{
	struct sym_cache *c = &s->cache;
	struct cache_ent *e;
	uint32_t i, h;

	if (c->used < c->cap) {
		i = c->used++;
	} else {
		i = cache_evict(c);
		s->st.evictions++;
	}
	e = &c->ents[i];
	e->file = f;
	e->rel = rel;
	e->func = func;
	e->offset = offset;
	h = cache_hash(c, f->id, rel);
	e->hnext = c->b[h];
	c->b[h] = i;
	lru_push(c, i);
}

/* ---- files ---- */

static const struct sym_file *file_get(struct symbolizer *s,
				       const unsigned char *key, size_t len)
{
	struct sym_file *f;

	for (f = s->files; f; f = f->next)
		if (f->key_len == len && !memcmp(f->key, key, len))
			return f;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->id = s->nfiles++;
	f->key_len = len;
	memcpy(f->key, key, len);
	f->next = s->files;
	s->files = f;
	return f;
}

/*
 * Open path only if it is a regular file, without following it into a
 * device or a FIFO: the stat comes first, the fstat proves the file did
 * not change in between.
 */
static int open_regular(const char *path, struct stat *st)
{
	struct stat a, b;
	int fd;

	if (stat(path, &a))
		return -errno;
	if (!S_ISREG(a.st_mode))
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &b) || b.st_dev != a.st_dev || b.st_ino != a.st_ino) {
		close(fd);
		return -EAGAIN;
	}
	if (st)
		*st = b;
	return fd;
}

/*
 * A path from /proc/PID/maps belongs to the process's mount namespace:
 * open it under /proc/PID/root. Fall back to the path as it is only when
 * that directory may not be entered (we are not root), which is right
 * for a process that shares our root and harmless otherwise.
 */
static int open_in_root(uint32_t pid, const char *path, char **opened,
			struct stat *st)
{
	char buf[PATH_MAX];
	const char *used = buf;
	int fd;

	if (snprintf(buf, sizeof(buf), "/proc/%u/root%s", pid, path) >=
	    (int)sizeof(buf))
		return -ENAMETOOLONG;
	fd = open_regular(buf, st);
	if (fd == -EACCES || fd == -EPERM) {
		used = path;
		fd = open_regular(path, st);
	}
	if (fd < 0 || !opened)
		return fd;
	*opened = strdup(used);
	if (!*opened) {
		close(fd);
		return -ENOMEM;
	}
	return fd;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

static int find_elf(Dwfl_Module *mod, void **userdata, const char *name,
		    Dwarf_Addr base, char **file_name, Elf **elfp)
{
	struct sym_mod *m = *userdata;
	struct stat st;
	int fd;

	/*
	 * "[vdso: PID]": libdwfl reads the image from /proc/PID/mem. It
	 * would ptrace-attach only for a Dwfl attached to the process, which
	 * ours never are.
	 */
	if (name[0] != '/')
		return dwfl_linux_proc_find_elf(mod, userdata, name, base,
						file_name, elfp);
	/* Gone from the file system: nothing to open by name. */
	if (!m || ends_with(name, " (deleted)"))
		return -1;
	fd = open_in_root(m->proc->pid, name, file_name, &st);
	if (fd < 0)
		return -1;
	m->ident = (struct file_ident){
		.dev = st.st_dev,
		.ino = st.st_ino,
		.mtime_s = st.st_mtim.tv_sec,
		.mtime_ns = st.st_mtim.tv_nsec,
	};
	m->have_ident = true;
	return fd;
}

/* ---- processes ---- */

/*
 * The file-backed lines of maps and the vdso, adjacent ones merged: where
 * a module may be (see struct sym_proc). *vdso gets the vdso's range, or
 * stays zero.
 */
static int read_file_ranges(struct sym_proc *p, const char *maps, struct map_range *vdso)
{
	const char *line = maps, *nl, *path;
	struct map_range *v = NULL, *nv;
	size_t n = 0, cap = 0;
	uint64_t lo, hi;
	int off;

	for (; *line; line = *nl ? nl + 1 : nl) {
		nl = strchrnul(line, '\n');
		off = 0;
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %*s %*s %*s %n",
			   &lo, &hi, &off) != 2 || !off || line + off > nl)
			continue;
		path = line + off;
		if (!strncmp(path, "[vdso]", 6))
			*vdso = (struct map_range){ lo, hi };
		else if (*path != '/')
			continue;
		if (n && v[n - 1].hi == lo) {
			v[n - 1].hi = hi;
			continue;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				free(v);
				return -ENOMEM;
			}
			v = nv;
		}
		v[n++] = (struct map_range){ lo, hi };
	}
	free(p->files);
	p->files = v;
	p->n_files = n;
	return 0;
}

/*
 * dwfl_linux_proc_maps_report skips the vdso: it has no file. Report it
 * under the name dwfl_linux_proc_find_elf reads from process memory.
 */
static int report_vdso(struct sym_proc *p, const struct map_range *vdso)
{
	char name[32];

	if (!vdso->hi)
		return 0;
	snprintf(name, sizeof(name), "[vdso: %u]", p->pid);
	return dwfl_report_module(p->dwfl, name, vdso->lo, vdso->hi) ? 0 : -ENOMEM;
}

/* dwfl's module for addr, if addr is in one of the process's files. */
static Dwfl_Module *file_module(struct sym_proc *p, uint64_t addr)
{
	size_t lo = 0, hi = p->n_files, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (p->files[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || addr >= p->files[lo - 1].hi)
		return NULL;
	return dwfl_addrmodule(p->dwfl, addr);
}

/*
 * (Re)build the module list from /proc/PID/maps, read once into memory
 * first: a process that has died or is a zombie has no maps, and then
 * what we knew of it is kept rather than wiped.
 */
static int proc_report(struct symbolizer *s, struct sym_proc *p)
{
	struct map_range vdso = {};
	char path[32], *maps;
	size_t len;
	FILE *f;
	int err;

	p->reported_ns = now_ns();
	s->st.reports++;
	snprintf(path, sizeof(path), "/proc/%u/maps", p->pid);
	maps = proc__read_file(path, &len);
	if (!maps)
		return errno == ENOENT ? -ESRCH : -errno;
	if (!len) {
		err = -ESRCH;
		goto out_free;
	}
	f = fmemopen(maps, len, "r");
	if (!f) {
		err = -errno;
		goto out_free;
	}
	dwfl_report_begin(p->dwfl);
	err = dwfl_linux_proc_maps_report(p->dwfl, f);
	err = err > 0 ? -err : err ? -EIO : 0;	/* errno, or -1: libdwfl's */
	if (!err)
		err = read_file_ranges(p, maps, &vdso);
	if (!err)
		err = report_vdso(p, &vdso);
	if (dwfl_report_end(p->dwfl, NULL, NULL) && !err)
		err = -EIO;
	fclose(f);
out_free:
	free(maps);
	return err;
}

static struct sym_proc **proc_slot(struct symbolizer *s, uint32_t pid)
{
	struct sym_proc **pp = &s->procs[pid % PROC_BUCKETS];

	while (*pp && (*pp)->pid != pid)
		pp = &(*pp)->next;
	return pp;
}

static void perf_map_clear(struct perf_map *pm)
{
	size_t i;

	for (i = 0; i < pm->n; i++)
		free(pm->ents[i].name);
	pm->n = 0;
	pm->read_off = 0;
}

static void proc_free(struct sym_proc *p)
{
	struct sym_mod *m, *next;

	if (p->dwfl)
		dwfl_end(p->dwfl);
	for (m = p->mods; m; m = next) {
		next = m->next;
		free(m);
	}
	perf_map_clear(&p->pm);
	free(p->pm.ents);
	free(p->files);
	free(p);
}

/* The host's only: a container's could hold a FIFO to block us. */
static char debug_dir[] = "/usr/lib/debug";
static char *debuginfo_path = debug_dir;

static const Dwfl_Callbacks callbacks = {
	.find_elf = find_elf,
	/* Not dwfl_standard_find_debuginfo: it falls back to debuginfod. */
	.find_debuginfo = dwfl_build_id_find_debuginfo,
	.debuginfo_path = &debuginfo_path,
};

static int proc_new(struct symbolizer *s, uint32_t pid, struct sym_proc **out)
{
	struct sym_proc *p = calloc(1, sizeof(*p));
	int err;

	if (!p)
		return -ENOMEM;
	p->pid = pid;
	p->dwfl = dwfl_begin(&callbacks);
	if (!p->dwfl) {
		err = -ENOMEM;
		goto err_free;
	}
	err = proc_report(s, p);
	if (err)
		goto err_free;
	*out = p;
	return 0;

err_free:
	proc_free(p);
	return err;
}

static int proc_get(struct symbolizer *s, uint32_t pid, struct sym_proc **out)
{
	struct sym_proc **pp = proc_slot(s, pid);
	int err;

	if (*pp) {
		*out = *pp;
		return 0;
	}
	err = proc_new(s, pid, out);
	if (err)
		return err;
	*pp = *out;
	return 0;
}

/* ---- modules ---- */

static const char *module_basename(const char *name)
{
	const char *slash;

	if (!strncmp(name, "[vdso", 5))
		return "[vdso]";
	slash = strrchr(name, '/');
	return slash ? slash + 1 : name;
}

static struct sym_mod *mod_data(struct symbolizer *s, struct sym_proc *p,
				Dwfl_Module *mod)
{
	struct sym_mod *m;
	const char *name;
	void **ud;

	name = dwfl_module_info(mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
	if (*ud)
		return *ud;
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->proc = p;
	m->base = name ? intern(&s->names, module_basename(name)) : NULL;
	m->next = p->mods;
	p->mods = m;
	*ud = m;
	return m;
}

/* Open the module's ELF (via find_elf) and name its file for the cache. */
static void mod_open(struct symbolizer *s, Dwfl_Module *mod, struct sym_mod *m)
{
	unsigned char key[1 + BUILD_ID_MAX];
	const unsigned char *bits;
	GElf_Addr vaddr;
	int n;

	m->elf_tried = true;
	if (!dwfl_module_getelf(mod, &m->bias))
		return;
	m->have_bias = true;
	n = dwfl_module_build_id(mod, &bits, &vaddr);
	if (n > 0 && n <= BUILD_ID_MAX) {
		key[0] = 'B';
		memcpy(key + 1, bits, n);
		m->file = file_get(s, key, n + 1);
	} else if (m->have_ident) {
		key[0] = 'I';
		memcpy(key + 1, &m->ident, sizeof(m->ident));
		m->file = file_get(s, key, 1 + sizeof(m->ident));
	}
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
	struct sym_mod *m = mod_data(s, p, mod);
	struct cache_ent *e;
	uint64_t rel;

	if (!m)
		return;
	f->module = m->base;
	if (!m->elf_tried)
		mod_open(s, mod, m);
	rel = mod_offset(mod, m, f->addr);
	f->offset = rel;	/* until a function is found */
	if (!m->file)
		return;
	e = cache_find(&s->cache, m->file, rel);
	if (e) {
		s->st.hits++;
		f->func = e->func;
		f->offset = e->offset;
		return;
	}
	s->st.misses++;
	lookup_symbol(s, mod, f);
	cache_insert(s, m->file, rel, f->func, f->offset);
}

/* ---- perf maps (python -X perf, JITs) ---- */

/* The pid the process knows itself by: it names its perf map with it. */
static uint32_t read_nspid(uint32_t pid)
{
	char path[32], *buf, *line, *last;
	uint32_t nspid = pid;
	size_t len;

	snprintf(path, sizeof(path), "/proc/%u/status", pid);
	buf = proc__read_file(path, &len);
	if (!buf)
		return pid;
	line = strstr(buf, "\nNSpid:");
	if (line) {
		line[strcspn(line + 1, "\n") + 1] = '\0';
		last = strrchr(line, '\t');
		if (last)
			nspid = strtoul(last + 1, NULL, 10);
	}
	free(buf);
	return nspid ? nspid : pid;
}

static int perf_ent_cmp(const void *a, const void *b)
{
	const struct perf_ent *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* The last entry starting at or below addr, if it covers addr. */
static const struct perf_ent *perf_map_find(const struct perf_map *pm,
					    uint64_t addr)
{
	size_t lo = 0, hi = pm->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (pm->ents[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || addr >= pm->ents[lo - 1].end)
		return NULL;
	return &pm->ents[lo - 1];
}

/* "START SIZE NAME", START and SIZE in hex; 0: taken, else skipped. */
static int perf_map_add(struct perf_map *pm, char *line)
{
	uint64_t start, size;
	struct perf_ent *e;
	char *end, *name;

	start = strtoull(line, &end, 16);
	if (end == line || *end != ' ')
		return -EINVAL;
	line = end + 1;
	size = strtoull(line, &end, 16);
	if (end == line || *end != ' ' || !size || start + size < start)
		return -EINVAL;
	name = end + strspn(end, " ");
	name[strcspn(name, "\n")] = '\0';
	if (!*name || pm->n >= PERF_MAP_MAX_ENTS)
		return -EINVAL;
	if (pm->n == pm->cap) {
		size_t cap = pm->cap ? pm->cap * 2 : 256;

		e = realloc(pm->ents, cap * sizeof(*e));
		if (!e)
			return -ENOMEM;
		pm->ents = e;
		pm->cap = cap;
	}
	e = &pm->ents[pm->n];
	e->name = strdup(name);
	if (!e->name)
		return -ENOMEM;
	e->start = start;
	e->end = start + size;
	e->seq = pm->n++;
	return 0;
}

/* Length of what fgets read, and whether it holds a line's end. */
static size_t chunk_len(const char *buf, bool *eol)
{
	size_t len = strlen(buf);

	*eol = len && buf[len - 1] == '\n';
	return len;
}

/*
 * Read whole lines past read_off; a line still being written waits for
 * the next time. Over-long lines are skipped.
 */
static size_t perf_map_read(struct perf_map *pm, FILE *f)
{
	char line[PERF_MAP_MAX_LINE];
	size_t added = 0, len;
	bool eol, skip;

	if (fseeko(f, pm->read_off, SEEK_SET))
		return 0;
	while (fgets(line, sizeof(line), f)) {
		len = chunk_len(line, &eol);
		skip = !eol && len == sizeof(line) - 1;
		while (skip && fgets(line, sizeof(line), f)) {
			len += chunk_len(line, &eol);
			if (eol)
				break;
		}
		if (!eol)
			break;
		pm->read_off += len;
		if (!skip)
			added += !perf_map_add(pm, line);
	}
	return added;
}

/* Pick up what the process appended since; at most once per REFRESH_NS. */
static bool perf_map_refresh(struct sym_proc *p)
{
	struct perf_map *pm = &p->pm;
	uint64_t now = now_ns();
	char path[64];
	struct stat st;
	size_t added;
	FILE *f;
	int fd;

	if (pm->checked && now - pm->checked_ns < REFRESH_NS)
		return false;
	pm->checked = true;
	pm->checked_ns = now;
	if (!p->nspid)
		p->nspid = read_nspid(p->pid);
	snprintf(path, sizeof(path), "/proc/%u/root/tmp/perf-%u.map", p->pid,
		 p->nspid);
	fd = open_regular(path, &st);
	if ((fd == -EACCES || fd == -EPERM) && p->nspid == p->pid) {
		snprintf(path, sizeof(path), "/tmp/perf-%u.map", p->pid);
		fd = open_regular(path, &st);
	}
	if (fd < 0)
		return false;
	if (st.st_dev != pm->dev || st.st_ino != pm->ino ||
	    st.st_size < pm->read_off) {
		perf_map_clear(pm);	/* a new file, or rewritten */
		pm->dev = st.st_dev;
		pm->ino = st.st_ino;
	}
	if (st.st_size == pm->read_off) {
		close(fd);
		return false;
	}
	f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return false;
	}
	added = perf_map_read(pm, f);
	fclose(f);
	if (added)
		qsort(pm->ents, pm->n, sizeof(*pm->ents), perf_ent_cmp);
	return added;
}

static bool perf_map_resolve(struct symbolizer *s, struct sym_proc *p,
			     struct sym_frame *f, bool refresh)
{
	const struct perf_ent *e;

	if (refresh && !perf_map_refresh(p))
		return false;
	e = perf_map_find(&p->pm, f->addr);
	if (!e)
		return false;
	f->func = intern(&s->names, e->name);
	f->module = s->perf_module;
	f->offset = f->func ? f->addr - e->start : 0;
	return true;
}

/* ---- resolving ---- */

static void resolve_one(struct symbolizer *s, struct sym_proc *p,
			struct sym_frame *f)
{
	Dwfl_Module *mod;

	if (f->addr < 4096 || f->addr >= USER_ADDR_END)
		return;
	mod = file_module(p, f->addr);
	if (mod)
		goto found;
	/* JIT code first: it would otherwise re-read maps for every frame. */
	if (perf_map_resolve(s, p, f, false))
		return;
	/* Maybe mapped since we looked (dlopen). */
	if (now_ns() - p->reported_ns >= REFRESH_NS && !proc_report(s, p)) {
		mod = file_module(p, f->addr);
		if (mod)
			goto found;
	}
	perf_map_resolve(s, p, f, true);
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
	err = proc_get(s, pid, &p);
	if (err)
		return err;
	for (i = 0; i < n; i++)
		resolve_one(s, p, &out[i]);
	return 0;
}

struct prepare_ctx {
	struct symbolizer *s;
	struct sym_proc *p;
};

static int prepare_mod(Dwfl_Module *mod, void **ud, const char *name,
		       Dwarf_Addr start, void *arg)
{
	struct prepare_ctx *c = arg;

	(void)ud;
	(void)name;
	(void)start;
	mod_data(c->s, c->p, mod);
	return DWARF_CB_OK;
}

/*
 * find_elf opens a module's file only once it has its sym_mod (it names
 * the process to open the file under). Symbolizing attaches one to each
 * module it meets; an unwinder reaches modules by itself, so give one to
 * every module up front, again after each re-read of the maps.
 */
static void prepare_mods(struct symbolizer *s, struct sym_proc *p)
{
	struct prepare_ctx c = { s, p };

	if (p->prepared_ns == p->reported_ns)
		return;
	dwfl_getmodules(p->dwfl, prepare_mod, &c, 0);
	p->prepared_ns = p->reported_ns;
}

Dwfl *symbolizer__dwfl(struct symbolizer *s, uint32_t pid, uint64_t addr)
{
	struct sym_proc *p;
	int err;

	err = proc_get(s, pid, &p);
	if (err) {
		errno = -err;
		return NULL;
	}
	if (!file_module(p, addr) &&
	    now_ns() - p->reported_ns >= REFRESH_NS)
		proc_report(s, p);
	prepare_mods(s, p);
	return p->dwfl;
}

void symbolizer__forget(struct symbolizer *s, uint32_t pid)
{
	struct sym_proc **pp = proc_slot(s, pid), *p = *pp;

	if (!p)
		return;
	*pp = p->next;
	proc_free(p);
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
	err = cache_init(&s->cache, cache_cap);
	if (err)
		goto err_free;
	s->perf_module = intern(&s->names, "[perf-map]");
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
	struct sym_file *f, *fnext;
	struct sym_proc *p, *pnext;
	size_t i;

	if (!s)
		return;
	for (i = 0; i < PROC_BUCKETS; i++) {
		for (p = s->procs[i]; p; p = pnext) {
			pnext = p->next;
			proc_free(p);
		}
	}
	for (f = s->files; f; f = fnext) {
		fnext = f->next;
		free(f);
	}
	free(s->cache.ents);
	free(s->cache.b);
	intern_free(&s->names);
	free(s);
}
