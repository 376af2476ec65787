// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The cheapest possible mm_page_alloc program: it does nothing. Whatever
 * it costs is the floor any BPF page tracer pays on this machine (the
 * tracepoint's BPF dispatch), against which umtrace's own cost is judged.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Kernel program names keep 15 characters: this one fits whole. */
SEC("tp_btf/mm_page_alloc")
int BPF_PROG(empty_alloc, struct page *page, unsigned int order, gfp_t gfp)
{
	return 0;
}
