/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * DWARF unwinding of the raw user stacks taken at GPU call entry
 * (UMT_REC_USTACK), for code built without frame pointers (libcuda,
 * PyTorch): libdwfl follows each module's call frame information from
 * the registers, reading memory from the stack copy in the record only.
 *
 * Also here: the table that keeps an unwound stack until its call's
 * record arrives, and the choice between that stack and the
 * frame-pointer one.
 */
#ifndef UMTRACE_UNWIND_H
#define UMTRACE_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "stacks/symbolize.h"
#include "umtrace.h"

struct unwinder;

struct unwind_stats {
	uint64_t stacks;	/* records unwound */
	uint64_t frames;	/* frames they gave */
	uint64_t failed;	/* records that gave no frame */
	uint64_t ns;		/* time spent unwinding */
};

/*
 * Unwind through sym's per-process Dwfl sessions: one unwinder per
 * symbolizer, freed before it. NULL with errno set.
 */
struct unwinder *unwinder__new(struct symbolizer *sym);

/*
 * Unwind r (its process must still be alive the first time it is seen)
 * into pcs[0..max): the entry point, then each caller's return address,
 * innermost first, the same form as the frame-pointer stack of the
 * call's record. Returns the number of frames, or -errno when there is
 * none at all. Stops where the copy ends: memory beyond it is not read.
 */
int unwinder__unwind(struct unwinder *u, const struct umt_ustack_rec *r,
		     uint64_t *pcs, size_t max);
void unwinder__stats(const struct unwinder *u, struct unwind_stats *st);
void unwinder__free(struct unwinder *u);

/*
 * Unwound stacks waiting for their call's record (same tid, same ts_ns).
 * Bounded: slots are picked by tid, a tid's entry is replaced by its next
 * one, and two threads that share a slot replace each other's (the call
 * that lost its stack falls back to the frame-pointer one).
 */
struct ustack_slot {
	uint32_t tid;
	uint32_t n;		/* 0: empty */
	uint64_t ts_ns;
	uint64_t pcs[UMT_STACK_MAX];
};

struct ustack_table {
	struct ustack_slot *slots;
	size_t mask;
	uint64_t replaced;	/* entries overwritten before being taken */
};

/* slots: rounded up to a power of two. 0 or -ENOMEM. */
int ustack_table__init(struct ustack_table *t, size_t slots);
void ustack_table__put(struct ustack_table *t, uint32_t tid, uint64_t ts_ns,
		       const uint64_t *pcs, size_t n);
/* The stack of call (tid, ts_ns) into pcs[0..max), once: its length or 0. */
size_t ustack_table__take(struct ustack_table *t, uint32_t tid, uint64_t ts_ns,
			  uint64_t *pcs, size_t max);
void ustack_table__free(struct ustack_table *t);

enum stack_mode {
	STACK_AUTO,	/* the DWARF stack when it says more */
	STACK_FP,	/* frame pointers only: no raw stack is even copied */
	STACK_DWARF,	/* the DWARF stack whenever there is one */
};

/* "fp", "dwarf" or "auto": 0 or -EINVAL. */
int stack_mode__parse(const char *s, enum stack_mode *mode);

/*
 * Whether a call's DWARF stack (ndw frames) should stand for it rather
 * than its frame-pointer stack fp[0..nfp). In auto mode: when it is
 * longer, or when the frame-pointer walk is plainly broken (a return
 * address no user code can have) and the DWARF one got past the caller.
 */
bool unwind__use_dwarf(enum stack_mode mode, const uint64_t *fp, size_t nfp,
		       size_t ndw);

#endif /* UMTRACE_UNWIND_H */
