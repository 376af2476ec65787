// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The guard's Prometheus textfile. `test_metrics --write PATH` writes the
 * sample file for tests/integration/test_guard_files.py (promtool).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "check.h"
#include "guardd/report.h"
#include "lib/out_file.h"

static char dir[] = "/tmp/umtrace-test-metrics-XXXXXX";

static const struct guard_metrics_count stops[] = {
	{ "drop", 1 },
	{ "floor", 0 },
};

static const struct guard_metrics_process procs[] = {
	{ .pid = 123, .comm = "python3", .host_bytes = 9663676416ULL, .stopped = true },
	{ .pid = 7, .comm = "a\"b\\c\nd" },
};

static const struct guard_metrics_torch torch[] = {
	{ .pid = 123, .comm = "python3", .device = 0, .allocated = 41943040,
	  .reserved = 668991488, .reserved_known = true },
	{ .pid = 123, .comm = "python3", .device = 1, .allocated = 1048576 },	/* 3-argument hook */
};

static const struct guard_snapshot sample = {
	.status = {
		.floor = 2621440000ULL,
		.low = 3145728000ULL,
		.drop = 2621440000ULL,
		.headroom = -1048576,
		.reclaims = 5,
		.checks = 100,
		.samples = 42,
		.pages_on = true,
		.arms = 3,
	},
	.up = true,
	.mem_available = 2620391424ULL,
	.mem_free = 1000000000ULL,
	.mem_total = 68719476736ULL,
	.stops = stops,
	.n_stops = 2,
	.kernel_decisions = 2,
	.last_stop_time = 1700000000.5,
	.log_dropped = 7,
	.log_stops_dropped = 1,
	.file_writes_failed = 3,
	.file_writes_superseded = 4,
	.procs = procs,
	.n_procs = 2,
	.torch_on = true,
	.torch = torch,
	.n_torch = 2,
};

