// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "lib/sys.h"
#include "model/cuda_api.h"
#include "attach/elf_syms.h"
#include "cookie.h"
#include "attach/torch.h"
#include "lib/escape.h"
#include "lib/log.h"
#include "lib/procfs.h"
#include "attach/probes.h"
#include "umtrace.h"
#include "umtrace.skel.h"
#include "attach/uprobe_multi.h"

/* Only x86 has a tracepoint that gives a user page fault's address. */
#if defined(__x86_64__)
#define HAVE_FAULT_ADDRESS_TRACEPOINT true
#else
#define HAVE_FAULT_ADDRESS_TRACEPOINT false
#endif

#define CAP_SYS_ADMIN_BIT	21
#define CAP_PERFMON_BIT		38
#define CAP_BPF_BIT		39

static uint64_t effective_caps(void)
{
	char buf[32];

	if (proc__status(0, "CapEff", buf, sizeof(buf)))
		return 0;
	return strtoull(buf, NULL, 16);
}

static bool has_caps(void)
{
	uint64_t c = effective_caps();

	if (c & (1ULL << CAP_SYS_ADMIN_BIT))
		return true;
	return (c & (1ULL << CAP_BPF_BIT)) && (c & (1ULL << CAP_PERFMON_BIT));
}

int probes__check_env(void)
{
	if (!has_caps()) {
		elog("permission denied: run as root, or with CAP_BPF and CAP_PERFMON");
		return -EPERM;
	}
	if (access("/sys/kernel/btf/vmlinux", R_OK)) {
		elog("this kernel has no BTF (/sys/kernel/btf/vmlinux): it must be built with CONFIG_DEBUG_INFO_BTF=y");
		return -ENOTSUP;
	}
	if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) != 1) {
		elog("kernel too old: no BPF ring buffer (needs Linux 5.8 or later)");
		return -ENOTSUP;
	}
	if (libbpf_probe_bpf_map_type(BPF_MAP_TYPE_TASK_STORAGE, NULL) != 1) {
		elog("kernel too old: no BPF task storage (needs Linux 5.11 or later)");
		return -ENOTSUP;
	}
	if (libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE,
				    BPF_FUNC_get_attach_cookie, NULL) != 1) {
		elog("kernel too old: no BPF attach cookies (needs Linux 5.15 or later)");
		return -ENOTSUP;
	}
	return 0;
}

static uint64_t ringbuf_size(uint64_t want)
{
	uint64_t sz = page__size();

	while (sz < want && sz < (1ULL << 30))
		sz <<= 1;
	return sz;
}

/*
 * The running kernel has this tracepoint (tp_btf needs its BTF typedef).
 * btf: the kernel's, parsed once per load (several MB); NULL: none.
 */
static bool kernel_has_tracepoint(const struct btf *btf, const char *name)
{
	char type[128];

	if (!btf)
		return false;
	snprintf(type, sizeof(type), "btf_trace_%s", name);
	return btf__find_by_name_kind(btf, type, BTF_KIND_TYPEDEF) >= 0;
}

/*
 * Compaction's frees are no task's own, and the free pages it isolates
 * leave the free lists with no mm_page_alloc. A kernel built without
 * CONFIG_COMPACTION has none of these tracepoints; fast isolation has
 * one only since 6.5.
 */
static void set_compaction(struct umtrace_bpf *skel, const struct btf *btf)
{
	bool compaction = kernel_has_tracepoint(btf, "mm_compaction_begin");

	bpf_program__set_autoload(skel->progs.compaction_begin, compaction);
	bpf_program__set_autoload(skel->progs.compaction_end, compaction);
	bpf_program__set_autoload(skel->progs.compaction_isolate,
				  kernel_has_tracepoint(btf, "mm_compaction_isolate_freepages"));
	bpf_program__set_autoload(skel->progs.compaction_fast_isolate,
				  kernel_has_tracepoint(btf, "mm_compaction_fast_isolate_freepages"));
}

static void set_guard(struct umtrace_bpf *skel, const struct guard_kcfg *g)
{
	int cpus = libbpf_num_possible_cpus();

	skel->rodata->guard_conf.page_shift = page__shift();
	bpf_program__set_autoload(skel->progs.guard_find_zones, g && g->on);
	bpf_program__set_autoload(skel->progs.guard_look, g && g->on);
	if (!g)
		return;
	skel->rodata->guard_conf.on = g->on;
	skel->rodata->guard_conf.dry_run = g->dry_run;
	skel->rodata->meter_free_only = g->metric_free;
	skel->rodata->guard_conf.scope = g->scope;
	skel->rodata->guard_conf.self = (uint32_t)getpid();
	skel->rodata->guard_conf.nr_cpus = cpus > 0 ? (uint32_t)cpus : 1;
	skel->rodata->guard_conf.cost_apis = g->cost_apis;
}

