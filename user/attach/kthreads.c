// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include "attach/kthreads.h"
#include "lib/procfs.h"

/* Enough for a host's kernel threads; the map holds 4096 rows. */
#define KTHREADS_MAX 4096
/* The gpu_memcgs map's size. */
#define JOBS_MAX 4096

/* A process that made a GPU call, as gpu_memcgs keeps it. */
struct job {
	uint32_t tgid;
	struct umt_gpu_memcg m;
};

struct role {
	const char *prefix;
	const char *suffix;
	const char *what;
};

/*
 * The kernel threads that take host pages for GPU jobs, by what they do
 * (NVIDIA's open kernel modules name them; comms are cut to 15 bytes).
 */
static const struct role roles[] = {
	{ "UVM GPU", " BH", "NVIDIA UVM: services GPU faults (bottom half)" },
	{ "UVM GPU", " KC", "NVIDIA UVM: kills faulting channels" },
	{ "nv_mem_pool_scr", "", "NVIDIA 590+: zeroes the driver pool's freed pages" },
	{ "nv_queue", "", "NVIDIA driver: deferred work" },
	{ "nv_open_q", "", "NVIDIA driver: opens GPUs" },
	{ "khugepaged", "", "kernel: collapses huge pages" },
	{ "kswapd", "", "kernel: reclaims pages" },
	{ "kcompactd", "", "kernel: compacts memory" },
	{ "kworker/", "", "kernel: work queue" },
};

const char *kthreads__role(const char *comm)
{
	size_t i, n = strlen(comm), pl, sl;

	for (i = 0; i < sizeof(roles) / sizeof(roles[0]); i++) {
		pl = strlen(roles[i].prefix);
		sl = strlen(roles[i].suffix);
		if (n < pl + sl || strncmp(comm, roles[i].prefix, pl))
			continue;
		if (sl && strcmp(comm + n - sl, roles[i].suffix))
			continue;
		return roles[i].what;
	}
	return "";
}

const char *kthreads__by_name(uint32_t bit)
{
	switch (bit) {
	case KTHREAD_BY_MM:
		return "mm";
	case KTHREAD_BY_MEMCG:
		return "memcg";
	case KTHREAD_BY_RSS:
		return "rss";
	}
	return "";
}

static const struct job *find_job(const struct job *jobs, size_t n, uint32_t tgid)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (jobs[i].tgid == tgid)
			return &jobs[i];
	return NULL;
}

/* The GPU processes' memory cgroups; NULL and *n 0 when there are none. */
static struct job *read_jobs(const struct probes *p, size_t *n)
{
	int fd = probes__gpu_memcgs_fd(p);
	uint32_t key, next, *prev = NULL;
	struct job *jobs;
	size_t k = 0;

	*n = 0;
	if (fd < 0)
		return NULL;
	jobs = calloc(JOBS_MAX, sizeof(*jobs));
	if (!jobs)
		return NULL;
	while (k < JOBS_MAX && !bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &jobs[k].m))
			continue;
		jobs[k].tgid = key;
		jobs[k].m.comm[sizeof(jobs[k].m.comm) - 1] = '\0';
		k++;
	}
	*n = k;
	return jobs;
}

/*
 * A memory cgroup's row: the GPU processes seen in it (the lowest pid
 * named, the others counted) and its path, while it exists.
 */
static void name_cgroup(struct kthread_row *r, const struct job *jobs, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (jobs[i].m.cgroup != r->cgroup)
			continue;
		if (!r->n_jobs++ || jobs[i].tgid < r->tgid)
			r->tgid = jobs[i].tgid;
	}
	if (cgroup2__path(r->cgroup, r->cgroup_path, sizeof(r->cgroup_path)))
		r->cgroup_path[0] = '\0';
}

/* The process's name now, or as its first GPU call saw it if it is gone. */
static void name_process(struct kthread_row *r, const struct job *jobs, size_t n)
{
	const struct job *j;

	if (!r->tgid || proc__comm((pid_t)r->tgid, r->for_comm, sizeof(r->for_comm)))
		return;
	r->exited = true;
	r->for_comm[0] = '\0';
	j = find_job(jobs, n, r->tgid);
	if (j)
		memcpy(r->for_comm, j->m.comm, sizeof(r->for_comm));
}

