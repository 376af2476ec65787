// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "export/summary_out.h"
#include "model/cuda_api.h"
#include "model/summary.h"

static struct umt_call_rec rec(uint32_t pid, unsigned int api, uint64_t handle,
			       uint64_t size, uint64_t pages)
{
	struct umt_call_rec r;

	memset(&r, 0, sizeof(r));
	r.type = UMT_REC_CALL;
	r.api = api;
	r.pid = pid;
	r.tid = pid;
	r.handle = handle;
	r.size = size;
	r.pages_taken = pages;
	r.is_free = cuda_api__get(api)->is_free;
	strcpy(r.comm, "job-worker");
	strcpy(r.pcomm, "job");
	return r;
}

static const struct summary_row *find(const struct summary_row *v, size_t n,
				      uint32_t pid, unsigned int api)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (v[i].pid == pid && v[i].api == api)
			return &v[i];
	return NULL;
}

static void test_alloc_free(void)
{
	struct summary s;
	struct umt_call_rec r;
	const struct summary_row *row;
	struct summary_row *v;
	size_t n;

	summary__init(&s, 4096);
	r = rec(10, UMT_API_MEM_ALLOC_V2, 0xa000, 1 << 20, 256);
	summary__consume(&s, &r);
	r = rec(10, UMT_API_MEM_ALLOC_V2, 0xb000, 1 << 20, 256);
	summary__consume(&s, &r);
	r = rec(10, UMT_API_MEM_FREE_V2, 0xa000, 0, 0);
	r.pages_freed = 256;
	summary__consume(&s, &r);
	/* A free of a pointer never seen: counted, not matched. */
	r = rec(10, UMT_API_MEM_FREE_V2, 0xc000, 0, 0);
	summary__consume(&s, &r);

	v = summary__rows(&s, &n);
	CHECK_EQ(n, 2, "rows");
	row = find(v, n, 10, UMT_API_MEM_ALLOC_V2);
	if (CHECK(row, "alloc row", "missing")) {
		CHECK_EQ(row->calls, 2, "calls");
		CHECK_EQ(row->size_bytes, 2 << 20, "size");
		CHECK_EQ(row->host_taken, 2 << 20, "host taken");
		CHECK_EQ(row->unfreed, 1, "unfreed");
		CHECK_EQ(row->unfreed_host, 1 << 20, "unfreed host");
	}
	row = find(v, n, 10, UMT_API_MEM_FREE_V2);
	if (CHECK(row, "free row", "missing"))
		CHECK_EQ(row->host_freed, 1 << 20, "host freed");
	CHECK_EQ(s.unmatched_frees, 1, "unmatched");
	CHECK_EQ(s.table.count, 1, "table count");
	free(v);
	summary__free(&s);
}

static void test_failed_and_died(void)
{
	struct summary s;
	struct umt_call_rec r;
	struct summary_row *v;
	size_t n;

	summary__init(&s, 4096);
	r = rec(5, UMT_API_MEM_HOST_ALLOC, 0, 4096, 0);
	r.ret = 2;	/* CUDA_ERROR_OUT_OF_MEMORY */
	summary__consume(&s, &r);
	r = rec(5, UMT_API_MEM_HOST_ALLOC, 0, 8192, 2);
	r.end = UMT_END_EXITED;
	summary__consume(&s, &r);
	v = summary__rows(&s, &n);
	CHECK_EQ(n, 1, "rows");
	CHECK_EQ(v[0].failed, 1, "failed");
	CHECK_EQ(v[0].died, 1, "died");
	CHECK_EQ(v[0].host_taken, 8192, "host taken by the dying call");
	CHECK_EQ(v[0].unfreed, 0, "nothing outstanding");
	CHECK_EQ(s.table.count, 0, "table empty");
	free(v);
	summary__free(&s);
}

/* VMM: physical handles, mappings and reservations are separate spaces. */
static void test_vmm_spaces(void)
{
	struct summary s;
	struct umt_call_rec r;

	summary__init(&s, 4096);
	r = rec(3, UMT_API_MEM_ADDRESS_RESERVE, 0x7000, 1 << 21, 0);
	summary__consume(&s, &r);
	r = rec(3, UMT_API_MEM_CREATE, 0x7000, 1 << 21, 512);	/* same number, other space */
	summary__consume(&s, &r);
	r = rec(3, UMT_API_MEM_MAP, 0x7000, 1 << 21, 0);
	summary__consume(&s, &r);
	CHECK_EQ(s.table.count, 3, "three live objects");
	r = rec(3, UMT_API_MEM_UNMAP, 0x7000, 1 << 21, 0);
	summary__consume(&s, &r);
	r = rec(3, UMT_API_MEM_ADDRESS_FREE, 0x7000, 1 << 21, 0);
	summary__consume(&s, &r);
	CHECK_EQ(s.table.count, 1, "physical memory still held");
	CHECK_EQ(s.table.host_bytes, 2 << 20, "held by cuMemCreate");
	r = rec(3, UMT_API_MEM_RELEASE, 0x7000, 0, 0);
	summary__consume(&s, &r);
	CHECK_EQ(s.table.count, 0, "released");
	CHECK_EQ(s.unmatched_frees, 0, "all matched");
	summary__free(&s);
}