int probes__load(struct probes *p, const struct probe_cfg *cfg)
{
	struct umtrace_bpf *skel;
	struct btf *kbtf;
	int err;

	memset(p, 0, sizeof(*p));
	skel = umtrace_bpf__open();
	if (!skel) {
		err = -errno;
		elog("cannot open the BPF object: %s", strerror(errno));
		return err;
	}
	p->multi = uprobe_multi__supported() && !getenv("UMTRACE_NO_UPROBE_MULTI");
	if (p->multi) {
		bpf_program__set_expected_attach_type(skel->progs.gpu_call_entry,
						      UMT_BPF_TRACE_UPROBE_MULTI);
		bpf_program__set_expected_attach_type(skel->progs.gpu_call_return,
						      UMT_BPF_TRACE_UPROBE_MULTI);
		bpf_program__set_expected_attach_type(skel->progs.torch_hook,
						      UMT_BPF_TRACE_UPROBE_MULTI);
		bpf_program__set_expected_attach_type(skel->progs.dl_debug_state,
						      UMT_BPF_TRACE_UPROBE_MULTI);
	}
	bpf_program__set_autoload(skel->progs.torch_hook, cfg->torch);
	p->torch_windowed = cfg->torch && cfg->torch_windowed;
	skel->rodata->torch_cues = p->torch_windowed;
	skel->rodata->torch_budget = p->torch_windowed ? cfg->torch_budget : 0;
	skel->rodata->torch_test_cpu = cfg->torch && torch_hook__test_cpu();
	bpf_program__set_autoload(skel->progs.dl_debug_state, cfg->lib_events);
	bpf_program__set_autoload(skel->progs.lib_exec, cfg->lib_events);
	vlog("uprobes: %s", p->multi ? "one multi-uprobe link per library" :
	     "one perf event per entry point");
	skel->rodata->trace_conf.filter_pids = cfg->filter_pids;
	skel->rodata->ustack_bytes = cfg->ustack_bytes < UMT_USTACK_MAX ?
				     cfg->ustack_bytes : UMT_USTACK_MAX;
	bpf_map__set_max_entries(skel->maps.events, ringbuf_size(cfg->ringbuf_bytes));
	skel->rodata->count_outside = cfg->count_outside;
	skel->rodata->count_kthreads = cfg->count_kthreads;
	skel->rodata->skip_softirq_frees = cfg->skip_softirq_frees;
	bpf_program__set_autoload(skel->progs.softirq_entry, cfg->skip_softirq_frees);
	bpf_program__set_autoload(skel->progs.softirq_exit, cfg->skip_softirq_frees);
	if (cfg->nodes && cfg->nodes->n_device) {
		skel->rodata->any_device_node = true;
		skel->rodata->node_flags_shift = cfg->nodes->flags_shift;
		memcpy((void *)skel->rodata->device_nodes, cfg->nodes->device,
		       sizeof(cfg->nodes->device));
	}
	if (cfg->batch_wakeups)
		skel->rodata->trace_conf.wakeup_bytes = ringbuf_size(cfg->ringbuf_bytes) / 8;
	skel->rodata->ustack_max_backlog = ringbuf_size(cfg->ringbuf_bytes) / 4;
	bpf_program__set_autoload(skel->progs.task_fork, cfg->filter_pids);
	/*
	 * Enabling page_fault_user puts every user page fault of the host on
	 * the traced path: 0.3 to 0.5 us each in a fault storm here.
	 */
	skel->rodata->track_managed = cfg->managed_faults && HAVE_FAULT_ADDRESS_TRACEPOINT;
	bpf_program__set_autoload(skel->progs.managed_fault,
				  cfg->managed_faults && HAVE_FAULT_ADDRESS_TRACEPOINT);
	if (cfg->managed_faults && !HAVE_FAULT_ADDRESS_TRACEPOINT)
		wlog("--managed-faults: this architecture has no tracepoint with the fault address");
	bpf_program__set_autoload(skel->progs.proc_page_alloc, cfg->proc_pages);
	bpf_program__set_autoload(skel->progs.proc_page_free, cfg->proc_pages);
	bpf_program__set_autoload(skel->progs.proc_exec, cfg->proc_pages);
	set_guard(skel, cfg->guard);
	bpf_program__set_autoload(skel->progs.direct_reclaim,
				  cfg->guard || cfg->count_outside);
	bpf_program__set_autoload(skel->progs.kswapd_wake, !!cfg->guard);
	bpf_program__set_autoload(skel->progs.rss_stat, cfg->count_kthreads);
	bpf_program__set_autoload(skel->progs.driver_shrink_start, cfg->driver_pool);
	bpf_program__set_autoload(skel->progs.driver_shrink_end, cfg->driver_pool);
	bpf_program__set_autoload(skel->progs.task_rename,
				  cfg->guard && cfg->guard->scope == UMT_SCOPE_COMM);
	kbtf = btf__load_vmlinux_btf();
	bpf_program__set_autoload(skel->progs.task_prepare_exec,
				  kernel_has_tracepoint(kbtf, "sched_prepare_exec"));
	set_compaction(skel, kbtf);
	btf__free(kbtf);

	err = umtrace_bpf__load(skel);
	if (err) {
		elog("cannot load the BPF programs: %s%s", strerror(-err),
		     log_verbose ? "" : " (run with -v for the verifier's log)");
		umtrace_bpf__destroy(skel);
		return err;
	}
	p->skel = skel;
	p->leave = cfg->leave;
	return 0;
}

