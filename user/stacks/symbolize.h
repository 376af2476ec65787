/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * user/stacks: a call's stack from addresses to names: symbolization
 * (symbolize*.c, over libdwfl), DWARF unwinding of the stack copied at a
 * call's entry (unwind.c), a call's stack whichever way it came
 * (callstack.c), and the set of weighted stacks every flamegraph is drawn
 * from (stackset.c). Uses lib/ and model/.
 */
/*
 * User stack addresses to function names, done while the process is alive
 * (libdwfl over /proc/PID/maps, files opened through /proc/PID/root so that
 * containers work). Results are cached per file, keyed by GNU build-id, so
 * a thousand workers of one image symbolize each address once.
 *
 * Not thread-safe: one symbolizer per thread.
 */
#ifndef UMTRACE_SYMBOLIZE_H
#define UMTRACE_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>
#include "model/frame.h"

/* The names in the frames it fills are valid until symbolizer__free. */
struct symbolizer;

struct sym_stats {
	uint64_t hits;		/* answered from the per-file cache */
	uint64_t misses;	/* looked up in the symbol table */
	uint64_t evictions;	/* cache entries dropped to stay under the cap */
	uint64_t reports;	/* reads of /proc/PID/maps */
};

#define SYM_CACHE_CAP_DEFAULT 65536

struct symbolizer *symbolizer__new(void);
/* The same with at most cache_cap per-file cache entries (at least 1). */
struct symbolizer *symbolizer__new_cap(size_t cache_cap);

/*
 * Symbolize addrs[0..n) of process pid, which must be alive the first time
 * it is asked about. Fills out[0..n) in every case. Returns 0, or -ESRCH
 * when nothing is known of pid (it is gone and was never seen; every frame
 * is then unknown), or another -errno. Addresses are looked up as given:
 * pass a return address minus 1 to name the calling function of a tail
 * call rather than whatever follows it.
 */
int symbolizer__resolve(struct symbolizer *s, uint32_t pid,
			const uint64_t *addrs, size_t n, struct sym_frame *out);

/*
 * The process exited or exec'ed: drop its mappings. Names already handed
 * out stay valid, and the per-file caches stay.
 */
void symbolizer__forget(struct symbolizer *s, uint32_t pid);

struct Dwfl;

/*
 * The libdwfl session over pid's mappings, for a DWARF unwinder to attach
 * its thread callbacks to (user/stacks/unwind.c): the same one names the frames,
 * so each file is opened and its CFI read once. Re-read from
 * /proc/PID/maps (10 times a second at most) when addr is in none of its
 * modules. Owned by the symbolizer: valid until symbolizer__forget(pid) or
 * symbolizer__free. NULL with errno set (ESRCH: gone, never seen).
 */
struct Dwfl *symbolizer__dwfl(struct symbolizer *s, uint32_t pid, uint64_t addr);

void symbolizer__stats(const struct symbolizer *s, struct sym_stats *st);
void symbolizer__free(struct symbolizer *s);

#endif /* UMTRACE_SYMBOLIZE_H */