/* Managed memory is freed with cuMemFree like device memory. */
static void test_managed_freed_by_memfree(void)
{
	struct summary s;
	struct umt_call_rec r;

	summary__init(&s, 4096);
	r = rec(4, UMT_API_MEM_ALLOC_MANAGED, 0x9000, 1 << 20, 0);
	summary__consume(&s, &r);
	r = rec(4, UMT_API_MEM_FREE_V2, 0x9000, 0, 0);
	summary__consume(&s, &r);
	CHECK_EQ(s.table.count, 0, "freed");
	CHECK_EQ(s.unmatched_frees, 0, "matched");
	summary__free(&s);
}

static void test_exit_releases(void)
{
	struct umt_proc_exit_rec ex = { .type = UMT_REC_PROC_EXIT, .pid = 8 };
	struct summary s;
	struct umt_call_rec r;
	struct summary_row *v;
	size_t n;

	summary__init(&s, 4096);
	r = rec(8, UMT_API_MEM_ALLOC_V2, 0x1000, 1 << 20, 256);
	summary__consume(&s, &r);
	r = rec(8, UMT_API_MEM_CREATE, 0x1, 1 << 21, 512);
	summary__consume(&s, &r);
	r = rec(9, UMT_API_MEM_ALLOC_V2, 0x1000, 1 << 20, 256);	/* another process */
	summary__consume(&s, &r);
	summary__proc_exit(&s, &ex);
	CHECK_EQ(s.table.count, 1, "only pid 9's allocation is left");
	CHECK_EQ(s.exit_freed, 2, "released at exit");
	CHECK_EQ(s.exit_freed_host, 768 * 4096, "host bytes released");
	v = summary__rows(&s, &n);
	CHECK_EQ(n, 3, "rows");
	CHECK_EQ(v[0].unfreed, 0, "pid 8 alloc row");
	CHECK_EQ(v[0].exit_freed, 1, "pid 8 alloc row at exit");
	CHECK_EQ(v[2].unfreed, 1, "pid 9 untouched");
	free(v);
	summary__proc_exit(&s, &ex);	/* twice: nothing left, no harm */
	CHECK_EQ(s.exit_freed, 2, "idempotent");
	summary__free(&s);
}

/* What f wrote, as a string to compare; NULL if out of memory. */
static char *written(void (*fn)(const struct summary *, FILE *), const struct summary *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	fn(s, f);
	fclose(f);
	return buf;
}

/* The table and JSON lines of trace's end, byte for byte. */
static void test_written_out(void)
{
	struct umt_proc_exit_rec ex = { .type = UMT_REC_PROC_EXIT, .pid = 8 };
	struct summary s;
	struct umt_call_rec r;
	char *text, *json;

	summary__init(&s, 4096);
	r = rec(8, UMT_API_MEM_ALLOC_V2, 0x1000, 1 << 20, 256);
	strcpy(r.pcomm, "a\"b");
	summary__consume(&s, &r);
	r = rec(9, UMT_API_MEM_ALLOC_V2, 0x1000, 3ULL << 30, 1000);
	r.device_pages = 4;
	summary__consume(&s, &r);
	summary__proc_exit(&s, &ex);
	text = written(export_summary_text, &s);
	json = written(export_summary_json, &s);
	CHECK(text && !strcmp(text,
		"\n"
		"PID     COMM            API                            CALLS FAILED     SIZE    HOST+    HOST- UNFREED HOSTHELD  ATEXIT\n"
		"8       a\"b             cuMemAlloc_v2                      1      0     1.0M     1.0M       0B       0       0B       1\n"
		"9       job             cuMemAlloc_v2                      1      0     3.0G     3.9M       0B       1     3.9M       0\n"
		"1 allocations unfreed: 3.0G requested, 3.9M of host memory taken by them\n"
		"1 allocations never freed were released when their process exited (1.0M of host memory)\n"
		"16K taken from NUMA nodes that are not host RAM (not in HOST+)\n"),
	      "text", "got:\n%s", text);
	CHECK(json && !strcmp(json,
		"{\"event\":\"summary\",\"pid\":8,\"comm\":\"a\\\"b\",\"api\":\"cuMemAlloc_v2\",\"calls\":1,"
		"\"failed\":0,\"died_in_call\":0,\"size\":1048576,\"host_bytes\":1048576,"
		"\"host_freed_bytes\":0,\"unfreed\":0,\"unfreed_size\":0,\"unfreed_host_bytes\":0,"
		"\"freed_at_exit\":1,\"freed_at_exit_host_bytes\":1048576,\"device_node_bytes\":0}\n"
		"{\"event\":\"summary\",\"pid\":9,\"comm\":\"job\",\"api\":\"cuMemAlloc_v2\",\"calls\":1,"
		"\"failed\":0,\"died_in_call\":0,\"size\":3221225472,\"host_bytes\":4096000,"
		"\"host_freed_bytes\":0,\"unfreed\":1,\"unfreed_size\":3221225472,"
		"\"unfreed_host_bytes\":4096000,\"freed_at_exit\":0,\"freed_at_exit_host_bytes\":0,"
		"\"device_node_bytes\":16384}\n"),
	      "json", "got:\n%s", json);
	free(text);
	free(json);
	summary__free(&s);
}

