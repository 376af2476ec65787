/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The fake NVIDIA kernel driver's interface (tests/fakedriver/fakenv.c):
 * shared by the module, the fake libcuda and the guests' workloads. Plain
 * types and linux/ioctl.h only: user space and the kernel both read it.
 *
 * /dev/fakenv takes the ioctls below; /proc/fakenv prints the module's own
 * counters, one "name value" a line, in base pages of the kernel's size
 * (its first line, page_size).
 */
#ifndef FAKENV_UAPI_H
#define FAKENV_UAPI_H

#include <linux/ioctl.h>

#define FAKENV_DEV	"/dev/fakenv"
#define FAKENV_PROC	"/proc/fakenv"

/* FAKENV_ALLOC's flags */
#define FAKENV_F_FAIL_ONCE	0x1	/* the first page size "fails" half way */

/*
 * An allocation of @size bytes (rounded up to the page size chosen),
 * taken in the caller as nv_alloc_system_pages does: pages of 2 MiB when
 * @size is a multiple of 2 MiB, else of 64 KiB when a multiple of that,
 * else of the kernel's size; on node @node with __GFP_THISNODE, or
 * anywhere when @node is -1. Out: the handle for FAKENV_FREE, the order
 * kept, the base pages taken from the page allocator (new), served from
 * the pool (pooled), and taken and freed again inside the call (retried).
 */
struct fakenv_alloc {
	unsigned long long size;
	int node;
	unsigned int flags;
	unsigned long long handle;
	unsigned long long pages_new;
	unsigned long long pages_pooled;
	unsigned long long pages_retried;
	unsigned int order;
	unsigned int pad;
};

/*
 * A GPU fault serviced for the caller by the "UVM GPU0 BH" kernel thread:
 * with the caller's memory cgroup active (set_active_memcg) and no mm it
 * takes @kernel_pages pages of its own with __GFP_ACCOUNT, held until the
 * caller closes the device; then, the caller's mm adopted too
 * (kthread_use_mm), it writes every page of [addr, addr + len), faulting
 * them into the caller's mapping. Out: the pages written.
 */
struct fakenv_bh_fault {
	unsigned long long addr;
	unsigned long long len;
	unsigned long long kernel_pages;
	unsigned long long pages_faulted;
};

#define FAKENV_IOC_MAGIC	'N'
#define FAKENV_ALLOC	_IOWR(FAKENV_IOC_MAGIC, 1, struct fakenv_alloc)
#define FAKENV_FREE	_IOW(FAKENV_IOC_MAGIC, 2, unsigned long long)
#define FAKENV_BH_FAULT	_IOWR(FAKENV_IOC_MAGIC, 3, struct fakenv_bh_fault)

#endif /* FAKENV_UAPI_H */