static int keep_link(struct probes *p, struct bpf_link *link)
{
	if (p->n_links == p->cap_links) {
		size_t cap = p->cap_links ? p->cap_links * 2 : 64;
		struct bpf_link **v = realloc(p->links, cap * sizeof(*v));

		if (!v) {
			bpf_link__destroy(link);
			return -ENOMEM;
		}
		p->links = v;
		p->cap_links = cap;
	}
	p->links[p->n_links++] = link;
	return 0;
}

static int attach_prog(struct probes *p, struct bpf_program *prog)
{
	struct bpf_link *link;

	if (!bpf_program__autoload(prog))
		return 0;
	link = bpf_program__attach(prog);
	if (!link) {
		int err = -errno;

		elog("cannot attach %s: %s", bpf_program__name(prog), strerror(-err));
		return err;
	}
	return keep_link(p, link);
}

int probes__attach_kernel(struct probes *p)
{
	struct bpf_program *prog;
	int err;

	bpf_object__for_each_program(prog, p->skel->obj) {
		if (bpf_program__type(prog) == BPF_PROG_TYPE_KPROBE)
			continue;	/* the uprobes go per library */
		if (bpf_program__type(prog) == BPF_PROG_TYPE_RAW_TRACEPOINT)
			continue;	/* run by user space, never attached */
		if (p->leave && p->leave(p, prog))
			continue;	/* the caller attaches it (the guard's arming) */
		err = attach_prog(p, prog);
		if (err)
			return err;
	}
	return 0;
}

static int attach_uprobe(struct probes *p, struct bpf_program *prog, const char *path,
			 uint64_t off, uint64_t cookie, bool ret)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = cookie, .retprobe = ret);
	struct bpf_link *link;

	link = bpf_program__attach_uprobe_opts(prog, -1, path, off, &opts);
	if (!link)
		return -errno;
	return keep_link(p, link);
}

static int keep_multi_fd(struct probes *p, int fd)
{
	if (p->n_multi == p->cap_multi) {
		size_t cap = p->cap_multi ? p->cap_multi * 2 : 8;
		int *v = realloc(p->multi_fds, cap * sizeof(*v));

		if (!v) {
			close(fd);
			return -ENOMEM;
		}
		p->multi_fds = v;
		p->cap_multi = cap;
	}
	p->multi_fds[p->n_multi++] = fd;
	return 0;
}

/*
 * One program at n offsets of a file: one multi-uprobe link where the
 * kernel has them, else a perf-event uprobe each.
 */
static int attach_at(struct probes *p, struct bpf_program *prog, const char *path,
		     const uint64_t *offs, const uint64_t *cookies, size_t n, bool ret)
{
	size_t i;
	int fd, err;

	if (p->multi) {
		fd = uprobe_multi__attach(bpf_program__fd(prog), path, offs, cookies, n, ret);
		return fd < 0 ? fd : keep_multi_fd(p, fd);
	}
	for (i = 0; i < n; i++) {
		err = attach_uprobe(p, prog, path, offs[i], cookies[i], ret);
		if (err)
			return err;
	}
	return 0;
}

