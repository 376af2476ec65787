/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Reading the context of a page or GPU call event: what differs between
 * architectures stays here, so the programs carry no #ifdef.
 */
#ifndef UMTRACE_CTX_BPF_H
#define UMTRACE_CTX_BPF_H

/*
 * gfp bits that only an allocation allowed to sleep or do I/O carries
 * (__GFP_IO, __GFP_FS, __GFP_DIRECT_RECLAIM): the same values from Linux
 * 4.4 to 6.18, where they became an anonymous enum CO-RE cannot name.
 */
#define UMT_GFP_IO		0x40U
#define UMT_GFP_FS		0x80U
#define UMT_GFP_DIRECT_RECLAIM	0x400U

/*
 * An allocation made from an interrupt runs on whatever task it
 * interrupted and must not be charged to that task's GPU call. Interrupts
 * cannot sleep, so they never pass these bits; every allocation a driver
 * or a page fault makes for its caller passes at least one (transparent
 * huge pages drop direct reclaim but keep I/O and FS). The preempt count
 * would say it directly, but x86 keeps it in a per-CPU variable that a BPF
 * program can only reach through kallsyms data symbols, which many
 * kernels (this one too) leave out.
 */
static __always_inline bool umt_gfp_from_task(unsigned int gfp)
{
	return gfp & (UMT_GFP_IO | UMT_GFP_FS | UMT_GFP_DIRECT_RECLAIM);
}

#if defined(__TARGET_ARCH_x86)

/* At a function's first instruction the return address is at [sp]. */
static __always_inline __u64 umt_entry_return_addr(struct pt_regs *ctx)
{
	__u64 ra = 0;

	bpf_probe_read_user(&ra, sizeof(ra), (void *)PT_REGS_SP(ctx));
	return ra;
}

#elif defined(__TARGET_ARCH_arm64)

/* At a function's first instruction the return address is in x30. */
static __always_inline __u64 umt_entry_return_addr(struct pt_regs *ctx)
{
	return PT_REGS_RET(ctx);
}

#else
#error "umtrace supports __TARGET_ARCH_x86 and __TARGET_ARCH_arm64"
#endif

#endif /* UMTRACE_CTX_BPF_H */