static const char expected[] =
	"# HELP umtrace_guard_up 1 while umtrace guard runs, 0 in the file it leaves at exit.\n"
	"# TYPE umtrace_guard_up gauge\n"
	"umtrace_guard_up 1\n"
	"# HELP umtrace_guard_floor_bytes The guard's FLOOR threshold.\n"
	"# TYPE umtrace_guard_floor_bytes gauge\n"
	"umtrace_guard_floor_bytes 2621440000\n"
	"# HELP umtrace_guard_low_bytes The guard's LOW threshold.\n"
	"# TYPE umtrace_guard_low_bytes gauge\n"
	"umtrace_guard_low_bytes 3145728000\n"
	"# HELP umtrace_guard_drop_bytes The guard's DROP threshold, per sample.\n"
	"# TYPE umtrace_guard_drop_bytes gauge\n"
	"umtrace_guard_drop_bytes 2621440000\n"
	"# HELP umtrace_guard_auto_resume_bytes Stopped jobs are resumed above this (0: only by an operator).\n"
	"# TYPE umtrace_guard_auto_resume_bytes gauge\n"
	"umtrace_guard_auto_resume_bytes 0\n"
	"# HELP umtrace_guard_headroom_bytes Host memory left above the floor (negative below it).\n"
	"# TYPE umtrace_guard_headroom_bytes gauge\n"
	"umtrace_guard_headroom_bytes -1048576\n"
	"# HELP umtrace_guard_mem_available_bytes MemAvailable at the last sample.\n"
	"# TYPE umtrace_guard_mem_available_bytes gauge\n"
	"umtrace_guard_mem_available_bytes 2620391424\n"
	"# HELP umtrace_guard_mem_free_bytes MemFree at the last sample.\n"
	"# TYPE umtrace_guard_mem_free_bytes gauge\n"
	"umtrace_guard_mem_free_bytes 1000000000\n"
	"# HELP umtrace_guard_mem_total_bytes MemTotal.\n"
	"# TYPE umtrace_guard_mem_total_bytes gauge\n"
	"umtrace_guard_mem_total_bytes 68719476736\n"
	"# HELP umtrace_guard_stops_total Processes stopped (or, in a dry run, not), by reason.\n"
	"# TYPE umtrace_guard_stops_total counter\n"
	"umtrace_guard_stops_total{reason=\"drop\"} 1\n"
	"umtrace_guard_stops_total{reason=\"floor\"} 0\n"
	"# HELP umtrace_guard_resumes_total Processes resumed by auto-resume.\n"
	"# TYPE umtrace_guard_resumes_total counter\n"
	"umtrace_guard_resumes_total 0\n"
	"# HELP umtrace_guard_stopped_processes Processes the guard holds stopped now.\n"
	"# TYPE umtrace_guard_stopped_processes gauge\n"
	"umtrace_guard_stopped_processes 1\n"
	"# HELP umtrace_guard_signal_failures_total Stops or resumes that could not be delivered.\n"
	"# TYPE umtrace_guard_signal_failures_total counter\n"
	"umtrace_guard_signal_failures_total 0\n"
	"# HELP umtrace_guard_reclaim_events_total Direct reclaim entries seen, host-wide.\n"
	"# TYPE umtrace_guard_reclaim_events_total counter\n"
	"umtrace_guard_reclaim_events_total 5\n"
	"# HELP umtrace_guard_kernel_decisions_total Stops decided by the guard's kernel side.\n"
	"# TYPE umtrace_guard_kernel_decisions_total counter\n"
	"umtrace_guard_kernel_decisions_total 2\n"
	"# HELP umtrace_guard_admission_checks_total GPU calls checked by the kernel side.\n"
	"# TYPE umtrace_guard_admission_checks_total counter\n"
	"umtrace_guard_admission_checks_total 100\n"
	"# HELP umtrace_guard_samples_total /proc/meminfo samples taken.\n"
	"# TYPE umtrace_guard_samples_total counter\n"
	"umtrace_guard_samples_total 42\n"
	"# HELP umtrace_guard_page_programs_attached 1: the per-page programs are attached (near the floor, or always).\n"
	"# TYPE umtrace_guard_page_programs_attached gauge\n"
	"umtrace_guard_page_programs_attached 1\n"
	"# HELP umtrace_guard_page_program_arms_total Times the per-page programs were attached near the floor.\n"
	"# TYPE umtrace_guard_page_program_arms_total counter\n"
	"umtrace_guard_page_program_arms_total 3\n"
	"# HELP umtrace_guard_last_stop_timestamp_seconds When the last process was stopped, in Unix time (0: never).\n"
	"# TYPE umtrace_guard_last_stop_timestamp_seconds gauge\n"
	"umtrace_guard_last_stop_timestamp_seconds 1700000000.500\n"
	"# HELP umtrace_guard_log_lines_dropped_total Log lines the daemon dropped: its log queue "
	"was full (a stalled stderr).\n"
	"# TYPE umtrace_guard_log_lines_dropped_total counter\n"
	"umtrace_guard_log_lines_dropped_total 7\n"
	"# HELP umtrace_guard_log_stop_lines_dropped_total Of those, lines that told a stop.\n"
	"# TYPE umtrace_guard_log_stop_lines_dropped_total counter\n"
	"umtrace_guard_log_stop_lines_dropped_total 1\n"
	"# HELP umtrace_guard_file_writes_failed_total Writes of the state file or the metrics "
	"that failed.\n"
	"# TYPE umtrace_guard_file_writes_failed_total counter\n"
	"umtrace_guard_file_writes_failed_total 3\n"
	"# HELP umtrace_guard_file_writes_superseded_total Contents of those files replaced by "
	"newer ones before a slow disk took them.\n"
	"# TYPE umtrace_guard_file_writes_superseded_total counter\n"
	"umtrace_guard_file_writes_superseded_total 4\n"
	"# HELP umtrace_seconds_to_floor When the host reaches the guard's floor: at the pace "
	"its metric falls now, or (pid, comm) that job's GPU-attributed host memory grows; "
	"on the shortest horizon that shows a slide.\n"
	"# TYPE umtrace_seconds_to_floor gauge\n"
	"# HELP umtrace_guard_process_host_bytes Host memory a process took in GPU allocation calls and holds.\n"
	"# TYPE umtrace_guard_process_host_bytes gauge\n"
	"umtrace_guard_process_host_bytes{pid=\"123\",comm=\"python3\"} 9663676416\n"
	"umtrace_guard_process_host_bytes{pid=\"7\",comm=\"a\\\"b\\\\\\\\c\\\\x0ad\"} 0\n"
	"# HELP umtrace_guard_process_stopped 1 if the guard holds the process stopped.\n"
	"# TYPE umtrace_guard_process_stopped gauge\n"
	"umtrace_guard_process_stopped{pid=\"123\",comm=\"python3\"} 1\n"
	"umtrace_guard_process_stopped{pid=\"7\",comm=\"a\\\"b\\\\\\\\c\\\\x0ad\"} 0\n"
	"# HELP umtrace_torch_allocated_bytes Bytes in blocks PyTorch's CUDA caching allocator "
	"has handed out (torch.cuda.memory_allocated).\n"
	"# TYPE umtrace_torch_allocated_bytes gauge\n"
	"umtrace_torch_allocated_bytes{pid=\"123\",comm=\"python3\",device=\"0\"} 41943040\n"
	"umtrace_torch_allocated_bytes{pid=\"123\",comm=\"python3\",device=\"1\"} 1048576\n"
	"# HELP umtrace_torch_reserved_bytes Bytes PyTorch's CUDA caching allocator holds "
	"from the driver (torch.cuda.memory_reserved).\n"
	"# TYPE umtrace_torch_reserved_bytes gauge\n"
	"umtrace_torch_reserved_bytes{pid=\"123\",comm=\"python3\",device=\"0\"} 668991488\n";