int probes__attach_lib(struct probes *p, const char *file, const char *name, bool discovered)
{
	const char *names[UMT_API__COUNT];
	uint64_t offs[UMT_API__COUNT], at[UMT_API__COUNT], cookies[UMT_API__COUNT];
	const char *why;
	unsigned int i;
	size_t n = 0;
	int found, err;

	for (i = 0; i < UMT_API__COUNT; i++)
		names[i] = cuda_api__name(i);
	found = elf_syms__resolve(file, names, UMT_API__COUNT, offs, &why);
	/* Found in a process that has exited (or a container gone) since. */
	if (found == -ENOENT && discovered) {
		vlog("%s: %s", name, why);
		return found;
	}
	if (found < 0) {
		elog("%s: %s", name, why);
		return found;
	}
	for (i = 0; i < UMT_API__COUNT; i++) {
		if (!offs[i]) {
			vlog("%s: no %s", name, names[i]);
			continue;
		}
		if (elf_syms__dup_offset(offs, i))
			continue;
		at[n] = offs[i];
		cookies[n++] = cuda_api__get(i)->cookie;
	}
	if (!n)
		return 0;
	err = attach_at(p, p->skel->progs.gpu_call_entry, file, at, cookies, n, false);
	if (!err)
		err = attach_at(p, p->skel->progs.gpu_call_return, file, at, cookies, n, true);
	if (err) {
		elog("%s: cannot attach uprobes: %s", name, strerror(-err));
		return err;
	}
	vlog("%s: %zu of %d entry points probed", name, n, UMT_API__COUNT);
	return (int)n;
}

#define LOADER_HOOK "_dl_debug_state"

int probes__attach_loader(struct probes *p, const char *path)
{
	struct bpf_program *prog = p->skel->progs.dl_debug_state;
	struct elf_sym_hit hits[4];
	uint64_t cookie = 0;
	const char *why;
	int found, i, err;

	if (!bpf_program__autoload(prog))
		return 0;
	found = elf_syms__find_prefix(path, LOADER_HOOK, hits, 4, &why);
	for (i = 0; i < found; i++)
		if (!strcmp(hits[i].name, LOADER_HOOK))
			break;
	if (found < 0 && found != -ENOENT)
		return found;
	if (found <= 0 || i == found)
		return 0;
	/* As the entry points: a perf-event uprobe needs CAP_SYS_ADMIN, dropped by now. */
	err = attach_at(p, prog, path, &hits[i].offset, &cookie, 1, false);
	return err ? err : 1;
}

int probes__add_pid(struct probes *p, pid_t pid)
{
	__u32 key = (__u32)pid;
	__u8 one = 1;

	if (bpf_map__update_elem(p->skel->maps.traced_pids, &key, sizeof(key),
				 &one, sizeof(one), BPF_ANY))
		return -errno;
	return 0;
}

int probes__outside_pages(const struct probes *p, uint32_t pid,
			  uint64_t *taken, uint64_t *freed)
{
	struct umt_gpu_proc v;

	if (bpf_map__lookup_elem(p->skel->maps.gpu_procs, &pid, sizeof(pid),
				 &v, sizeof(v), 0))
		return -errno;
	*taken = v.outside_alloc;
	*freed = v.outside_freed;
	return 0;
}

int probes__events_fd(const struct probes *p)
{
	return bpf_map__fd(p->skel->maps.events);
}

int probes__managed_fd(const struct probes *p)
{
	if (!p->skel || !p->skel->rodata->track_managed)
		return -1;
	return bpf_map__fd(p->skel->maps.managed_allocs);
}

const struct umt_torch_slot *probes__torch_slots(const struct probes *p)
{
	if (!p->skel || !bpf_program__autoload(p->skel->progs.torch_hook))
		return NULL;
	return p->skel->data_torch->torch_slots;
}

int probes__kthreads_fd(const struct probes *p)
{
	if (!p->skel || !p->skel->rodata->count_kthreads)
		return -1;
	return bpf_map__fd(p->skel->maps.kthread_pages);
}

