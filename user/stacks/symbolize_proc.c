// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The symbolizer's view of each live process: one Dwfl built from
 * /proc/PID/maps, a sym_mod behind each of its modules, and the ranges
 * its files are mapped at.
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
#include <unistd.h>
#include "lib/sys.h"
#include "lib/out_file.h"
#include "lib/procfs.h"
#include "stacks/symbolize_int.h"

/* ---- opening files ---- */

/*
 * Fall back to the path as it is only when the process's root may not be
 * entered, which is right for a process that shares our root and
 * harmless otherwise.
 */
static int open_in_root(const struct sym_proc *p, const char *path, char **opened,
			struct stat *st)
{
	char buf[PATH_MAX];
	const char *used = buf;
	int fd;

	if (snprintf(buf, sizeof(buf), "/proc/%u/root%s", p->pid, path) >=
	    (int)sizeof(buf))
		return -ENAMETOOLONG;
	fd = sym_proc__open(p, path, st);
	if (fd == -EACCES || fd == -EPERM) {
		used = path;
		fd = file__open_in_root(0, path, st);
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
	char real[PATH_MAX];
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
	fd = -1;
	if (proc__maps_path(name, real, sizeof(real)))
		fd = open_in_root(m->proc, real, file_name, &st);
	if (fd < 0)
		fd = open_in_root(m->proc, name, file_name, &st);
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
	struct map_range *v = NULL, *nv;
	size_t n = 0, cap = 0;
	struct maps_ent e;
	const char *line;

	for (line = maps; *line; line = e.next) {
		if (!proc__maps_parse(line, &e))
			continue;
		if (!strncmp(e.path, "[vdso]", 6))
			*vdso = (struct map_range){ e.lo, e.hi };
		else if (*e.path != '/')
			continue;
		if (n && v[n - 1].hi == e.lo) {
			v[n - 1].hi = e.hi;
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
		v[n++] = (struct map_range){ e.lo, e.hi };
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

Dwfl_Module *sym_proc__module(struct sym_proc *p, uint64_t addr)
{
	if (!map_range__find(p->files, p->n_files, sizeof(*p->files), addr))
		return NULL;
	return dwfl_addrmodule(p->dwfl, addr);
}

/*
 * Taken with the maps, so that they describe the same process: a pid
 * reused later is another's. The mount table is re-read with each read
 * of the maps (a FUSE mount may come later); the last one read is kept,
 * and whole only if it has a FUSE mount (" - fuse", " - fuseblk"...; a
 * space in a mount point is written \040): a container host's table is
 * hundreds of KiB a process, and the guard locks what it holds.
 */
static void hold_root(struct sym_proc *p)
{
	char path[40];
	char *text;
	size_t len;

	text = proc__read_pid_file((pid_t)p->pid, "mountinfo", &len);
	if (!text || !len) {
		free(text);
		text = NULL;
	} else if (!strstr(text, " - fuse")) {
		free(text);
		text = strdup("");	/* read: nothing is on FUSE */
	}
	if (text) {
		free(p->mountinfo);
		p->mountinfo = text;
	}
	if (p->root >= 0)
		return;
	snprintf(path, sizeof(path), "/proc/%u/root", p->pid);
	p->root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

/*
 * (Re)build the module list from /proc/PID/maps, read once into memory
 * first: a process that has died or is a zombie has no maps, and then
 * what we knew of it is kept rather than wiped.
 */
int sym_proc__report(struct symbolizer *s, struct sym_proc *p)
{
	struct map_range vdso = {};
	char *maps;
	size_t len;
	FILE *f;
	int err;

	p->reported_ns = clock__mono_ns();
	s->st.reports++;
	maps = proc__read_pid_file((pid_t)p->pid, "maps", &len);
	if (!maps)
		return errno == ENOENT ? -ESRCH : -errno;
	if (!len) {
		err = -ESRCH;
		goto out_free;
	}
	hold_root(p);
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

/* A row of s->procs. */
struct proc_ref {
	uint32_t pid;
	struct sym_proc *p;
};

static void proc_free(struct sym_proc *p)
{
	struct sym_mod *m, *next;

	if (p->dwfl)
		dwfl_end(p->dwfl);
	for (m = p->mods; m; m = next) {
		next = m->next;
		free(m);
	}
	perf_map__clear(&p->pm);
	free(p->pm.ents);
	free(p->files);
	free(p->mountinfo);
	if (p->root >= 0)
		close(p->root);
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
	p->root = -1;
	p->dwfl = dwfl_begin(&callbacks);
	if (!p->dwfl) {
		err = -ENOMEM;
		goto err_free;
	}
	err = sym_proc__report(s, p);
	if (err)
		goto err_free;
	*out = p;
	return 0;

err_free:
	proc_free(p);
	return err;
}

int sym_proc__get(struct symbolizer *s, uint32_t pid, struct sym_proc **out)
{
	struct proc_ref *ref = pid_table__find(&s->procs, pid);
	int err;

	if (ref) {
		*out = ref->p;
		return 0;
	}
	err = proc_new(s, pid, out);
	if (err)
		return err;
	ref = pid_table__get(&s->procs, pid);
	if (!ref) {
		proc_free(*out);
		return -ENOMEM;
	}
	ref->p = *out;
	return 0;
}

void sym_proc__forget(struct symbolizer *s, uint32_t pid)
{
	struct proc_ref *ref = pid_table__find(&s->procs, pid);

	if (!ref)
		return;
	proc_free(ref->p);
	pid_table__remove(&s->procs, pid);
}

void sym_procs__init(struct symbolizer *s)
{
	pid_table__init(&s->procs, sizeof(struct proc_ref));
}

void sym_procs__free(struct symbolizer *s)
{
	size_t i;

	for (i = 0; i < s->procs.n; i++)
		proc_free(((struct proc_ref *)pid_table__row(&s->procs, i))->p);
	pid_table__free(&s->procs);
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

struct sym_mod *sym_mod__get(struct symbolizer *s, struct sym_proc *p, Dwfl_Module *mod)
{
	char real[PATH_MAX];
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
	m->file = NO_FILE;
	/* The file's own name: maps writes a newline in it as \012. */
	if (name && proc__maps_path(name, real, sizeof(real)))
		name = real;
	m->base = name ? strtab__intern_str(&s->names, module_basename(name)) : NULL;
	m->next = p->mods;
	p->mods = m;
	*ud = m;
	return m;
}

void sym_mod__open(struct symbolizer *s, Dwfl_Module *mod, struct sym_mod *m)
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
		m->file = sym_files__get(s, key, n + 1);
	} else if (m->have_ident) {
		key[0] = 'I';
		memcpy(key + 1, &m->ident, sizeof(m->ident));
		m->file = sym_files__get(s, key, 1 + sizeof(m->ident));
	}
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
	sym_mod__get(c->s, c->p, mod);
	return DWARF_CB_OK;
}

/*
 * find_elf opens a module's file only once it has its sym_mod (it names
 * the process to open the file under). Symbolizing attaches one to each
 * module it meets; an unwinder reaches modules by itself, so give one to
 * every module up front, again after each re-read of the maps.
 */
void sym_proc__prepare_mods(struct symbolizer *s, struct sym_proc *p)
{
	struct prepare_ctx c = { s, p };

	if (p->prepared_ns == p->reported_ns)
		return;
	dwfl_getmodules(p->dwfl, prepare_mod, &c, 0);
	p->prepared_ns = p->reported_ns;
}