static char *format(const struct guard_snapshot *m)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	if (metrics__format(f, m)) {
		fclose(f);
		free(buf);
		return NULL;
	}
	fclose(f);
	return buf;
}

static char *slurp(const char *path)
{
	static char buf[16384];
	ssize_t n;
	int fd = open(path, O_RDONLY);

	if (fd < 0)
		return NULL;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return NULL;
	buf[n] = '\0';
	return buf;
}

static const char *in_dir(const char *name)
{
	static char path[4][256];
	static int i;

	i = (i + 1) % 4;
	snprintf(path[i], sizeof(path[i]), "%s/%s", dir, name);
	return path[i];
}

/* Only these names in dir: no temporary file left behind. */
static bool dir_holds(const char *const *names, size_t n)
{
	struct dirent *e;
	size_t seen = 0, i;
	bool ok = true;
	DIR *d = opendir(dir);

	if (!d)
		return false;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		for (i = 0; i < n && strcmp(e->d_name, names[i]); i++)
			;
		if (i == n) {
			printf("  unexpected %s\n", e->d_name);
			ok = false;
		}
		seen++;
	}
	closedir(d);
	return ok && seen == n;
}

static void test_exact_text(void)
{
	char *text = format(&sample);
	static struct guard_snapshot m;

	CHECK(text && !strcmp(text, expected), "text", "got:\n%s", text ? text : "(null)");
	free(text);

	/* Nothing yet: zeros, never-stopped, no label rows. */
	text = format(&m);
	CHECK(text && strstr(text, "\numtrace_guard_up 0\n") &&
	      strstr(text, "\numtrace_guard_last_stop_timestamp_seconds 0\n") &&
	      strstr(text, "# TYPE umtrace_guard_stops_total counter\n# HELP") &&
	      !strstr(text, "{"), "empty", "got:\n%s", text ? text : "(null)");
	free(text);
}

/* The flight recorder's figures only where there is one. */
static void test_flight_recorder(void)
{
	static struct guard_snapshot m;
	char *text;

	m = sample;
	m.flight_on = true;
	m.flight_bytes = 16777216;
	m.flight_evicted = 9;
	text = format(&m);
	CHECK(text && strstr(text, "\numtrace_guard_flight_recorder_bytes 16777216\n") &&
	      strstr(text, "\numtrace_guard_flight_recorder_evicted_total 9\n"), "on",
	      "got:\n%s", text ? text : "(null)");
	free(text);
}

/* --warn-eta: its families only when it is on; each job warned, by label. */
static void test_warned(void)
{
	static struct guard_snapshot m;
	char *text;

	static const struct guard_metrics_process jobs[] = {
		{ .pid = 9, .comm = "calm" },
		{ .pid = 123, .comm = "py\"3", .warned = true },
	};

	m = sample;
	m.warn_on = true;
	m.status.warnings = 2;
	m.procs = jobs;
	m.n_procs = 2;
	text = format(&m);
	CHECK(text && strstr(text, "# TYPE umtrace_guard_warnings_total counter\n"
			     "umtrace_guard_warnings_total 2\n") &&
	      strstr(text, "# TYPE umtrace_guard_process_warned gauge\n"
			   "umtrace_guard_process_warned{pid=\"9\",comm=\"calm\"} 0\n"
			   "umtrace_guard_process_warned{pid=\"123\",comm=\"py\\\"3\"} 1\n"),
	      "on", "got:\n%s", text ? text : "(null)");
	free(text);
	text = format(&sample);
	CHECK(text && !strstr(text, "warn"), "off: absent", "got:\n%s", text ? text : "(null)");
	free(text);
}

