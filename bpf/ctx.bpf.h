/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Reading the context of a page or GPU call event: what differs between
 * architectures stays here, so the programs carry no #ifdef.
 */
#ifndef UMTRACE_CTX_BPF_H
#define UMTRACE_CTX_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

/*
 * gfp bits that only an allocation allowed to sleep or do I/O carries
 * (__GFP_IO, __GFP_FS, __GFP_DIRECT_RECLAIM): the same values from Linux
 * 4.4 to 6.18, where they became an anonymous enum CO-RE cannot name.
 */
#define UMT_GFP_MOVABLE		0x08U	/* user data pages; page tables are not */
#define UMT_GFP_IO		0x40U
#define UMT_GFP_FS		0x80U
#define UMT_GFP_DIRECT_RECLAIM	0x400U

/* task->flags of a kernel thread (PF_KTHREAD, a macro BTF does not carry). */
#define UMT_PF_KTHREAD		0x00200000U

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

#define UMT_EM_MACHINE	62	/* EM_X86_64 */

/*
 * The user registers in DWARF numbering (the x86-64 psABI's: rax, rdx,
 * rcx, rbx, rsi, rdi, rbp, rsp, r8-r15, then rip as the return address
 * column), so user space hands them to the unwinder as they are. Only
 * rsp, rip and the callee-saved ones matter past the first frame; the
 * rest are cheap and keep the layout the psABI's. Returns how many.
 */
static __always_inline __u32 umt_user_regs(struct pt_regs *ctx, __u64 *regs)
{
	regs[0] = ctx->ax;
	regs[1] = ctx->dx;
	regs[2] = ctx->cx;
	regs[3] = ctx->bx;
	regs[4] = ctx->si;
	regs[5] = ctx->di;
	regs[6] = ctx->bp;
	regs[7] = ctx->sp;
	regs[8] = ctx->r8;
	regs[9] = ctx->r9;
	regs[10] = ctx->r10;
	regs[11] = ctx->r11;
	regs[12] = ctx->r12;
	regs[13] = ctx->r13;
	regs[14] = ctx->r14;
	regs[15] = ctx->r15;
	regs[16] = ctx->ip;
	return 17;
}

#elif defined(__TARGET_ARCH_arm64)

/* At a function's first instruction the return address is in x30. */
static __always_inline __u64 umt_entry_return_addr(struct pt_regs *ctx)
{
	return PT_REGS_RET(ctx);
}

#define UMT_EM_MACHINE	183	/* EM_AARCH64 */

/*
 * The user registers in DWARF numbering (AAPCS64: x0-x30, then sp as 31;
 * pc has no DWARF number and travels on its own). x19-x30 and sp are what
 * unwinding needs; x0-x18 come along to keep the numbering plain. A
 * uprobe's context is the user_pt_regs at the top of struct pt_regs.
 */
static __always_inline __u32 umt_user_regs(struct pt_regs *ctx, __u64 *regs)
{
	const struct user_pt_regs *u = (const void *)ctx;
	int i;

#pragma unroll
	for (i = 0; i < 31; i++)
		regs[i] = u->regs[i];
	regs[31] = u->sp;
	return 32;
}

#else
#error "umtrace supports __TARGET_ARCH_x86 and __TARGET_ARCH_arm64"
#endif

#endif /* UMTRACE_CTX_BPF_H */
