// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The kernel threads' table: what a thread is called for, how its rows
 * name their job in text and JSON, and a cgroup named back from its id.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "check.h"
#include "attach/kthreads.h"
#include "export/kthreads_out.h"
#include "lib/procfs.h"

#define PG 4096ULL

static void test_roles(void)
{
	CHECK(strstr(kthreads__role("UVM GPU0 BH"), "fault") != NULL, "bh", "%s",
	      kthreads__role("UVM GPU0 BH"));
	CHECK(strstr(kthreads__role("UVM GPU12 BH"), "fault") != NULL, "bh12", "");
	CHECK(strstr(kthreads__role("UVM GPU0 KC"), "channel") != NULL, "kc", "");
	CHECK(strstr(kthreads__role("nv_mem_pool_scr"), "pool") != NULL, "scrubber", "");
	CHECK(*kthreads__role("nv_queue") != '\0', "nv_queue", "");
	CHECK(*kthreads__role("nv_open_q") != '\0', "nv_open_q", "");
	CHECK(*kthreads__role("kworker/u8:4") != '\0', "kworker", "");
	CHECK(*kthreads__role("UVM GPU0") == '\0', "no suffix", "");
	CHECK(*kthreads__role("bash") == '\0', "unknown", "");
}

/* One row a way of naming: both, a cgroup alone, rss, the thread's own. */
static size_t rows_of(struct kthread_row *r)
{
	memset(r, 0, 4 * sizeof(*r));
	r[0] = (struct kthread_row){ .pid = 90, .tgid = 4567, .n_jobs = 1,
		.by = KTHREAD_BY_MM | KTHREAD_BY_MEMCG, .cgroup = 77,
		.bytes = 2052 * PG, .role = kthreads__role("UVM GPU0 BH") };
	r[0].by_bytes[UMT_KTHREAD_BY_MM] = 2048 * PG;
	r[0].by_bytes[UMT_KTHREAD_BY_MEMCG] = 4 * PG;
	strcpy(r[0].comm, "UVM GPU0 BH");
	strcpy(r[0].for_comm, "alloc_mix");
	strcpy(r[0].cgroup_path, "/job");
	r[1] = (struct kthread_row){ .pid = 90, .by = KTHREAD_BY_MEMCG, .cgroup = 78,
		.bytes = 3 * PG, .role = "" };
	strcpy(r[1].comm, "UVM GPU0 BH");
	r[2] = (struct kthread_row){ .pid = 40, .tgid = 321, .by = KTHREAD_BY_RSS,
		.bytes = 512 * PG, .exited = true, .role = "" };
	strcpy(r[2].comm, "khugepaged");
	strcpy(r[2].for_comm, "python3");
	r[3] = (struct kthread_row){ .pid = 41, .bytes = 2 * PG, .role = "" };
	strcpy(r[3].comm, "kworker/0:1");
	return 4;
}

static char *written(const struct kthread_row *r, size_t n, bool json)
{
	static char buf[8192];
	FILE *f = fmemopen(buf, sizeof(buf), "w");

	if (!f)
		return strcpy(buf, "");
	if (json)
		export_kthreads_json(r, n, f);
	else
		export_kthreads_text(r, n, n, f);
	fclose(f);
	return buf;
}

static void test_text(void)
{
	struct kthread_row r[4];
	size_t n = rows_of(r);
	const char *t = written(r, n, false);

	CHECK(strstr(t, "4567 alloc_mix in /job by mm+memcg") != NULL, "both", "%s", t);
	CHECK(strstr(t, "in cgroup id 78 by memcg") != NULL, "cgroup alone", "%s", t);
	CHECK(strstr(t, "321 python3 (exited) by rss") != NULL, "rss", "%s", t);
	CHECK(strstr(t, "kworker/0:1           8.0K  -\n") != NULL, "own", "%s", t);
	CHECK(strstr(t, "WHAT IT DOES") != NULL, "heading", "%s", t);
}

static void test_json(void)
{
	struct kthread_row r[4];
	size_t n = rows_of(r);
	const char *j = written(r, n, true);

	CHECK(strstr(j, "\"for_pid\":4567,\"for_comm\":\"alloc_mix\",\"for_exited\":false,"
		      "\"by\":[\"mm\",\"memcg\"],\"mm_bytes\":8388608,\"memcg_bytes\":16384,"
		      "\"rss_bytes\":0,\"for_cgroup_id\":77,\"for_cgroup\":\"/job\","
		      "\"cgroup_jobs\":1}") != NULL, "both", "%s", j);
	CHECK(strstr(j, "\"by\":[\"rss\"]") != NULL, "rss", "%s", j);
	CHECK(strstr(j, "\"comm\":\"kworker/0:1\",\"role\":\"\",\"host_bytes\":8192,"
		      "\"for_pid\":0,\"for_comm\":\"\",\"for_exited\":false,\"by\":[]") != NULL,
	      "own", "%s", j);
}

/* The root cgroup's directory is named "/" from its inode. */
static void test_cgroup_path(void)
{
	const char *root = cgroup2__root();
	char path[256];
	struct stat st;
	int err;

	if (!root || stat(root, &st)) {
		printf("  no cgroup v2 here\n");
		return;
	}
	err = cgroup2__path(st.st_ino, path, sizeof(path));
	if (err == -EPERM || err == -EOPNOTSUPP) {
		printf("  no file handles here: %s\n", strerror(-err));
		return;
	}
	if (CHECK_EQ(err, 0, "root"))
		CHECK(!strcmp(path, "/"), "root path", "'%s'", path);
	CHECK(cgroup2__path(~0ULL, path, sizeof(path)) < 0, "no such id", "");
}

int main(void)
{
	RUN_SUBTEST(test_roles);
	RUN_SUBTEST(test_text);
	RUN_SUBTEST(test_json);
	RUN_SUBTEST(test_cgroup_path);
	return CHECK_EXIT();
}
