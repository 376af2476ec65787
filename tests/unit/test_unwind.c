// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * DWARF unwinding: the pending-stack table, the fp/dwarf choice, and the
 * unwinder itself on a record this process makes of its own stack (what
 * the entry probe would have sent), through functions built without
 * frame pointers.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "stacks/symbolize.h"
#include "stacks/unwind.h"

/* ---- the table ---- */

static void test_table(void)
{
	struct ustack_table t;
	uint64_t a[3] = { 0x1000, 0x2000, 0x3000 }, b[2] = { 0x4000, 0x5000 };
	uint64_t out[UMT_STACK_MAX];

	if (!CHECK(!ustack_table__init(&t, 100), "init", "no memory"))
		return;
	CHECK_EQ(t.mask, 127, "slots_pow2");
	ustack_table__put(&t, 42, 1000, a, 3);
	CHECK_EQ(ustack_table__take(&t, 42, 999, out, UMT_STACK_MAX), 0, "other_ts");
	CHECK_EQ(ustack_table__take(&t, 43, 1000, out, UMT_STACK_MAX), 0, "other_tid");
	CHECK_EQ(ustack_table__take(&t, 42, 1000, out, UMT_STACK_MAX), 3, "take");
	CHECK(out[0] == 0x1000 && out[2] == 0x3000, "take_frames", "%llx %llx",
	      (unsigned long long)out[0], (unsigned long long)out[2]);
	CHECK_EQ(ustack_table__take(&t, 42, 1000, out, UMT_STACK_MAX), 0, "taken_once");

	/* The next call of a thread replaces the one whose record was lost. */
	ustack_table__put(&t, 42, 2000, a, 3);
	ustack_table__put(&t, 42, 3000, b, 2);
	CHECK_EQ(t.replaced, 1, "replaced");
	CHECK_EQ(ustack_table__take(&t, 42, 2000, out, UMT_STACK_MAX), 0, "stale_gone");
	CHECK_EQ(ustack_table__take(&t, 42, 3000, out, 1), 1, "clamped_to_max");
	CHECK_EQ(out[0], 0x4000, "clamped_frame");

	/* An empty stack is not kept: the call keeps its FP stack. */
	ustack_table__put(&t, 7, 1, a, 0);
	CHECK_EQ(ustack_table__take(&t, 7, 1, out, UMT_STACK_MAX), 0, "empty");
	ustack_table__free(&t);
}

/* Threads numbered in sequence land in different slots. */
static void test_table_spread(void)
{
	struct ustack_table t;
	uint64_t pc = 0x1000, out[1];
	uint32_t tid, got = 0;

	if (!CHECK(!ustack_table__init(&t, 1024), "init", "no memory"))
		return;
	for (tid = 5000; tid < 5256; tid++)
		ustack_table__put(&t, tid, tid, &pc, 1);
	for (tid = 5000; tid < 5256; tid++)
		got += ustack_table__take(&t, tid, tid, out, 1);
	CHECK(got >= 250, "spread", "%u of 256 threads kept their stack", got);
	ustack_table__free(&t);
}

/* ---- the choice ---- */

static void test_stack_mode(void)
{
	enum stack_mode m = STACK_DWARF;

	CHECK(!stack_mode__parse("auto", &m) && m == STACK_AUTO, "auto", "%d", m);
	CHECK(!stack_mode__parse("fp", &m) && m == STACK_FP, "fp", "%d", m);
	CHECK(!stack_mode__parse("dwarf", &m) && m == STACK_DWARF, "dwarf", "%d", m);
	CHECK_EQ(stack_mode__parse("DWARF", &m), -EINVAL, "case");
	CHECK_EQ(stack_mode__parse("", &m), -EINVAL, "empty");
}

