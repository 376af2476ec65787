// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include "attach/kthreads.h"
#include "lib/procfs.h"

/* Enough for a host's kernel threads; the map holds 4096 rows. */
#define KTHREADS_MAX 4096

static void name_process(struct kthread_row *r)
{
	if (r->tgid && !proc__comm((pid_t)r->tgid, r->for_comm, sizeof(r->for_comm)))
		r->for_comm[0] = '\0';
}

static int by_bytes(const void *a, const void *b)
{
	const struct kthread_row *x = a, *y = b;

	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->tgid < y->tgid ? -1 : x->tgid > y->tgid;
}

struct kthread_row *kthreads__read(const struct probes *p, uint64_t page_size,
				   size_t *n, int *err)
{
	int fd = probes__kthreads_fd(p);
	struct umt_kthread_key key, next, *prev = NULL;
	struct umt_kthread_pages v;
	struct kthread_row *rows;
	size_t k = 0;

	*n = 0;
	*err = 0;
	if (fd < 0)
		return NULL;
	rows = calloc(KTHREADS_MAX, sizeof(*rows));
	if (!rows) {
		*err = -ENOMEM;
		return NULL;
	}
	while (k < KTHREADS_MAX && !bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &v) || !v.pages)
			continue;
		rows[k].pid = key.pid;
		rows[k].tgid = key.tgid;
		rows[k].bytes = v.pages * page_size;
		memcpy(rows[k].comm, v.comm, sizeof(rows[k].comm));
		rows[k].comm[sizeof(rows[k].comm) - 1] = '\0';
		name_process(&rows[k]);
		k++;
	}
	if (!k) {
		free(rows);
		return NULL;
	}
	qsort(rows, k, sizeof(*rows), by_bytes);
	*n = k;
	return rows;
}
