/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* Host memory figures from /proc/meminfo. */
#ifndef UMTRACE_MEMINFO_H
#define UMTRACE_MEMINFO_H

#include <stdint.h>

struct numa_nodes;

struct meminfo {
	uint64_t total;		/* bytes */
	uint64_t available;
	uint64_t free;
	uint64_t file;		/* Active(file) + Inactive(file): 0 if not listed */
	uint64_t kreclaim;	/* KReclaimable: 0 if not listed */
};

/* 0 or -errno; a file missing a field gives -EINVAL. */
int meminfo__read(struct meminfo *m);
/* Parse meminfo text (for tests and recordings). */
int meminfo__parse(const char *text, struct meminfo *m);

/*
 * Host RAM only: /proc/meminfo less the NUMA nodes that are not host RAM
 * (the GPU's HBM on GH200, which MemAvailable includes). Their figures
 * come from each node's own meminfo: the global figures less theirs,
 * because on some hosts (this project's VMs) the nodes' figures do not
 * add up to the global ones. A node's share of MemAvailable is taken as
 * its free, file and reclaimable kernel pages: the kernel's formula also
 * keeps back its reserves and low watermarks, so the host figure errs
 * low by those, never high. nodes NULL or empty: meminfo__read.
 */
int meminfo__read_host(struct meminfo *m, const struct numa_nodes *nodes);
/* m less one node, given the text of its meminfo; -EINVAL if unreadable. */
int meminfo__subtract_node(struct meminfo *m, const char *node_text);

/*
 * The per-CPU free lists (/proc/zoneinfo pagesets): pages in them are
 * free but not in MemFree, and a list that runs empty refills from
 * MemFree, by at most batch << PCP_REFILL_SHIFT pages and never past its
 * high mark.
 */
struct pcp_info {
	uint64_t count;		/* bytes in the lists now */
	uint64_t high;		/* bytes they refill up to (their high marks now) */
	uint64_t refill;	/* bytes one refill of each list may take from MemFree */
	uint64_t low;		/* bytes, the zones' low watermarks (boosts included) */
};

/*
 * Since Linux 6.7 a refill is batch << alloc_factor, and alloc_factor
 * stops at CONFIG_PCP_BATCH_SCALE_MAX (5 by default, 6 at most); before,
 * it was batch.
 */
#define PCP_REFILL_SHIFT	6

/*
 * 0 or -errno; text is /proc/zoneinfo's. Zones of the nodes in nodes
 * (NULL: none) are left out, as their pages are not host RAM.
 */
int meminfo__parse_pcp(const char *text, uint64_t page_size, const struct numa_nodes *nodes,
		       struct pcp_info *p);
int meminfo__read_pcp(struct pcp_info *p, const struct numa_nodes *nodes);

#endif /* UMTRACE_MEMINFO_H */
