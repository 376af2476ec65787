// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Resolve all probed entry points in one pass over the ELF file: the real
 * libcuda is tens of MiB and asking libbpf for one name at a time would
 * parse it once per probe.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <gelf.h>
#include <libelf.h>
#include <string.h>
#include <unistd.h>
#include "attach/elf_syms.h"

#if defined(__x86_64__)
#define UMT_ELF_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define UMT_ELF_MACHINE EM_AARCH64
#else
#error "umtrace supports x86_64 and aarch64"
#endif

/* Symbol file offset: translate its address through the loadable segment. */
static uint64_t sym_file_offset(Elf *elf, uint64_t addr)
{
	size_t i, n;
	GElf_Phdr ph;

	if (elf_getphdrnum(elf, &n))
		return 0;
	for (i = 0; i < n; i++) {
		if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (!(ph.p_flags & PF_X))
			continue;
		if (addr >= ph.p_vaddr && addr < ph.p_vaddr + ph.p_filesz)
			return addr - ph.p_vaddr + ph.p_offset;
	}
	return 0;
}

struct by_name {
	const char *const *names;
	size_t n;
	uint64_t *offsets;
};

static int take_named(const char *sym, size_t len, uint64_t off, void *ctx)
{
	struct by_name *b = ctx;
	size_t i;

	for (i = 0; i < b->n; i++) {
		if (strlen(b->names[i]) != len || strncmp(sym, b->names[i], len))
			continue;
		if (b->offsets[i])
			return 0;
		b->offsets[i] = off;
		return 1;
	}
	return 0;
}

struct by_prefix {
	const char *prefix;
	struct elf_sym_hit *hits;
	size_t n, max;
};

/* .dynsym and .symtab both list an exported function: keep it once. */
static int take_prefixed(const char *sym, size_t len, uint64_t off, void *ctx)
{
	struct by_prefix *b = ctx;
	struct elf_sym_hit *h;
	size_t i;

	if (strncmp(sym, b->prefix, strlen(b->prefix)) || len >= sizeof(h->name))
		return 0;
	for (i = 0; i < b->n; i++)
		if (b->hits[i].offset == off && strlen(b->hits[i].name) == len &&
		    !strncmp(b->hits[i].name, sym, len))
			return 0;
	if (b->n == b->max)
		return 0;
	h = &b->hits[b->n++];
	memcpy(h->name, sym, len);
	h->name[len] = '\0';
	h->offset = off;
	return 1;
}

/* What one symbol table entry asks of a scan: a name and its offset. */
typedef int (*sym_fn)(const char *name, size_t len, uint64_t offset, void *ctx);

static int scan_symtab(Elf *elf, Elf_Scn *scn, GElf_Shdr *sh, sym_fn fn, void *ctx)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t i, count;
	int found = 0;

	if (!data || !sh->sh_entsize)
		return 0;
	count = sh->sh_size / sh->sh_entsize;
	for (i = 0; i < count; i++) {
		GElf_Sym sym;
		const char *nm;
		uint64_t off;
		int type;

		if (!gelf_getsym(data, i, &sym))
			continue;
		type = GELF_ST_TYPE(sym.st_info);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) ||
		    sym.st_shndx == SHN_UNDEF || !sym.st_value)
			continue;
		nm = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (!nm)
			continue;
		off = sym_file_offset(elf, sym.st_value);
		if (off)
			found += fn(nm, strcspn(nm, "@"), off, ctx);	/* "cuInit@@libcuda.so.1" */
	}
	return found;
}

/* Open path as an ELF file of this machine and scan its symbol tables. */
static int scan_file(const char *path, sym_fn fn, void *ctx, const char **why)
{
	Elf_Scn *scn = NULL;
	struct stat st;
	GElf_Ehdr eh;
	Elf *elf;
	int fd, found = 0, err = 0;

	*why = NULL;
	if (elf_version(EV_CURRENT) == EV_NONE) {
		*why = "libelf initialisation failed";
		return -EINVAL;
	}
	/* Never a FIFO's open that blocks, nor a device's driver behind a path. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		err = -errno;
		*why = strerror(errno);
		return err;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		*why = "not a regular file";
		close(fd);
		return -EINVAL;
	}
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh)) {
		*why = "not an ELF file";
		err = -ENOEXEC;
		goto out;
	}
	if (gelf_getclass(elf) != ELFCLASS64 || eh.e_machine != UMT_ELF_MACHINE) {
		*why = "ELF file for another architecture or a 32-bit ELF";
		err = -ENOEXEC;
		goto out;
	}
	if (eh.e_type != ET_DYN && eh.e_type != ET_EXEC) {
		*why = "not a shared library or executable";
		err = -ENOEXEC;
		goto out;
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB)
			continue;
		found += scan_symtab(elf, scn, &sh, fn, ctx);
	}
out:
	if (elf)
		elf_end(elf);
	close(fd);
	return err ? err : found;
}

int elf_syms__resolve(const char *path, const char *const *names, size_t n,
		      uint64_t *offsets, const char **why)
{
	struct by_name b = { names, n, offsets };

	memset(offsets, 0, n * sizeof(*offsets));
	return scan_file(path, take_named, &b, why);
}

int elf_syms__find_prefix(const char *path, const char *prefix,
			  struct elf_sym_hit *hits, size_t max, const char **why)
{
	struct by_prefix b = { prefix, hits, 0, max };

	return scan_file(path, take_prefixed, &b, why);
}

bool elf_syms__dup_offset(const uint64_t *offs, unsigned int i)
{
	unsigned int j;

	for (j = 0; j < i; j++)
		if (offs[j] == offs[i])
			return true;
	return false;
}
