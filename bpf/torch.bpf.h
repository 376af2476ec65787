/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * PyTorch's CUDA caching allocator, from outside: torch.bpf.c keeps its
 * figures per process and device in its table of slots, fed by the hook
 * the allocator calls on every block allocation and free. The GPU
 * process's end (calls.bpf.c) sends each device's last figures and frees
 * its slots, so the table holds live processes.
 */
#ifndef UMTRACE_TORCH_BPF_H
#define UMTRACE_TORCH_BPF_H

#include "shared.bpf.h"

/*
 * The last figures of tgid's device, sent, and its slot freed: defined in
 * torch.bpf.c as a global function, verified once apart (the kernel's 6.1
 * verifier gave up on 16 devices' ways inlined into each exit program).
 * Called by the process's last thread, as it exits: current is it.
 */
int torch_final(__u32 tgid, __u32 device);

/* A process has ended: each device's last figures, then its slots go. */
static __always_inline void torch_forget(__u32 tgid, __u32 devs)
{
	__u32 i;

	for (i = 0; i < UMT_TORCH_MAX_DEVS; i++)
		if (devs & (1U << i))
			torch_final(tgid, i);
}

/*
 * The hook is attached in windows (user/attach/torch.c). A GPU call is the
 * cue that reserved may move, and keeps a window open: any process's, as
 * a job's first segment comes before its first hook call. Its time goes
 * in torch_cue_ns. While no window is open (torch_asleep, set by user
 * space) the first cue's record wakes the reader, so that a window opens
 * now, not at the next poll; the calls after it wait as others do.
 */
extern const volatile bool torch_cues;
extern __u64 torch_cue_ns;
extern bool torch_asleep;

/* A GPU call returned at now: true if its record should wake the reader. */
static __always_inline bool torch_cue(__u64 now)
{
	if (!torch_cues)
		return false;
	WRITE_ONCE(torch_cue_ns, now);
	if (!READ_ONCE(torch_asleep))
		return false;
	WRITE_ONCE(torch_asleep, false);
	return true;
}

#endif /* UMTRACE_TORCH_BPF_H */
