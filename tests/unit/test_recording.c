// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Recordings: every field of every record comes back as written. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "model/cuda_api.h"
#include "rec/recording.h"

static char dir[] = "/tmp/umt-recording-XXXXXX";

#define tmp_path(name) check_path(dir, name)

/* A call as the ring buffer would bring it; i varies every field. */
static struct umt_call_rec make_call(unsigned int i)
{
	struct umt_call_rec r;

	memset(&r, 0, sizeof(r));
	r.type = UMT_REC_CALL;
	r.api = i % 3 ? UMT_API_MEM_ALLOC_V2 : UMT_API_MEM_FREE_V2;
	r.ts_ns = 1000000000ULL + i * 1234567ULL - (i % 5) * 999999ULL;	/* not monotonic */
	r.duration_ns = 1000 + i * 17;
	r.pid = 4000 + i % 3;
	r.tid = r.pid + i % 7;
	r.size = (uint64_t)(i % 11) << 20;
	r.flags = i % 4 == 1 ? 2 : 0;
	r.handle = 0x7f0000000000ULL + ((uint64_t)(i * 7919) << 12);
	r.aux = i % 9 == 2 ? 0xabcdefULL : 0;
	r.ret = i % 13 == 3 ? -2 : (i % 17 == 4 ? 2 : 0);
	r.end = i % 19 == 5 ? UMT_END_EXITED : UMT_END_RETURNED;
	r.pages_taken = i * 3;
	r.pages_freed = i % 2 ? i : 0;
	r.faulted_pages = i % 23 == 1 ? 1ULL << 40 : 0;
	r.is_free = r.api == UMT_API_MEM_FREE_V2;
	strcpy(r.comm, i % 2 ? "worker-thread-1" : "main");
	strcpy(r.pcomm, i % 4 ? "job" : "main");
	r.stack_len = 8;	/* ignored */
	r.stack[0] = 0xdead;
	return r;
}

static size_t make_frames(unsigned int i, struct sym_frame *f)
{
	static const char *const funcs[] = { "cuMemAlloc_v2", "alloc_weights", NULL, "main" };
	size_t n = 1 + i % 4, k;

	memset(f, 0, n * sizeof(*f));
	for (k = 0; k < n; k++) {
		f[k].func = funcs[(k + i / 4) % 4];
		f[k].module = k == 2 ? NULL : (k ? "job" : "libcuda.so.1");
		f[k].addr = 0x400000 + k * 0x100 + (i % 2);
		f[k].offset = f[k].func ? 0x10 * k : 0;
	}
	return n;
}

static bool call_eq(const struct umt_call_rec *a, const struct umt_call_rec *b)
{
	return a->api == b->api && a->ts_ns == b->ts_ns && a->duration_ns == b->duration_ns &&
	       a->pid == b->pid && a->tid == b->tid && a->size == b->size &&
	       a->flags == b->flags && a->handle == b->handle && a->aux == b->aux &&
	       a->ret == b->ret && a->end == b->end && a->pages_taken == b->pages_taken &&
	       a->pages_freed == b->pages_freed && a->faulted_pages == b->faulted_pages &&
	       a->is_free == b->is_free && !strncmp(a->comm, b->comm, TASK_COMM_LEN - 1) &&
	       !strncmp(a->pcomm, b->pcomm, TASK_COMM_LEN - 1) && b->type == UMT_REC_CALL;
}

