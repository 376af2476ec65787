// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * DWARF unwinding with libdwfl's thread-state interface: the "thread" is
 * a record, its registers the ones the entry probe saved, its memory the
 * slice of stack the probe copied.
 *
 * Memory outside the copy is not read, not even from /proc/PID/mem while
 * the process lives: by the time the record is read, the thread has gone
 * on running and may have returned past the frames the copy missed, so
 * what lies there now belongs to other calls. A stack that stops where
 * the copy stops is short but right; one continued with what the stack
 * holds later can be long and wrong. The copy's size is the knob.
 *
 * libdwfl attaches thread callbacks to a Dwfl once for its life. The Dwfl
 * is the symbolizer's, one per process; its callbacks get this unwinder,
 * which points them at the record being unwound for the length of one
 * call to unwinder__unwind.
 */
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "lib/parse.h"
#include "lib/sys.h"
#include "stacks/unwind.h"

/* Above any user address on x86 (5-level paging) and arm64 (52-bit VA). */
#define USER_ADDR_END	(1ULL << 56)
#define USER_ADDR_MIN	4096

struct unwinder {
	struct symbolizer *sym;
	const struct umt_ustack_rec *cur;	/* the record being unwound */
	struct unwind_stats st;
};

/* ---- libdwfl's view of the record ---- */

/* One thread per record: the one that made the call. */
static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	struct unwinder *u = arg;

	(void)dwfl;
	if (*thread_argp || !u->cur)
		return 0;
	*thread_argp = u;
	return (pid_t)u->cur->tid;
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	struct unwinder *u = arg;

	(void)dwfl;
	if (!u->cur || (pid_t)u->cur->tid != tid)
		return false;
	*thread_argp = u;
	return true;
}

static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result,
			void *arg)
{
	const struct umt_ustack_rec *r = ((struct unwinder *)arg)->cur;
	uint64_t off;

	(void)dwfl;
	if (!r || addr < r->sp || r->stack_len < sizeof(*result))
		return false;
	off = addr - r->sp;
	if (off > r->stack_len - sizeof(*result))
		return false;
	memcpy(result, r->stack + off, sizeof(*result));
	return true;
}

/*
 * The record's registers are in DWARF numbering already; the pc goes on
 * its own, since arm64 gives it no DWARF number.
 */
static bool set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	const struct umt_ustack_rec *r = ((struct unwinder *)arg)->cur;
	Dwarf_Word regs[UMT_USTACK_REGS];
	unsigned int i;

	if (!r->nregs || r->nregs > UMT_USTACK_REGS)
		return false;
	for (i = 0; i < r->nregs; i++)
		regs[i] = r->regs[i];
	if (!dwfl_thread_state_registers(thread, 0, r->nregs, regs))
		return false;
	dwfl_thread_state_register_pc(thread, r->pc);
	return true;
}

/* No detach callbacks: nothing to let go of, and the Dwfl may outlive us. */
static const Dwfl_Thread_Callbacks thread_callbacks = {
	.next_thread = next_thread,
	.get_thread = get_thread,
	.memory_read = memory_read,
	.set_initial_registers = set_initial_registers,
};

/*
 * libdwfl learns the architecture from a module whose ELF is open when
 * the state is attached: open the entry point's, which every record has.
 */
static int attach(struct unwinder *u, Dwfl *dwfl, const struct umt_ustack_rec *r)
{
	Dwfl_Module *mod;
	Dwarf_Addr bias;

	if (dwfl_pid(dwfl) > 0)
		return 0;
	mod = dwfl_addrmodule(dwfl, r->pc);
	if (!mod || !dwfl_module_getelf(mod, &bias))
		return -ENOENT;
	if (!dwfl_attach_state(dwfl, NULL, (pid_t)r->pid, &thread_callbacks, u))
		return -EIO;
	return 0;
}

struct frames {
	uint64_t *pcs;
	size_t n, max;
};

/* Return addresses as they are: callers look up pc - 1, as for FP stacks. */
static int on_frame(Dwfl_Frame *state, void *arg)
{
	struct frames *f = arg;
	Dwarf_Addr pc;

	if (!dwfl_frame_pc(state, &pc, NULL) || !pc)
		return DWARF_CB_ABORT;
	f->pcs[f->n++] = pc;
	return f->n < f->max ? DWARF_CB_OK : DWARF_CB_ABORT;
}