/* The driver's modules: the GPU driver proper keeps the page pool. */
static const char *const driver_modules[] = { "nvidia" };
#define N_DRIVER_MODULES (sizeof(driver_modules) / sizeof(driver_modules[0]))

int probes__driver_find(struct probes *p)
{
	uint64_t ranges[UMT_DRIVER_RANGES][2] = {};
	size_t i;
	int n;

	if (!p->skel || !bpf_program__autoload(p->skel->progs.driver_shrink_start))
		return 0;
	for (i = 0; i < N_DRIVER_MODULES; i++)
		if (proc__module_loaded(driver_modules[i]))
			break;
	if (i == N_DRIVER_MODULES)
		return 0;
	n = proc__module_text(driver_modules, N_DRIVER_MODULES, ranges,
			      UMT_DRIVER_RANGES);
	if (n <= 0)
		return n;
	memcpy((void *)p->skel->bss->driver_text, ranges, sizeof(ranges));
	vlog("the driver's page pool: its shrinkers in %d module%s", n, n == 1 ? "" : "s");
	return n;
}

bool probes__driver_shrunk(const struct probes *p, uint64_t *pages)
{
	if (!p->skel || !bpf_program__autoload(p->skel->progs.driver_shrink_start) ||
	    !p->skel->bss->driver_text[0][1])
		return false;
	*pages = __atomic_load_n(&p->skel->bss->driver_shrunk_pages, __ATOMIC_RELAXED);
	return true;
}

int probes__gpu_memcgs_fd(const struct probes *p)
{
	if (!p->skel || !p->skel->rodata->count_kthreads)
		return -1;
	return bpf_map__fd(p->skel->maps.gpu_memcgs);
}

int probes__proc_pages_fd(const struct probes *p)
{
	return bpf_map__fd(p->skel->maps.proc_pages);
}

void probes__stats(const struct probes *p, struct probe_stats *st)
{
	st->rec_total = p->skel->bss->trace_state.rec_total;
	st->rec_dropped = p->skel->bss->trace_state.rec_dropped;
	st->storage_failed = p->skel->bss->storage_failed;
	st->ustack_skipped = p->skel->bss->ustack_skipped;
	st->torch_far_devices = p->skel->bss->torch_far_devices;
	st->torch_map_full = p->skel->bss->torch_map_full;
	st->torch_other_devices = p->skel->bss->torch_other_devices;
	st->open_windows = p->skel->bss->trace_state.open_windows;
}

#define DETACH_THREADS 64

struct detach_job {
	struct bpf_link **links;
	size_t first, n, stride;
};

static void *detach_some(void *arg)
{
	struct detach_job *job = arg;
	size_t i;

	for (i = job->first; i < job->n; i += job->stride)
		bpf_link__destroy(job->links[i]);
	return NULL;
}

/*
 * Closing a uprobe's perf event waits for an RCU grace period, about 0.1 s
 * here: 52 probes closed one after the other kept umtrace from exiting for
 * 5 s. Closed from many threads at once, the waits overlap.
 */
static void detach_all(struct bpf_link **links, size_t n)
{
	struct detach_job jobs[DETACH_THREADS];
	pthread_t tids[DETACH_THREADS];
	size_t t, nt = n < DETACH_THREADS ? n : DETACH_THREADS;
	bool started[DETACH_THREADS] = {};

	for (t = 0; t < nt; t++) {
		jobs[t] = (struct detach_job){ links, t, n, nt };
		started[t] = !pthread_create(&tids[t], NULL, detach_some, &jobs[t]);
		if (!started[t])
			detach_some(&jobs[t]);
	}
	for (t = 0; t < nt; t++)
		if (started[t])
			pthread_join(tids[t], NULL);
}

void probes__destroy(struct probes *p)
{
	size_t i;

	probes__torch_free(p);
	for (i = 0; i < p->n_multi; i++)
		close(p->multi_fds[i]);
	free(p->multi_fds);
	detach_all(p->links, p->n_links);
	free(p->links);
	umtrace_bpf__destroy(p->skel);
	memset(p, 0, sizeof(*p));
}

unsigned int probes__n_loaded(const struct probes *p)
{
	struct bpf_program *prog;
	unsigned int n = 0;

	if (!p->skel)
		return 0;
	bpf_object__for_each_program(prog, p->skel->obj)
		n += bpf_program__autoload(prog);
	return n;
}

bool probes__can_track_managed(void)
{
	return HAVE_FAULT_ADDRESS_TRACEPOINT;
}
