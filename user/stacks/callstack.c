// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <string.h>
#include "stacks/callstack.h"
#include "lib/log.h"

/* Calls in flight at once whose DWARF stack waits for their record. */
#define PENDING_STACKS 1024

int callstack__init(struct callstack *cs, enum stack_mode mode)
{
	memset(cs, 0, sizeof(*cs));
	cs->mode = mode;
	cs->sym = symbolizer__new();
	if (!cs->sym)
		return -errno;
	if (mode == STACK_FP)
		return 0;
	cs->uw = unwinder__new(cs->sym);
	if (!cs->uw || ustack_table__init(&cs->pending, PENDING_STACKS)) {
		callstack__free(cs);
		return -ENOMEM;
	}
	return 0;
}

uint32_t callstack__ustack_bytes(const struct callstack *cs)
{
	return cs->uw ? UMT_USTACK_MAX : 0;
}

/* Unwound now, while the process surely lives; used when its call ends. */
void callstack__ustack(struct callstack *cs, const struct umt_ustack_rec *r)
{
	uint64_t pcs[UMT_STACK_MAX];
	int n;

	if (!cs->uw)
		return;
	n = unwinder__unwind(cs->uw, r, pcs, UMT_STACK_MAX);
	if (n > 0)
		ustack_table__put(&cs->pending, r->tid, r->ts_ns, pcs, n);
}

/*
 * Return addresses point after the call: look up the byte before, or a
 * call that ends its function would be named after the next one. The
 * first frame is the probed entry point itself.
 */
static void lookup_addrs(const uint64_t *stack, size_t n, uint64_t *addrs)
{
	size_t i;

	for (i = 0; i < n; i++)
		addrs[i] = i && stack[i] ? stack[i] - 1 : stack[i];
}

size_t callstack__resolve(struct callstack *cs, const struct umt_call_rec *r,
			  struct sym_frame *frames)
{
	uint64_t addrs[UMT_STACK_MAX], fp[UMT_STACK_MAX], dwarf[UMT_STACK_MAX];
	size_t i, n = r->stack_len / sizeof(r->stack[0]), ndw = 0;

	if (n > UMT_STACK_MAX)
		n = UMT_STACK_MAX;
	for (i = 0; i < n; i++)
		fp[i] = r->stack[i];
	if (cs->uw)
		ndw = ustack_table__take(&cs->pending, r->tid, r->ts_ns, dwarf, UMT_STACK_MAX);
	if (unwind__use_dwarf(cs->mode, fp, n, ndw)) {
		lookup_addrs(dwarf, ndw, addrs);
		n = ndw;
		cs->dwarf_used++;
	} else {
		lookup_addrs(fp, n, addrs);
	}
	symbolizer__resolve(cs->sym, r->pid, addrs, n, frames);
	return n;
}

void callstack__forget(struct callstack *cs, uint32_t pid)
{
	symbolizer__forget(cs->sym, pid);
}

void callstack__log_stats(const struct callstack *cs)
{
	struct unwind_stats st;
	struct sym_stats ss;

	if (cs->sym) {
		/* Evictions say the per-file cache's cap is too small for the job. */
		symbolizer__stats(cs->sym, &ss);
		vlog("symbols: %llu frames answered from the cache, %llu looked up, %llu "
		     "evicted, %llu reads of a process's maps",
		     (unsigned long long)ss.hits, (unsigned long long)ss.misses,
		     (unsigned long long)ss.evictions, (unsigned long long)ss.reports);
	}
	if (!cs->uw)
		return;
	unwinder__stats(cs->uw, &st);
	vlog("stacks: %llu unwound with DWARF (%llu gave nothing), %.1f frames and "
	     "%.1f us each, %zu bytes per call in the ring buffer; %llu calls "
	     "reported with them, %llu lost their slot",
	     (unsigned long long)st.stacks, (unsigned long long)st.failed,
	     st.stacks ? (double)st.frames / st.stacks : 0.0,
	     st.stacks ? st.ns / 1e3 / st.stacks : 0.0,
	     sizeof(struct umt_ustack_rec), (unsigned long long)cs->dwarf_used,
	     (unsigned long long)cs->pending.replaced);
}

void callstack__free(struct callstack *cs)
{
	ustack_table__free(&cs->pending);
	unwinder__free(cs->uw);
	symbolizer__free(cs->sym);
	memset(cs, 0, sizeof(*cs));
}
