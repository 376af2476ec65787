/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Call sites: GPU calls aggregated by their symbolized stack. Two calls
 * whose stacks name the same functions in the same order are one site,
 * whatever their addresses (ASLR, other processes of the same program).
 * Fed with records and their frames, from the ring buffer or a file alike.
 */
#ifndef UMTRACE_CALLSITES_H
#define UMTRACE_CALLSITES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "model/frame.h"
#include "umtrace.h"

#define CALLSITES_ANY_API UINT32_MAX

struct callsite {
	uint32_t id;		/* 1.., 0 means none */
	/*
	 * "frame;frame;..." innermost first, each frame its function's name
	 * (or module+0xOFFSET), with a ';' in a name written ':' so that the
	 * key splits back into its frames.
	 */
	char *key;
	char **frames;		/* one printable name per frame */
	size_t n_frames;
	/*
	 * The entry point its calls reached. A site is its key and this: a
	 * stack whose frames could not be named says nothing of which API it
	 * reached, so calls of two APIs must not share it.
	 * CALLSITES_ANY_API: the overflow site, whose calls reached any.
	 */
	uint32_t api;
	uint64_t calls;
	uint64_t failed;
	uint64_t size_bytes;	/* requested by successful calls */
	uint64_t host_taken;
	uint64_t device_taken;	/* bytes from NUMA nodes that are not host RAM */
	uint64_t held_count;	/* its allocations still outstanding */
	uint64_t held_host;
	uint64_t held_size;	/* GPU bytes of its allocations still outstanding */
	uint64_t exit_count;	/* never freed: released when the process exited */
	uint64_t exit_host;
	uint64_t exit_size;	/* GPU bytes of those */
	uint64_t first_ns, last_ns;
	uint32_t pids[4];	/* the first few processes seen at this site */
	size_t n_pids;
	char comm[TASK_COMM_LEN];
};

struct callsites {
	void *tree;		/* tsearch(3) by key */
	struct callsite **by_id;	/* by_id[id - 1] */
	size_t n, cap;
	size_t max_sites;	/* past it, new stacks go to one overflow site */
	uint64_t overflowed;	/* calls charged to the overflow site */
};

void callsites__init(struct callsites *cs, size_t max_sites);
/* Charge r to the site of its frames; returns the site id (0: no memory). */
uint32_t callsites__add(struct callsites *cs, const struct umt_call_rec *r,
			const struct sym_frame *frames, size_t n, uint64_t page_size);
struct callsite *callsites__get(const struct callsites *cs, uint32_t id);
/* An allocation of site id left the table: freed, or its process exited. */
void callsites__release(struct callsites *cs, uint32_t id, uint64_t host_bytes,
			uint64_t size, bool at_exit);
/* Sites by host bytes taken, most first; the caller frees the array. */
struct callsite **callsites__sorted(const struct callsites *cs);
void callsites__free(struct callsites *cs);

/* "func+0x1c (module)", "module+0x1234" or "[unknown]" into buf. */
const char *callsites__frame_name(const struct sym_frame *f, char *buf, size_t len);

#endif /* UMTRACE_CALLSITES_H */