static void test_choice(void)
{
	const uint64_t good[4] = { 0x7f0000001000, 0x555500001234, 0x555500002345,
				   0x7f0000005678 };
	const uint64_t null_ra[4] = { 0x7f0000001000, 0x555500001234, 0, 0x10 };
	const uint64_t kernel_ra[3] = { 0x7f0000001000, 0x555500001234,
					0xffffffff81000000ULL };

	/* No DWARF stack, or fp asked for: the frame-pointer one. */
	CHECK(!unwind__use_dwarf(STACK_AUTO, good, 4, 0), "auto_none", "");
	CHECK(!unwind__use_dwarf(STACK_DWARF, good, 4, 0), "dwarf_none", "");
	CHECK(!unwind__use_dwarf(STACK_FP, good, 2, 9), "fp_always", "");
	/* dwarf asked for: whenever there is one, even a shorter one. */
	CHECK(unwind__use_dwarf(STACK_DWARF, good, 4, 2), "dwarf_shorter", "");
	/* auto: longer wins; a tie keeps FP. */
	CHECK(unwind__use_dwarf(STACK_AUTO, good, 2, 5), "auto_longer", "");
	CHECK(!unwind__use_dwarf(STACK_AUTO, good, 4, 4), "auto_tie", "");
	CHECK(!unwind__use_dwarf(STACK_AUTO, good, 4, 3), "auto_shorter", "");
	/* auto: a plainly broken FP walk loses to any DWARF stack past the caller. */
	CHECK(unwind__use_dwarf(STACK_AUTO, null_ra, 4, 3), "auto_null_ra", "");
	CHECK(unwind__use_dwarf(STACK_AUTO, kernel_ra, 3, 3), "auto_kernel_ra", "");
	CHECK(!unwind__use_dwarf(STACK_AUTO, null_ra, 4, 2), "auto_broken_but_short", "");
	/* The entry point is frame 0: its address is not judged. */
	CHECK(!unwind__use_dwarf(STACK_AUTO, (const uint64_t[]){ 0, 0x5555 << 12 }, 2, 2),
	      "frame0_not_judged", "");
}

/* ---- the unwinder on this very process ---- */

#define UW_FRAME __attribute__((noinline, noclone, optimize("omit-frame-pointer")))

static volatile unsigned long uw_sink;

#if defined(__x86_64__)
#define UW_CAN_CAPTURE 1
/*
 * Registers as the entry probe takes them (DWARF numbering), the pc of
 * the capture itself, then the stack from sp up copied while every frame
 * above is still live. A byte loop, not memcpy: the copy reads other
 * frames' slots on purpose, which a sanitizer would take for a bug.
 */
static UW_FRAME __attribute__((no_sanitize_address)) bool
uw_capture(struct umt_ustack_rec *r)
{
	const volatile uint8_t *src;
	uint32_t i;

	memset(r->regs, 0, sizeof(r->regs));
	asm volatile("lea 0(%%rip), %%rax\n\t"
		     "mov %%rax, 128(%0)\n\t"
		     "mov %%rsp, 56(%0)\n\t"
		     "mov %%rbp, 48(%0)\n\t"
		     "mov %%rbx, 24(%0)\n\t"
		     "mov %%r12, 96(%0)\n\t"
		     "mov %%r13, 104(%0)\n\t"
		     "mov %%r14, 112(%0)\n\t"
		     "mov %%r15, 120(%0)\n\t"
		     : : "r"(r->regs) : "rax", "memory");
	r->type = UMT_REC_USTACK;
	r->machine = 62;	/* EM_X86_64 */
	r->nregs = 17;
	r->pc = r->regs[16];
	r->sp = r->regs[7];
	src = (const volatile uint8_t *)(uintptr_t)r->sp;
	for (i = 0; i < UMT_USTACK_MAX; i++)
		r->stack[i] = src[i];
	r->stack_len = UMT_USTACK_MAX;
	return true;
}
#else
#define UW_CAN_CAPTURE 0
static bool uw_capture(struct umt_ustack_rec *r)
{
	(void)r;
	return false;
}
#endif

static UW_FRAME bool uw_mid(struct umt_ustack_rec *r, unsigned long salt)
{
	bool ok = uw_capture(r);

	uw_sink += salt;
	return ok;
}

static UW_FRAME bool uw_outer(struct umt_ustack_rec *r)
{
	volatile char pad[1024];
	bool ok;

	pad[0] = 1;
	ok = uw_mid(r, pad[0] + 2);
	uw_sink += pad[0];
	return ok;
}

static const char *name_of(const struct sym_frame *f)
{
	return f->func ? f->func : "(none)";
}

