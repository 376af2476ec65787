// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The definitions of what shared.bpf.h declares. */
#include "shared.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile struct umt_trace_conf trace_conf;
struct umt_trace_state trace_state;

struct windows_map windows SEC(".maps");
struct events_map events SEC(".maps");
struct traced_pids_map traced_pids SEC(".maps");
struct gpu_procs_map gpu_procs SEC(".maps");
