/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A GPU call's stack as names, while its process is alive: the
 * frame-pointer stack of its record, or the DWARF stack unwound from the
 * raw stack sent just before it (--stack), symbolized. Shared by the
 * subcommands that name call sites (report, record).
 */
#ifndef UMTRACE_CALLSTACK_H
#define UMTRACE_CALLSTACK_H

#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "stacks/symbolize.h"
#include "umtrace.h"
#include "stacks/unwind.h"

struct callstack {
	enum stack_mode mode;
	struct symbolizer *sym;
	struct unwinder *uw;		/* NULL in fp mode */
	struct ustack_table pending;	/* unwound, waiting for their call */
	uint64_t dwarf_used;		/* calls named with their DWARF stack */
};

/* 0 or -errno. */
int callstack__init(struct callstack *cs, enum stack_mode mode);
/* Raw stack bytes the probes should copy per call: 0 in fp mode. */
uint32_t callstack__ustack_bytes(const struct callstack *cs);
/* A raw stack record: unwind it now, keep it for its call. */
void callstack__ustack(struct callstack *cs, const struct umt_ustack_rec *r);
/*
 * r's stack, symbolized, into frames[0..UMT_STACK_MAX): how many. The
 * names stay valid until callstack__free.
 */
size_t callstack__resolve(struct callstack *cs, const struct umt_call_rec *r,
			  struct sym_frame *frames);
/* pid exited or exec'ed. */
void callstack__forget(struct callstack *cs, uint32_t pid);
/* What the DWARF path cost, for -v. */
void callstack__log_stats(const struct callstack *cs);
void callstack__free(struct callstack *cs);

#endif /* UMTRACE_CALLSTACK_H */
