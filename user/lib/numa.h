/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * NUMA nodes whose memory is not host RAM. On GH200 the GPU's HBM is
 * onlined as a node of its own: pages the driver or the kernel put there
 * must never be counted as host memory. The kernel side tells a page's
 * node from the top bits of its flags (64 bit, SPARSEMEM_VMEMMAP: the node
 * number is the topmost CONFIG_NODES_SHIFT bits), so it needs the kernel's
 * configuration too.
 */
#ifndef UMTRACE_NUMA_H
#define UMTRACE_NUMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "umtrace.h"

struct numa_nodes {
	uint64_t device[UMT_MAX_NODES / 64];	/* a bit a node */
	unsigned int n_device;
	unsigned int flags_shift;	/* where page flags keep the node; 0: unknown */
};

/*
 * "1,3-4" into bits; "none" is no node. 0, or -EINVAL with the reason in
 * why.
 */
int numa__parse_list(const char *s, uint64_t *bits, char *why, size_t len);
/* Is node n set in bits? */
bool numa__has(const uint64_t *bits, unsigned int n);
/* 0, or -ENOENT with the reason if this host lacks a node of bits. */
int numa__check_online(const uint64_t *bits, char *why, size_t len);
/*
 * From the text of a kernel config: the shift of the node number in page
 * flags, 0 when the node is not there (no NUMA, not SPARSEMEM_VMEMMAP).
 */
unsigned int numa__flags_shift(const char *config);
/*
 * The device nodes: spec ("auto", "none" or a list), where auto is every
 * node with memory and no CPU while NVIDIA's driver is loaded. 0, or
 * -errno with the reason in why (a list naming no node is an error; auto
 * finding nodes on a kernel whose config cannot be read is one too).
 */
int numa__device_nodes(const char *spec, struct numa_nodes *out, char *why, size_t len);

/* Node ids the kernel may use: the highest possible one + 1; 1 if unknown. */
unsigned int numa__possible(void);

/* The device nodes as a list, "1,3-4". */
const char *numa__format(const struct numa_nodes *n, char *buf, size_t len);

#endif /* UMTRACE_NUMA_H */