/* What the pool's text and JSON writers say of s. */
static void pool_written(const struct summary *s, const char *text, const char *json)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	export_pool_text(s, f);
	export_pool_json(s, f);
	fclose(f);
	CHECK(buf && strstr(buf, text) && strstr(buf, json), "pool written", "%s", buf ? buf : "");
	free(buf);
}

/*
 * The driver's page pool: a free that gives no page back keeps its size,
 * an allocation that takes none is served from what is kept (never more),
 * the shrinker's returns come off; device memory counts unless discrete.
 */
static void test_driver_pool(void)
{
	const uint64_t mib = 1 << 20, pg = 4096;
	struct summary s;
	struct umt_call_rec r;
	bool device;

	summary__init(&s, pg);
	platform__init(&s.platform, PLATFORM_UNIFIED);
	/* a lazy driver's allocation took nothing: the empty pool served none */
	r = rec(10, UMT_API_MEM_ALLOC_V2, 0xa000, 8 * mib, 0);
	summary__consume(&s, &r);
	CHECK_EQ(driver_pool__out(&s.pool, true), 0, "nothing served from an empty pool");
	r = rec(10, UMT_API_MEM_FREE_V2, 0xa000, 0, 0);
	summary__consume(&s, &r);
	CHECK_EQ(summary__pool_holds(&s, &device), 8 * mib, "a free that kept its pages");
	CHECK(device, "device memory counted on unified", "");
	/* 6 MiB served, 1 page of it new (plus a retry's page taken and freed) */
	r = rec(10, UMT_API_MEM_ALLOC_V2, 0xb000, 6 * mib, 2);
	r.pages_freed = 1;
	summary__consume(&s, &r);
	CHECK_EQ(driver_pool__out(&s.pool, true), 6 * mib - pg, "served: what it did not take");
	CHECK_EQ(summary__pool_holds(&s, NULL), 2 * mib + pg, "left in the pool");
	/* its free gives half back: half kept; a size rounds up to the page */
	r = rec(10, UMT_API_MEM_FREE_V2, 0xb000, 0, 0);
	r.pages_freed = 3 * mib / pg;
	summary__consume(&s, &r);
	CHECK_EQ(driver_pool__in(&s.pool, true), 11 * mib, "kept in all");
	driver_pool__shrunk(&s.pool, 4 * mib);
	CHECK_EQ(summary__pool_holds(&s, NULL), mib + pg, "after the shrinker");
	driver_pool__shrunk(&s.pool, 64 * mib);
	CHECK_EQ(summary__pool_holds(&s, NULL), 0, "never below empty");
	pool_written(&s, "driver page pool: holds 0B no process does (frees kept 11M, "
		     "allocations took 6.0M back, its shrinker gave 64M back)",
		     "{\"event\":\"driver_pool\",\"holds_bytes\":0,\"kept_bytes\":11534336,"
		     "\"served_bytes\":6287360,\"device_memory\":true,\"shrunk_bytes\":67108864}");
	summary__free(&s);

	/* discrete: device memory is not host RAM, pinned host memory is */
	summary__init(&s, pg);
	platform__init(&s.platform, PLATFORM_DISCRETE);
	r = rec(11, UMT_API_MEM_ALLOC_V2, 0xa000, 8 * mib, 0);
	summary__consume(&s, &r);
	r = rec(11, UMT_API_MEM_FREE_V2, 0xa000, 0, 0);
	summary__consume(&s, &r);
	r = rec(11, UMT_API_MEM_HOST_ALLOC, 0xc000, 2 * mib + 1, 2 * mib / pg + 1);
	summary__consume(&s, &r);
	r = rec(11, UMT_API_MEM_FREE_HOST, 0xc000, 0, 0);
	summary__consume(&s, &r);
	CHECK_EQ(summary__pool_holds(&s, &device), 2 * mib + pg, "pinned kept, device not");
	CHECK(!device, "no device memory on discrete", "");
	CHECK(driver_pool__seen(&s.pool, false), "seen", "");
	summary__free(&s);
}

int main(void)
{
	RUN_SUBTEST(test_driver_pool);
	RUN_SUBTEST(test_exit_releases);
	RUN_SUBTEST(test_alloc_free);
	RUN_SUBTEST(test_failed_and_died);
	RUN_SUBTEST(test_vmm_spaces);
	RUN_SUBTEST(test_managed_freed_by_memfree);
	RUN_SUBTEST(test_written_out);
	return CHECK_EXIT();
}