static bool str_eq(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

static bool frames_eq(const struct sym_frame *a, size_t na, const struct sym_frame *b, size_t nb)
{
	size_t i;

	if (na != nb)
		return false;
	for (i = 0; i < na; i++)
		if (!str_eq(a[i].func, b[i].func) || !str_eq(a[i].module, b[i].module) ||
		    a[i].addr != b[i].addr || a[i].offset != b[i].offset)
			return false;
	return true;
}

struct seen {
	unsigned int calls, bad_calls;
	unsigned int exits, samples, stops, infos, headers;
	struct rec_sample sample;
	struct rec_stop stop;
	struct rec_info info;
	struct umt_proc_exit_rec exit;
};

static void on_header(void *ctx, const struct recording_header *h)
{
	struct seen *s = ctx;

	s->headers += h->file.version == RECFILE_VERSION;
}

static void on_call(void *ctx, const struct umt_call_rec *r, const struct sym_frame *f, size_t n)
{
	struct seen *s = ctx;
	struct umt_call_rec want = make_call(s->calls);
	struct sym_frame wf[8];
	size_t wn = make_frames(s->calls, wf);

	if (!call_eq(&want, r) || !frames_eq(wf, wn, f, n) || r->stack_len)
		s->bad_calls++;
	s->calls++;
}

static void on_exit_rec(void *ctx, const struct umt_proc_exit_rec *r)
{
	struct seen *s = ctx;

	s->exit = *r;
	s->exits++;
}

static void on_sample(void *ctx, const struct rec_sample *r)
{
	struct seen *s = ctx;

	s->sample = *r;
	s->samples++;
}

static void on_stop(void *ctx, const struct rec_stop *r)
{
	struct seen *s = ctx;

	s->stop = *r;
	s->stops++;
}

static void on_info(void *ctx, const struct rec_info *i)
{
	struct seen *s = ctx;

	s->info = *i;
	s->infos++;
}

static const struct recording_ops ops = {
	.on_header = on_header,
	.on_info = on_info,
	.on_call = on_call,
	.on_exit = on_exit_rec,
	.on_sample = on_sample,
	.on_stop = on_stop,
};

static struct rec_sample make_sample(void)
{
	struct rec_sample s;

	memset(&s, 0, sizeof(s));	/* padding too: compared with memcmp */
	s.ts_ns = 5000000000ULL;
	s.mem_total = 24ULL << 30;
	s.mem_available = 3ULL << 30;
	s.mem_free = 1ULL << 30;
	s.has_psi = true;
	s.psi_some_avg10 = 1234;
	s.psi_full_avg10 = 56;
	s.psi_some_total_us = 987654321;
	s.psi_full_total_us = 42;
	s.allocstall = 7;
	s.pgscan_direct = 1000;
	s.pgsteal_direct = 900;
	s.has_shrunk = true;
	s.driver_shrunk = 10ULL << 20;
	return s;
}

static struct rec_stop make_stop(void)
{
	struct rec_stop s;

	memset(&s, 0, sizeof(s));
	s.ts_ns = 6000000000ULL;
	s.pid = 4001;
	strcpy(s.comm, "python3");
	s.reason = 3;
	strcpy(s.reason_text, "MemAvailable below the floor (512M)");
	s.mem_available = 400ULL << 20;
	s.gpu_host_bytes = 20ULL << 30;
	strcpy(s.site, "cuMemCreate;expandable_segment;malloc");
	return s;
}

/* n calls (enough for several chunks when large), and one of everything else. */
static int write_recording(const char *path, unsigned int n)
{
	struct recording_writer *w = recording_writer__open(path, 0);
	struct rec_info info = { 1, 2, 33, 1000, 1 };
	struct umt_proc_exit_rec x = { UMT_REC_PROC_EXIT, 4002, 7000000000ULL, "leaver" };
	struct rec_sample smp = make_sample();
	struct rec_stop stop = make_stop();
	struct sym_frame f[8];
	struct umt_call_rec r;
	unsigned int i;
	int err = 0;

	if (!w)
		return -errno;
	err = recording_writer__set_info(w, &info);
	for (i = 0; i < n && !err; i++) {
		r = make_call(i);
		err = recording_writer__add_call(w, &r, f, make_frames(i, f));
	}
	if (!err)
		err = recording_writer__add_exit(w, &x);
	if (!err)
		err = recording_writer__add_sample(w, &smp);
	if (!err)
		err = recording_writer__add_stop(w, &stop);
	if (!err)
		err = recording_writer__set_info(w, &info);	/* unchanged: not written */
	if (err) {
		recording_writer__close(w);
		return err;
	}
	return recording_writer__close(w);
}

static void test_round_trip(void)
{
	const char *path = tmp_path("rt");
	struct rec_sample want_sample = make_sample();
	struct rec_stop want_stop = make_stop();
	struct replay_stats st;
	struct seen s = { 0 };
	char warn[320];
	int err;

	CHECK_EQ(write_recording(path, 1000), 0, "write");
	err = recording__replay(path, &ops, &s, &st);
	CHECK_EQ(err, 0, "replay");
	CHECK_EQ(s.headers, 1, "header");
	CHECK_EQ(s.calls, 1000, "calls");
	CHECK_EQ(s.bad_calls, 0, "calls that differ");
	CHECK_EQ(st.calls, 1000, "counted");
	CHECK_EQ(s.exits, 1, "exit");
	CHECK(s.exit.pid == 4002 && s.exit.ts_ns == 7000000000ULL && !strcmp(s.exit.comm, "leaver"),
	      "exit fields", "pid %u comm %s", s.exit.pid, s.exit.comm);
	CHECK_EQ(s.samples, 1, "sample");
	CHECK(!memcmp(&s.sample, &want_sample, sizeof(want_sample)), "sample fields", "differ");
	CHECK_EQ(s.stops, 1, "stop");
	CHECK(!memcmp(&s.stop, &want_stop, sizeof(want_stop)), "stop fields", "differ");
	CHECK_EQ(s.infos, 1, "info written once while it did not change");
	CHECK(s.info.platform_forced == 1 && s.info.platform_driver == 2 && s.info.dropped == 33 &&
	      s.info.sample_interval_ms == 1000 && s.info.pages_unseen == 1, "info fields", "differ");
	CHECK(st.file.complete && !st.damaged, "complete", "damaged %d", st.damaged);
	CHECK(!replay_stats__warning(&st, warn, sizeof(warn)), "no warning", "%s", warn);
	/* Interned: few distinct strings and stacks for 1000 calls. */
	CHECK(st.stacks <= 16 && st.strings <= 10, "interned", "%llu stacks %llu strings",
	      (unsigned long long)st.stacks, (unsigned long long)st.strings);
	unlink(path);
}

/* Deltas restart with every chunk: many chunks decode the same. */
static void test_many_chunks(void)
{
	const char *path = tmp_path("many");
	struct replay_stats st;
	struct seen s = { 0 };

	CHECK_EQ(write_recording(path, 60000), 0, "write");
	CHECK_EQ(recording__replay(path, &ops, &s, &st), 0, "replay");
	CHECK(st.file.chunks >= 3, "chunks", "%llu", (unsigned long long)st.file.chunks);
	CHECK_EQ(s.calls, 60000, "calls");
	CHECK_EQ(s.bad_calls, 0, "calls that differ");
	unlink(path);
}

/* A realistic mix compresses to well under 64 bytes a call. */
static void test_bytes_per_call(void)
{
	const char *path = tmp_path("size");
	struct recording_writer *w = recording_writer__open(path, 0);
	struct recording_wstats ws;
	struct sym_frame f[12];
	struct umt_call_rec r;
	unsigned int i, k;
	uint64_t handle = 0x7f1234000000ULL, ts = 1ULL << 40;

	if (!CHECK(w, "open", "errno %d", errno))
		return;
	for (k = 0; k < 12; k++)
		f[k] = (struct sym_frame){ .func = k % 3 ? "at::native::empty_cuda" : "c10::alloc",
					   .module = "libtorch_cuda.so", .addr = 0x7f0000 + k * 64,
					   .offset = k * 8 };
	for (i = 0; i < 100000; i++) {
		r = make_call(0);
		r.api = i % 2 ? UMT_API_MEM_FREE_V2 : UMT_API_MEM_ALLOC_V2;
		r.is_free = i % 2;
		ts += 20000 + (i * 7919) % 5000;
		r.ts_ns = ts;
		r.duration_ns = 3000 + (i * 104729) % 20000;
		r.tid = r.pid + i % 4;
		r.size = i % 2 ? 0 : 65536ULL << (i % 5);
		if (!(i % 2))
			handle += 0x200000 * (1 + i % 3);
		r.handle = handle;
		r.pages_taken = i % 2 ? 0 : r.size / 4096 + i % 3;
		r.pages_freed = i % 2 ? 16 + i % 2 : 0;
		f[1].addr = 0x7f0000 + (i % 8) * 4;	/* 8 call sites */
		recording_writer__add_call(w, &r, f, 12);
	}
	recording_writer__flush(w);
	recording_writer__stats(w, &ws);
	printf("    %.1f bytes per call (%llu raw) over %llu calls, %llu stacks\n",
	       (double)ws.file_bytes / ws.calls, (unsigned long long)ws.raw_bytes / ws.calls,
	       (unsigned long long)ws.calls, (unsigned long long)ws.stacks);
	CHECK((double)ws.file_bytes / ws.calls < 64, "bytes per call", "%.1f",
	      (double)ws.file_bytes / ws.calls);
	CHECK_EQ(ws.stacks, 8, "stacks");
	recording_writer__close(w);
	unlink(path);
}

static uint8_t *slurp(const char *path, size_t *len)
{
	struct stat sb;
	uint8_t *buf = NULL;
	int fd = open(path, O_RDONLY);

	if (fd >= 0 && !fstat(fd, &sb) && (buf = malloc((size_t)sb.st_size + 1)) &&
	    read(fd, buf, (size_t)sb.st_size) == sb.st_size)
		*len = (size_t)sb.st_size;
	if (fd >= 0)
		close(fd);
	return buf;
}

/* Cut anywhere: the calls before the cut come back exactly, none after. */
static void test_truncated(void)
{
	const char *path = tmp_path("cut");
	struct replay_stats st;
	size_t len = 0, cut, bad = 0;
	char warn[320];
	uint8_t *b;

	CHECK_EQ(write_recording(path, 60000), 0, "write");
	b = slurp(path, &len);
	if (!CHECK(b, "slurp", "no file"))
		return;
	for (cut = RECFILE_HDR_SIZE; cut < len; cut += len / 60 + 1) {
		struct seen s = { 0 };

		if (recording__replay_mem(b, cut, &ops, &s, &st) || s.bad_calls ||
		    st.file.complete || !replay_stats__warning(&st, warn, sizeof(warn)) ||
		    st.file.good_bytes + st.file.lost_bytes != cut)
			bad++;
	}
	CHECK_EQ(bad, 0, "cuts read wrong");
	free(b);
	unlink(path);
}

/* A record that decodes wrong in a chunk with a good CRC stops the replay there. */
static void test_malformed_record(void)
{
	const char *path = tmp_path("malformed");
	struct recfile_writer *f = recfile_writer__open(path, 0);
	/* type 99 (unknown, skipped), then an EXIT naming string 5, never defined */
	static const uint8_t recs[] = { 99, 3, 'x', 'y', 'z', 4, 3, 1, 2, 5 };
	static const uint8_t exit_ok[] = { 4, 3, 9, 8, 0 };
	struct replay_stats st;
	struct seen s = { 0 };
	char warn[320];

	if (!CHECK(f, "open", "errno %d", errno))
		return;
	recfile_writer__append(f, exit_ok, sizeof(exit_ok));
	recfile_writer__flush(f);
	recfile_writer__append(f, recs, sizeof(recs));
	recfile_writer__flush(f);
	recfile_writer__append(f, exit_ok, sizeof(exit_ok));
	recfile_writer__close(f);
	CHECK_EQ(recording__replay(path, &ops, &s, &st), 0, "replay");
	CHECK_EQ(s.exits, 1, "the exit before it");
	CHECK(s.exit.pid == 8 && s.exit.ts_ns == 9, "exit", "pid %u", s.exit.pid);
	CHECK_EQ(st.skipped, 1, "unknown type skipped");
	CHECK(st.damaged && strstr(st.file.why, "malformed exit record"), "why", "%s",
	      st.file.why);
	CHECK_EQ(st.file.chunks, 1, "chunks read");
	CHECK_EQ(st.file.lost_chunks, 2, "that chunk and the last");
	CHECK(replay_stats__warning(&st, warn, sizeof(warn)) && strstr(warn, "lost"), "warning",
	      "%s", warn);
	printf("    %s\n", warn);
	unlink(path);
}

static void test_not_a_recording(void)
{
	const char *path = tmp_path("text");
	struct replay_stats st;
	struct seen s = { 0 };
	int fd, err;

	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (write(fd, "hello, world\n", 13) != 13)
		perror("write");
	close(fd);
	err = recording__replay(path, &ops, &s, &st);
	CHECK(err == -EINVAL && strstr(st.why, "not a umtrace recording"), "magic", "%d %s", err,
	      st.why);
	CHECK_EQ(s.headers, 0, "no header callback");
	unlink(path);
	err = recording__replay(path, &ops, &s, &st);
	CHECK(err == -ENOENT && st.why[0], "missing", "%d %s", err, st.why);
}

static void test_parse_psi_vmstat(void)
{
	struct rec_sample s;

	memset(&s, 0, sizeof(s));
	CHECK_EQ(rec_sample__parse_psi("some avg10=12.34 avg60=1.00 avg300=0.10 total=98765\n"
				       "full avg10=0.05 avg60=0.00 avg300=0.00 total=12\n", &s),
		 0, "psi");
	CHECK(s.has_psi && s.psi_some_avg10 == 1234 && s.psi_full_avg10 == 5 &&
	      s.psi_some_total_us == 98765 && s.psi_full_total_us == 12, "psi fields",
	      "%u %u %llu %llu", s.psi_some_avg10, s.psi_full_avg10,
	      (unsigned long long)s.psi_some_total_us, (unsigned long long)s.psi_full_total_us);
	CHECK_EQ(rec_sample__parse_psi("nonsense\n", &s), -EINVAL, "bad psi");
	CHECK(!s.has_psi, "no psi", "has_psi");
	rec_sample__parse_vmstat("nr_free_pages 100\nallocstall_dma 1\nallocstall_normal 2\n"
				 "allocstall_movable 3\npgscan_kswapd 1000\npgscan_direct 40\n"
				 "pgscan_direct_throttle 99\npgsteal_direct 30\n"
				 "pgscan_direct_normal 2\npgsteal_kswapd 500\n", &s);
	CHECK(s.allocstall == 6 && s.pgscan_direct == 42 && s.pgsteal_direct == 30, "vmstat",
	      "%llu %llu %llu", (unsigned long long)s.allocstall,
	      (unsigned long long)s.pgscan_direct, (unsigned long long)s.pgsteal_direct);
	CHECK_EQ(rec_sample__read(&s, NULL), 0, "read");
	CHECK(s.mem_total && s.mem_available && s.ts_ns, "read fields", "total %llu",
	      (unsigned long long)s.mem_total);
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	RUN_SUBTEST(test_round_trip);
	RUN_SUBTEST(test_many_chunks);
	RUN_SUBTEST(test_bytes_per_call);
	RUN_SUBTEST(test_truncated);
	RUN_SUBTEST(test_malformed_record);
	RUN_SUBTEST(test_not_a_recording);
	RUN_SUBTEST(test_parse_psi_vmstat);
	rmdir(dir);
	return CHECK_EXIT();
}