/* The seed's slide: a sample only while one is named, with its horizon. */
static void test_seconds_to_floor(void)
{
	static struct guard_snapshot m;
	char *text;

	static const struct guard_metrics_process jobs[] = {
		{ .pid = 9, .comm = "still" },
		{ .pid = 123, .comm = "py\"3", .slide_horizon = 60, .seconds_to_floor = 42 },
	};

	m = sample;
	m.status.slide_horizon = 900;
	m.status.slide_per_hour = 1ULL << 30;
	m.status.seconds_to_floor = 460800;
	m.procs = jobs;
	m.n_procs = 2;
	text = format(&m);
	CHECK(text && strstr(text, "# TYPE umtrace_seconds_to_floor gauge\n"
			     "umtrace_seconds_to_floor{horizon=\"900s\"} 460800\n"
			     "umtrace_seconds_to_floor{horizon=\"60s\",pid=\"123\","
			     "comm=\"py\\\"3\"} 42\n# HELP"),
	      "named", "got:\n%s", text ? text : "(null)");
	free(text);
	text = format(&sample);
	CHECK(text && !strstr(text, "\numtrace_seconds_to_floor"), "absent", "got:\n%s",
	      text ? text : "(null)");
	free(text);
}

static void test_label_escaping(void)
{
	static const struct guard_metrics_process p[] = {
		{ .pid = 1, .comm = "back\\slash" },
		{ .pid = 2, .comm = "quo\"te" },
		{ .pid = 3, .comm = "new\nline" },
		{ .pid = 4, .comm = "tab\tcr\rdel\x7f" },
		{ .pid = 5, .comm = "caf\xc3\xa9" },		/* UTF-8: kept */
		{ .pid = 6, .comm = "bad\xff\xc3" },		/* not UTF-8 */
		{ .pid = 7, .comm = "over\xc0\xaflong" },	/* an overlong '/' */
		{ .pid = 8, .comm = "sur\xed\xa0\x80" },	/* a surrogate */
		{ .pid = 9, .comm = "cut\xe2\x82" },		/* a sequence cut short by the 15-byte comm */
		{ .pid = 10, .comm = NULL },
	};
	static const char *const want[] = {
		"{pid=\"1\",comm=\"back\\\\\\\\slash\"} 0\n",
		"{pid=\"2\",comm=\"quo\\\"te\"} 0\n",
		"{pid=\"3\",comm=\"new\\\\x0aline\"} 0\n",
		"{pid=\"4\",comm=\"tab\\\\x09cr\\\\x0ddel\\\\x7f\"} 0\n",
		"{pid=\"5\",comm=\"caf\xc3\xa9\"} 0\n",
		"{pid=\"6\",comm=\"bad\\\\xff\\\\xc3\"} 0\n",
		"{pid=\"7\",comm=\"over\\\\xc0\\\\xaflong\"} 0\n",
		"{pid=\"8\",comm=\"sur\\\\xed\\\\xa0\\\\x80\"} 0\n",
		"{pid=\"9\",comm=\"cut\\\\xe2\\\\x82\"} 0\n",
		"{pid=\"10\",comm=\"\"} 0\n",
	};
	static const struct guard_metrics_count r[] = { { "a\"b", 3 } };
	static struct guard_snapshot m = { .procs = p, .n_procs = 10, .stops = r, .n_stops = 1 };
	char *text = format(&m);
	size_t i;

	CHECK(text != NULL, "format", "failed");
	if (!text)
		return;
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		CHECK(strstr(text, want[i]) != NULL, "label", "%s not in:\n%s", want[i], text);
	CHECK(strstr(text, "umtrace_guard_stops_total{reason=\"a\\\"b\"} 3\n") != NULL, "reason",
	      "got:\n%s", text);
	free(text);
}

/*
 * As the guard writes its metrics file (guardd/report.c, through its
 * file writer): the text, renamed over path through a temporary file
 * beside it, mode METRICS_MODE. 0 or -errno.
 */
static int metrics__write(const char *path, const struct guard_snapshot *m)
{
	size_t len;
	char *buf = metrics__text(m, &len);
	int err;

	if (!buf)
		return -errno;
	err = out_file__replace(path, buf, len, METRICS_MODE);
	free(buf);
	return err;
}