int unwinder__unwind(struct unwinder *u, const struct umt_ustack_rec *r,
		     uint64_t *pcs, size_t max)
{
	struct frames f = { .pcs = pcs, .max = max };
	uint64_t t0 = clock__mono_ns();
	Dwfl *dwfl;
	int err;

	if (!max || !r->nregs || r->nregs > UMT_USTACK_REGS ||
	    r->stack_len > sizeof(r->stack))
		return -EINVAL;
	dwfl = symbolizer__dwfl(u->sym, r->pid, r->pc);
	if (!dwfl) {
		err = -errno;
		goto out;
	}
	err = attach(u, dwfl, r);
	if (err)
		goto out;
	/*
	 * A walk that ends in an error (the copy ran out, a module without
	 * CFI) still leaves the frames found before it: keep them.
	 */
	u->cur = r;
	dwfl_getthread_frames(dwfl, (pid_t)r->tid, on_frame, &f);
	u->cur = NULL;
	err = f.n ? 0 : -ENOENT;
out:
	u->st.stacks++;
	u->st.frames += f.n;
	u->st.failed += !f.n;
	u->st.ns += clock__mono_ns() - t0;
	return err ? err : (int)f.n;
}

void unwinder__stats(const struct unwinder *u, struct unwind_stats *st)
{
	*st = u->st;
}

struct unwinder *unwinder__new(struct symbolizer *sym)
{
	struct unwinder *u;

	if (!sym) {
		errno = EINVAL;
		return NULL;
	}
	u = calloc(1, sizeof(*u));
	if (!u)
		return NULL;
	u->sym = sym;
	return u;
}

void unwinder__free(struct unwinder *u)
{
	free(u);
}

/* ---- stacks waiting for their call ---- */

int ustack_table__init(struct ustack_table *t, size_t slots)
{
	size_t n = 1;

	memset(t, 0, sizeof(*t));
	while (n < slots)
		n <<= 1;
	t->slots = calloc(n, sizeof(*t->slots));
	if (!t->slots)
		return -ENOMEM;
	t->mask = n - 1;
	return 0;
}

/* Thread ids are handed out in sequence: spread them over the slots. */
static struct ustack_slot *slot_of(const struct ustack_table *t, uint32_t tid)
{
	return &t->slots[(tid * 0x9e3779b1U) >> 7 & t->mask];
}

void ustack_table__put(struct ustack_table *t, uint32_t tid, uint64_t ts_ns,
		       const uint64_t *pcs, size_t n)
{
	struct ustack_slot *s = slot_of(t, tid);

	if (!n)
		return;
	if (n > UMT_STACK_MAX)
		n = UMT_STACK_MAX;
	t->replaced += !!s->n;
	s->tid = tid;
	s->ts_ns = ts_ns;
	s->n = (uint32_t)n;
	memcpy(s->pcs, pcs, n * sizeof(*pcs));
}

size_t ustack_table__take(struct ustack_table *t, uint32_t tid, uint64_t ts_ns,
			  uint64_t *pcs, size_t max)
{
	struct ustack_slot *s = slot_of(t, tid);
	size_t n = s->n;

	if (!n || s->tid != tid || s->ts_ns != ts_ns)
		return 0;
	if (n > max)
		n = max;
	memcpy(pcs, s->pcs, n * sizeof(*pcs));
	s->n = 0;
	return n;
}

void ustack_table__free(struct ustack_table *t)
{
	free(t->slots);
	memset(t, 0, sizeof(*t));
}

/* ---- which stack ---- */

int stack_mode__parse(const char *s, enum stack_mode *mode)
{
	static const char *const names[] = {
		[STACK_AUTO] = "auto", [STACK_FP] = "fp", [STACK_DWARF] = "dwarf",
	};
	int i = str__index(s, names, sizeof(names) / sizeof(names[0]));

	if (i < 0)
		return i;
	*mode = (enum stack_mode)i;
	return 0;
}

/*
 * A frame-pointer walk through code that keeps no frame pointer follows
 * whatever the register holds: a null or kernel-range return address
 * past the probed entry point shows it went off the rails.
 */
static bool fp_broken(const uint64_t *fp, size_t n)
{
	size_t i;

	for (i = 1; i < n; i++)
		if (fp[i] < USER_ADDR_MIN || fp[i] >= USER_ADDR_END)
			return true;
	return false;
}

bool unwind__use_dwarf(enum stack_mode mode, const uint64_t *fp, size_t nfp,
		       size_t ndw)
{
	if (!ndw || mode == STACK_FP)
		return false;
	if (mode == STACK_DWARF || ndw > nfp)
		return true;
	return ndw > 2 && fp_broken(fp, nfp);
}
