/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * PyTorch's reserved bytes from the driver calls that make its segments,
 * between the hook's samples (model/torch.h). The hook is attached in
 * windows, so its reserved can be a period old; the segments come and go
 * through calls umtrace always sees: cuMemAlloc_v2/cuMemAlloc of whole
 * 2 MiB (every segment's rounding) and cuMemFree_v2/cuMemFree of one of
 * them, cuMemCreate of an expandable segment's page (2 MiB or 20 MiB) and
 * its cuMemRelease. (cuMemMap and cuMemUnmap of those pages are the same
 * bytes again: the pages are counted once, when made and released.)
 *
 * Per process, the driver's figure: the bytes of those segments still
 * held, from the model's table of them (a free names the handle, not the
 * size). Per device, the hook's reserved less that figure, its offset
 * (the segments made before umtrace started, those a lost record hid).
 *
 * The check, at each sample of a process that reports on one device with
 * the allocator's totals and made hook calls since its sample before: its
 * reserved less the offset must be the driver's figure at the sample's
 * time, or one the calls gave just after it (a sample read from the
 * kernel's table carries the clock of one of its last 16 hook calls):
 *
 *   agree     the offset holds. Confirmed when the hook's reserved moved
 *             since the sample before (the calls are the allocator's
 *             segments, as it counts them): a sample where neither moved
 *             says nothing, and leaves the state as it was.
 *   disagree  unconfirmed, and the offset taken afresh from this sample:
 *             the process makes segment-like calls the allocator does not
 *             count (NCCL's buffers, a cuMemAlloc of its own), or the
 *             table missed one (a lost record, a full table). Unconfirmed
 *             until a sample where both move alike again.
 *
 * Why this rule: a sample where neither figure moved cannot tell the
 * allocator's calls from another library's, so only a move the hook
 * counted alike confirms; and a disagreement stops the moves at once, as a
 * figure wrong by an uncounted buffer would stay wrong while it is held.
 *
 * While confirmed, reserved is the offset plus the driver's figure now: a
 * segment made or given back moves it at once. Until a sample disagrees,
 * a buffer the allocator does not count moves it too (at most a period).
 * A process on several devices is never moved (the calls do not say which
 * device).
 */
#ifndef UMTRACE_TORCH_SEG_H
#define UMTRACE_TORCH_SEG_H

#include <stdbool.h>
#include <stdint.h>
#include <linux/types.h>
#include "model/alloc_table.h"
#include "umtrace.h"

/* The driver's figures kept per process, to find a sample's among them. */
#define TORCH_SEG_LOG		64
/* Segments kept in the table, all processes together. */
#define TORCH_SEG_MAX		65536

/* The driver's figure after one of its calls. */
struct torch_seg_point {
	uint64_t ts_ns;			/* the call's return */
	uint64_t bytes;
};

/* A process's segments as its driver calls say. */
struct torch_seg_proc {
	uint64_t bytes;			/* held now */
	uint64_t seq;			/* calls that moved it; point seq is now */
	struct torch_seg_point log[TORCH_SEG_LOG];	/* point i at i % TORCH_SEG_LOG */
};

/* A device's reserved, checked against its process's driver figure. */
struct torch_seg_dev {
	bool anchored;			/* offset and point are set */
	bool confirmed;
	int64_t offset;			/* the hook's reserved - the driver's */
	uint64_t point;			/* the driver's point its last sample matched */
	uint64_t hook_reserved;		/* that sample's reserved */
	uint64_t peak;			/* the highest reserved the calls moved it to */
	bool ended;			/* its process exited: */
	uint64_t end_bytes;		/* the driver's figure then */
};

/*
 * A GPU call: its segment's bytes into p, or out of it (t: the segments
 * of every process). True if the driver's figure moved.
 */
bool torch_seg__call(struct alloc_table *t, struct torch_seg_proc *p,
		     const struct umt_call_rec *r);
/*
 * A sample of d's (reserved, at ts_ns), newer than the one before: the
 * check. p: its process's calls, NULL if none came.
 */
void torch_seg__sample(struct torch_seg_dev *d, const struct torch_seg_proc *p,
		       uint64_t ts_ns, uint64_t reserved);
/* d's reserved now, if its calls move it (*out); false if not. */
bool torch_seg__reserved(const struct torch_seg_dev *d, const struct torch_seg_proc *p,
			 uint64_t *out);
/* d's reserved now is the calls', not its last sample's. */
bool torch_seg__moved(const struct torch_seg_dev *d, const struct torch_seg_proc *p);
/* d's process has exited: keep the driver's figure (p: its calls, or NULL). */
void torch_seg__end(struct torch_seg_dev *d, const struct torch_seg_proc *p);

#endif /* UMTRACE_TORCH_SEG_H */
