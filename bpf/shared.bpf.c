// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The definitions of what shared.bpf.h declares. */
#include "shared.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile bool filter_pids = false;
const volatile __u64 wakeup_bytes = 0;

__s64 open_windows;
__u64 rec_total;
__u64 rec_dropped;

struct windows_map windows SEC(".maps");
struct events_map events SEC(".maps");
struct traced_pids_map traced_pids SEC(".maps");
struct gpu_procs_map gpu_procs SEC(".maps");
