/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Function symbols of a shared library, as file offsets a uprobe takes. */
#ifndef UMTRACE_ELF_SYMS_H
#define UMTRACE_ELF_SYMS_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

/*
 * For each of names[0..n), set offsets[i] to the symbol's file offset, or
 * to 0 if the file does not define it. Returns how many were found, or
 * -errno with *why set to a short reason ("not an ELF file", ...).
 */
int elf_syms__resolve(const char *path, const char *const *names, size_t n,
		      uint64_t *offsets, const char **why);

/* A function symbol found by its name's prefix. */
struct elf_sym_hit {
	char name[256];		/* the whole name, without a version ("@...") */
	uint64_t offset;	/* in the file */
};

/*
 * Every function the file defines whose name starts with prefix, at most
 * max of them (an alias at one offset included: the caller picks). Returns
 * how many, or -errno with *why set as elf_syms__resolve does.
 */
int elf_syms__find_prefix(const char *path, const char *prefix,
			  struct elf_sym_hit *hits, size_t max, const char **why);

/* Is offs[i] one of offs[0..i-1]? Symbols that alias one function get one probe. */
bool elf_syms__dup_offset(const uint64_t *offs, unsigned int i);

#endif /* UMTRACE_ELF_SYMS_H */
