/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A stack frame as names: what symbolization (stacks/) makes of an
 * address and what call sites, recordings and exporters carry. The
 * strings belong to whoever filled the frame (a symbolizer, a replay).
 */
#ifndef UMTRACE_FRAME_H
#define UMTRACE_FRAME_H

#include <stdint.h>

struct sym_frame {
	const char *func;	/* demangled name or NULL */
	const char *module;	/* "libcuda.so.1", "[vdso]", "[perf-map]", or NULL */
	uint64_t addr;		/* the address given */
	/*
	 * addr - function start when func is set; else, with module set,
	 * the offset within the module's file (module+0xOFFSET)
	 */
	uint64_t offset;
};

#endif /* UMTRACE_FRAME_H */