static void test_atomic_replace(void)
{
	static const char *const only[] = { "umtrace.prom" };
	const char *path = in_dir("umtrace.prom");
	static struct guard_snapshot m;
	struct stat st1, st2;
	mode_t old;
	char *got;

	old = umask(077);
	CHECK_EQ(metrics__write(path, &sample), 0, "first write");
	umask(old);
	got = slurp(path);
	CHECK(got && !strcmp(got, expected), "content", "got:\n%s", got ? got : "(null)");
	CHECK(!stat(path, &st1) && (st1.st_mode & 07777) == 0644, "mode 0644 whatever the umask",
	      "mode %o", st1.st_mode & 07777);
	m = sample;
	m.up = false;
	m.status.samples = 43;
	CHECK_EQ(metrics__write(path, &m), 0, "second write");
	got = slurp(path);
	CHECK(got && strstr(got, "\numtrace_guard_up 0\n") &&
	      strstr(got, "\numtrace_guard_samples_total 43\n"), "replaced", "got:\n%s",
	      got ? got : "(null)");
	/* A new inode: renamed over, never rewritten in place under a reader. */
	CHECK(!stat(path, &st2) && st2.st_ino != st1.st_ino, "new inode", "same inode %lu",
	      (unsigned long)st2.st_ino);
	CHECK(dir_holds(only, 1), "no temporary left", "see above");
	unlink(path);
}

static void test_symlinks(void)
{
	static const char *const after[] = { "victim", "link.prom", "real", "dirlink" };
	char victim[256], link[256], *got;
	struct stat st;
	int fd;

	snprintf(victim, sizeof(victim), "%s", in_dir("victim"));
	snprintf(link, sizeof(link), "%s", in_dir("link.prom"));
	/* A symlink at the target is replaced, not written through. */
	fd = open(victim, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd >= 0) {
		CHECK(write(fd, "keep\n", 5) == 5, "victim", "write");
		close(fd);
	}
	CHECK(!symlink(victim, link), "symlink", "%s", strerror(errno));
	CHECK_EQ(metrics__write(link, &sample), 0, "write over a symlink");
	CHECK(!lstat(link, &st) && S_ISREG(st.st_mode), "now a file", "mode %o", st.st_mode);
	got = slurp(victim);
	CHECK(got && !strcmp(got, "keep\n"), "victim untouched", "got '%s'", got);

	/*
	 * A symlinked directory is followed: packages link the textfile
	 * directory, and the directory is root's to choose.
	 */
	CHECK(!mkdir(in_dir("real"), 0755), "mkdir", "%s", strerror(errno));
	CHECK(!symlink(in_dir("real"), in_dir("dirlink")), "dir symlink", "%s", strerror(errno));
	CHECK_EQ(metrics__write(in_dir("dirlink/m.prom"), &sample), 0, "through a dir link");
	got = slurp(in_dir("real/m.prom"));
	CHECK(got && !strcmp(got, expected), "in the real dir", "got '%s'", got);
	CHECK(dir_holds(after, 4), "no temporary left", "see above");
	unlink(in_dir("real/m.prom"));
	rmdir(in_dir("real"));
	unlink(in_dir("dirlink"));
	unlink(link);
	unlink(victim);
}

static void test_errors(void)
{
	CHECK_EQ(metrics__write(in_dir("nodir/m.prom"), &sample), -ENOENT, "missing dir");
	CHECK_EQ(metrics__write(in_dir(""), &sample), -EISDIR, "no file name");
	CHECK(!mkdir(in_dir("sub.prom"), 0755), "mkdir", "%s", strerror(errno));
	CHECK(metrics__write(in_dir("sub.prom"), &sample) < 0, "a directory at the target",
	      "wrote");
	rmdir(in_dir("sub.prom"));
	CHECK(dir_holds(NULL, 0), "no temporary left", "see above");
}

int main(int argc, char **argv)
{
	int err;

	if (argc == 3 && !strcmp(argv[1], "--write")) {
		err = metrics__write(argv[2], &sample);
		if (err)
			fprintf(stderr, "%s: %s\n", argv[2], strerror(-err));
		return err ? 1 : 0;
	}
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	RUN_SUBTEST(test_exact_text);
	RUN_SUBTEST(test_seconds_to_floor);
	RUN_SUBTEST(test_warned);
	RUN_SUBTEST(test_flight_recorder);
	RUN_SUBTEST(test_label_escaping);
	RUN_SUBTEST(test_atomic_replace);
	RUN_SUBTEST(test_symlinks);
	RUN_SUBTEST(test_errors);
	rmdir(dir);
	return CHECK_EXIT();
}