static int by_job(const void *a, const void *b)
{
	const struct kthread_row *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tgid != y->tgid)
		return x->tgid < y->tgid ? -1 : 1;
	return x->cgroup < y->cgroup ? -1 : x->cgroup > y->cgroup;
}

static int by_bytes(const void *a, const void *b)
{
	const struct kthread_row *x = a, *y = b;

	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	return by_job(a, b);
}

/* Can r's pages join the row before it: one thread, one process? */
static bool same_job(const struct kthread_row *prev, const struct kthread_row *r)
{
	if (prev->pid != r->pid || prev->tgid != r->tgid || !r->tgid)
		return false;
	/* a cgroup of several jobs is no one job's */
	return prev->n_jobs <= 1 && r->n_jobs <= 1 &&
	       !(prev->cgroup && r->cgroup && prev->cgroup != r->cgroup);
}

/* One row per thread and job: what mm, memcg and rss_stat each named. */
static size_t merge_jobs(struct kthread_row *rows, size_t n)
{
	size_t i, j, k = 0;

	qsort(rows, n, sizeof(*rows), by_job);
	for (i = 0; i < n; i++) {
		struct kthread_row *prev = k ? &rows[k - 1] : NULL;

		if (!prev || !same_job(prev, &rows[i])) {
			rows[k++] = rows[i];
			continue;
		}
		prev->bytes += rows[i].bytes;
		for (j = 0; j < sizeof(prev->by_bytes) / sizeof(prev->by_bytes[0]); j++)
			prev->by_bytes[j] += rows[i].by_bytes[j];
		prev->by |= rows[i].by;
		prev->n_jobs = prev->n_jobs > rows[i].n_jobs ? prev->n_jobs : rows[i].n_jobs;
		if (!prev->cgroup) {
			prev->cgroup = rows[i].cgroup;
			memcpy(prev->cgroup_path, rows[i].cgroup_path, sizeof(prev->cgroup_path));
		}
	}
	return k;
}

static size_t read_rows(int fd, uint64_t page_size, struct kthread_row *rows)
{
	struct umt_kthread_key key, next, *prev = NULL;
	struct umt_kthread_pages v;
	size_t k = 0;

	while (k < KTHREADS_MAX && !bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &v) || !v.pages)
			continue;
		rows[k].pid = key.pid;
		rows[k].tgid = key.by == UMT_KTHREAD_BY_MEMCG ? 0 : key.tgid;
		rows[k].cgroup = key.by == UMT_KTHREAD_BY_MEMCG ? key.cgroup : 0;
		rows[k].by = key.by ? 1U << key.by : 0;
		rows[k].bytes = v.pages * page_size;
		if (key.by < sizeof(rows[k].by_bytes) / sizeof(rows[k].by_bytes[0]))
			rows[k].by_bytes[key.by] = rows[k].bytes;
		memcpy(rows[k].comm, v.comm, sizeof(rows[k].comm));
		rows[k].comm[sizeof(rows[k].comm) - 1] = '\0';
		rows[k].role = kthreads__role(rows[k].comm);
		k++;
	}
	return k;
}

struct kthread_row *kthreads__read(const struct probes *p, uint64_t page_size,
				   size_t *n, int *err)
{
	int fd = probes__kthreads_fd(p);
	struct kthread_row *rows;
	struct job *jobs;
	size_t k, i, nj;

	*n = 0;
	*err = 0;
	if (fd < 0)
		return NULL;
	rows = calloc(KTHREADS_MAX, sizeof(*rows));
	if (!rows) {
		*err = -ENOMEM;
		return NULL;
	}
	k = read_rows(fd, page_size, rows);
	if (!k) {
		free(rows);
		return NULL;
	}
	jobs = read_jobs(p, &nj);
	for (i = 0; i < k; i++)
		if (rows[i].cgroup)
			name_cgroup(&rows[i], jobs, nj);
	k = merge_jobs(rows, k);
	for (i = 0; i < k; i++)
		name_process(&rows[i], jobs, nj);
	free(jobs);
	qsort(rows, k, sizeof(*rows), by_bytes);
	*n = k;
	return rows;
}