static UW_FRAME void test_unwind_self(void)
{
	static const char *const want[] = { "uw_capture", "uw_mid", "uw_outer",
					    "test_unwind_self" };
	struct umt_ustack_rec *r = calloc(1, sizeof(*r));
	struct sym_frame frames[UMT_STACK_MAX];
	uint64_t pcs[UMT_STACK_MAX], addrs[UMT_STACK_MAX];
	struct symbolizer *sym = symbolizer__new();
	struct unwinder *uw = unwinder__new(sym);
	struct sym_stats before, after;
	struct unwind_stats st;
	/* A whole copy's worth of live stack above the capture, to read. */
	volatile char pad[UMT_USTACK_MAX];
	int n, i;

	pad[0] = 0;
	if (!CHECK(r && sym && uw, "setup", "no memory"))
		goto out;
	if (!CHECK(uw_outer(r), "capture", "not built for this architecture"))
		goto out;
	r->pid = getpid();
	r->tid = gettid();
	n = unwinder__unwind(uw, r, pcs, UMT_STACK_MAX);
	/*
	 * This function's return address lies above the 8 KiB copy, under
	 * the pad: the walk must stop there rather than read on.
	 */
	if (!CHECK(n == 4, "frames", "%d frames", n))
		goto out;
	CHECK_EQ(pcs[0], r->pc, "frame0_is_pc");
	for (i = 0; i < n; i++)
		addrs[i] = i ? pcs[i] - 1 : pcs[i];
	symbolizer__resolve(sym, r->pid, addrs, n, frames);
	for (i = 0; i < 4; i++)
		CHECK(frames[i].func && !strcmp(frames[i].func, want[i]), "order",
		      "frame %d is %s, expected %s", i, name_of(&frames[i]), want[i]);

	/* The same again: the Dwfl stays attached, the answer stays. */
	CHECK_EQ(unwinder__unwind(uw, r, pcs, UMT_STACK_MAX), n, "again");
	/*
	 * And after the symbolizer re-read the maps (an address in no module,
	 * past its 100 ms refresh interval): the state survives a re-report.
	 */
	symbolizer__stats(sym, &before);
	usleep(120 * 1000);
	addrs[0] = 4096 * 3;
	symbolizer__resolve(sym, r->pid, addrs, 1, frames);
	symbolizer__stats(sym, &after);
	CHECK(after.reports > before.reports, "refreshed", "maps not re-read");
	CHECK_EQ(unwinder__unwind(uw, r, pcs, UMT_STACK_MAX), n, "after_refresh");
	/* max bounds what is written. */
	CHECK_EQ(unwinder__unwind(uw, r, pcs, 2), 2, "max");

	/*
	 * No stack copied: nothing past the entry frame, since memory outside
	 * the copy is never read, although this process's is there to read.
	 */
	r->stack_len = 0;
	CHECK_EQ(unwinder__unwind(uw, r, pcs, UMT_STACK_MAX), 1, "no_copy");
	r->stack_len = UMT_USTACK_MAX;
	r->nregs = 0;
	CHECK_EQ(unwinder__unwind(uw, r, pcs, UMT_STACK_MAX), -EINVAL, "no_regs");

	unwinder__stats(uw, &st);
	CHECK_EQ(st.stacks, 5, "stats_stacks");
	CHECK_EQ(st.failed, 0, "stats_failed");
out:
	uw_sink += pad[0];
	unwinder__free(uw);
	symbolizer__free(sym);
	free(r);
}

/* A record of a process that is gone and was never seen: no frames. */
static void test_unwind_gone(void)
{
	struct umt_ustack_rec *r = calloc(1, sizeof(*r));
	struct symbolizer *sym = symbolizer__new();
	struct unwinder *uw = unwinder__new(sym);
	uint64_t pcs[4];

	if (!CHECK(r && sym && uw, "setup", "no memory"))
		goto out;
	r->pid = r->tid = 0x3fffffff;	/* above pid_max's ceiling */
	r->nregs = 1;
	r->pc = 0x401000;
	CHECK_EQ(unwinder__unwind(uw, r, pcs, 4), -ESRCH, "gone");
	CHECK(!unwinder__new(NULL), "null_sym", "an unwinder without a symbolizer");
out:
	unwinder__free(uw);
	symbolizer__free(sym);
	free(r);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	RUN_SUBTEST(test_table);
	RUN_SUBTEST(test_table_spread);
	RUN_SUBTEST(test_stack_mode);
	RUN_SUBTEST(test_choice);
	if (UW_CAN_CAPTURE)
		RUN_SUBTEST(test_unwind_self);
	else
		SKIP_SUBTEST(test_unwind_self, "the capture is written for x86-64");
	RUN_SUBTEST(test_unwind_gone);
	return CHECK_EXIT();
}
