// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <stdlib.h>
#include "export/export.h"
#include "export/summary_out.h"
#include "lib/escape.h"
#include "lib/units.h"
#include "model/cuda_api.h"

void export_summary_text(const struct summary *s, FILE *f)
{
	char b[5][16], comm[ESC_TERM_LEN(TASK_COMM_LEN)];
	struct summary_row *v;
	size_t i, n;

	v = summary__rows(s, &n);
	if (!v)
		return;
	fprintf(f, "\n%-7s %-15s %-28s %7s %6s %8s %8s %8s %7s %8s %7s\n", "PID",
		"COMM", "API", "CALLS", "FAILED", "SIZE", "HOST+", "HOST-",
		"UNFREED", "HOSTHELD", "ATEXIT");
	for (i = 0; i < n; i++)
		fprintf(f, "%-7u %-15s %-28s %7llu %6llu %8s %8s %8s %7llu %8s %7llu\n",
			v[i].pid, esc__term(v[i].comm, comm, sizeof(comm)),
			cuda_api__name(v[i].api),
			(unsigned long long)v[i].calls,
			(unsigned long long)(v[i].failed + v[i].died),
			fmt_bytes(v[i].size_bytes, b[0], sizeof(b[0])),
			fmt_bytes(v[i].host_taken, b[1], sizeof(b[1])),
			fmt_bytes(v[i].host_freed, b[2], sizeof(b[2])),
			(unsigned long long)v[i].unfreed,
			fmt_bytes(v[i].unfreed_host, b[3], sizeof(b[3])),
			(unsigned long long)v[i].exit_freed);
	fprintf(f, "%zu allocations unfreed: %s requested, %s of host memory taken by them\n",
		s->table.count, fmt_bytes(s->table.size_bytes, b[0], sizeof(b[0])),
		fmt_bytes(s->table.host_bytes, b[4], sizeof(b[4])));
	if (s->table.refused || s->rows_refused || s->procs_refused)
		fprintf(f, "tables full: %llu allocations, %llu rows, %llu processes not tracked\n",
			(unsigned long long)s->table.refused,
			(unsigned long long)s->rows_refused,
			(unsigned long long)s->procs_refused);
	if (s->exit_freed)
		fprintf(f, "%llu allocations never freed were released when their process exited (%s of host memory)\n",
			(unsigned long long)s->exit_freed,
			fmt_bytes(s->exit_freed_host, b[0], sizeof(b[0])));
	if (s->device_taken)
		fprintf(f, "%s taken from NUMA nodes that are not host RAM (not in HOST+)\n",
			fmt_bytes(s->device_taken, b[0], sizeof(b[0])));
	free(v);
}

void export_summary_json(const struct summary *s, FILE *f)
{
	struct summary_row *v;
	size_t i, n;

	v = summary__rows(s, &n);
	if (!v)
		return;
	for (i = 0; i < n; i++) {
		fprintf(f, "{\"event\":\"summary\",\"pid\":%u,\"comm\":", v[i].pid);
		json__string(f, v[i].comm);
		fprintf(f, ",\"api\":\"%s\",\"calls\":%llu,\"failed\":%llu,"
			"\"died_in_call\":%llu,\"size\":%llu,\"host_bytes\":%llu,"
			"\"host_freed_bytes\":%llu,\"unfreed\":%llu,"
			"\"unfreed_size\":%llu,\"unfreed_host_bytes\":%llu,"
			"\"freed_at_exit\":%llu,\"freed_at_exit_host_bytes\":%llu,"
			"\"device_node_bytes\":%llu}\n",
			cuda_api__name(v[i].api),
			(unsigned long long)v[i].calls,
			(unsigned long long)v[i].failed,
			(unsigned long long)v[i].died,
			(unsigned long long)v[i].size_bytes,
			(unsigned long long)v[i].host_taken,
			(unsigned long long)v[i].host_freed,
			(unsigned long long)v[i].unfreed,
			(unsigned long long)v[i].unfreed_size,
			(unsigned long long)v[i].unfreed_host,
			(unsigned long long)v[i].exit_freed,
			(unsigned long long)v[i].exit_freed_host,
			(unsigned long long)v[i].device_taken);
	}
	free(v);
}

/* The pool's figures as both writers give them; false: nothing to say. */
struct pool_view {
	bool device;			/* device memory counted */
	uint64_t holds, kept, served;
};

static bool pool_view(const struct summary *s, struct pool_view *v)
{
	v->holds = summary__pool_holds(s, &v->device);
	v->kept = driver_pool__in(&s->pool, v->device);
	v->served = driver_pool__out(&s->pool, v->device);
	return driver_pool__seen(&s->pool, v->device);
}

void export_pool_text(const struct summary *s, FILE *f)
{
	struct pool_view v;
	char b[4][16];

	if (!pool_view(s, &v))
		return;
	fprintf(f, "\ndriver page pool: holds %s no process does (frees kept %s, allocations "
		"took %s back, ", fmt_bytes(v.holds, b[0], sizeof(b[0])),
		fmt_bytes(v.kept, b[1], sizeof(b[1])), fmt_bytes(v.served, b[2], sizeof(b[2])));
	if (s->pool.shrunk_known)
		fprintf(f, "its shrinker gave %s back)\n", fmt_bytes(s->pool.shrunk, b[3], sizeof(b[3])));
	else
		fputs("its shrinker not watched)\n", f);
}

void export_pool_json(const struct summary *s, FILE *f)
{
	struct pool_view v;

	if (!pool_view(s, &v))
		return;
	fprintf(f, "{\"event\":\"driver_pool\",\"holds_bytes\":%llu,\"kept_bytes\":%llu,"
		"\"served_bytes\":%llu,\"device_memory\":%s,\"shrunk_bytes\":",
		(unsigned long long)v.holds, (unsigned long long)v.kept,
		(unsigned long long)v.served, v.device ? "true" : "false");
	if (s->pool.shrunk_known)
		fprintf(f, "%llu}\n", (unsigned long long)s->pool.shrunk);
	else
		fputs("null}\n", f);
}
