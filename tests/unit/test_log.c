// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The non-blocking log: with stderr a full pipe nobody reads, logging
 * returns at once; a full queue drops ordinary lines before stop lines;
 * the count of dropped lines comes out once stderr takes lines again.
 * The file writer: a newer content replaces one still waiting.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "check.h"
#include "lib/sys.h"
#include "lib/file_writer.h"
#include "lib/log.h"

/* stderr becomes a full pipe; returns its read end, or -1. */
static int stderr_to_full_pipe(int *saved)
{
	char junk[4096];
	int fds[2], fl;

	memset(junk, 'x', sizeof(junk));
	if (pipe(fds))
		return -1;
	fcntl(fds[0], F_SETPIPE_SZ, 4096);
	fl = fcntl(fds[1], F_GETFL);
	fcntl(fds[1], F_SETFL, fl | O_NONBLOCK);
	while (write(fds[1], junk, sizeof(junk)) > 0)
		;
	fcntl(fds[1], F_SETFL, fl);
	fflush(stderr);
	*saved = dup(STDERR_FILENO);
	dup2(fds[1], STDERR_FILENO);
	close(fds[1]);
	return fds[0];
}

struct reader {
	int fd;
	char *buf;
	size_t len, cap;
};

static void *read_all(void *arg)
{
	struct reader *r = arg;
	ssize_t n;

	while ((n = read(r->fd, r->buf + r->len, r->cap - r->len)) > 0)
		r->len += (size_t)n;
	return NULL;
}

/*
 * Read the pipe now, stop the log (it writes what it holds), and give
 * stderr back, which ends the pipe: all that came out of it.
 */
static char *drain(int rd, int saved, uint64_t *left)
{
	struct reader r = { .fd = rd, .cap = 1 << 20 };
	pthread_t t;

	r.buf = calloc(1, r.cap + 1);
	pthread_create(&t, NULL, read_all, &r);
	*left = log__stop_async(5000);
	dup2(saved, STDERR_FILENO);
	close(saved);
	pthread_join(t, NULL);
	close(rd);
	r.buf[r.len] = '\0';
	return r.buf;
}

static unsigned int count(const char *hay, const char *needle)
{
	unsigned int n = 0;

	while ((hay = strstr(hay, needle))) {
		n++;
		hay += strlen(needle);
	}
	return n;
}

/* As the guard does it: queue, then start the writer. */
static int start_async(unsigned int max_lines)
{
	int err = log__queue(max_lines);

	return err ? err : log__start_writer();
}

static void test_full_stderr_never_blocks(void)
{
	struct log_stats st;
	uint64_t t0, took, left = 0;
	int saved = -1, rd, i;
	char *out;

	rd = stderr_to_full_pipe(&saved);
	if (!CHECK(rd >= 0, "pipe", "%s", strerror(errno)))
		return;
	CHECK_EQ(start_async(8), 0, "start");
	t0 = clock__mono_ns();
	for (i = 0; i < 200; i++) {
		log__printf(LOG_PRIO_INFO, "ordinary line %d\n", i);
		if (i % 50 == 0)
			slog("guard: stop pid=%d", i);
	}
	took = clock__mono_ns() - t0;
	/* 204 lines into a pipe that takes none: it must not have waited. */
	CHECK(took < 200 * 1000000ULL, "never waits", "took %llu ms",
	      (unsigned long long)(took / 1000000));
	log__stats(&st);
	CHECK(st.dropped >= 204 - 9, "dropped", "only %llu of 204 dropped",
	      (unsigned long long)st.dropped);
	CHECK_EQ(st.dropped_stops, 0, "stop lines kept");
	out = drain(rd, saved, &left);
	CHECK_EQ(left, 0, "all written at stop");
	CHECK_EQ(count(out, "guard: stop pid="), 4, "every stop line written");
	CHECK(strstr(out, "log lines dropped"), "dropped said", "no count in %.300s",
	      out + (strlen(out) > 300 ? strlen(out) - 300 : 0));
	log__stats(&st);
	CHECK_EQ(st.queued, st.written + st.dropped, "every line written or dropped");
	free(out);
}

static void test_stop_lines_dropped_last(void)
{
	struct log_stats st;
	uint64_t left = 0;
	int saved = -1, rd, i;
	char *out;

	rd = stderr_to_full_pipe(&saved);
	if (!CHECK(rd >= 0, "pipe", "%s", strerror(errno)))
		return;
	CHECK_EQ(start_async(4), 0, "start");
	for (i = 0; i < 10; i++)
		slog("guard: stop pid=%d", 1000 + i);
	for (i = 0; i < 10; i++)
		log__printf(LOG_PRIO_INFO, "ordinary %d\n", i);
	log__stats(&st);
	/* A stop line goes only to make room for a newer stop line. */
	CHECK(st.dropped_stops > 0 && st.dropped >= st.dropped_stops + 10,
	      "order", "dropped %llu, of which stops %llu",
	      (unsigned long long)st.dropped, (unsigned long long)st.dropped_stops);
	out = drain(rd, saved, &left);
	CHECK(strstr(out, "stop pid=1009"), "newest stop kept", "not in output");
	CHECK(!strstr(out, "ordinary 9"), "ordinary dropped", "an ordinary line outlived a stop");
	free(out);
}

static void test_repeat(void)
{
	struct log_repeat r = { .what = "test: condition" };
	struct log_stats a, b;
	int saved = -1, rd;
	uint64_t left = 0;
	char *out;

	rd = stderr_to_full_pipe(&saved);
	if (!CHECK(rd >= 0, "pipe", "%s", strerror(errno)))
		return;
	CHECK_EQ(start_async(64), 0, "start");
	log__stats(&a);
	log__repeat(&r, 1000, "held %d", 1);
	log__repeat(&r, 2000, "held %d", 2);
	log__repeat(&r, 1000 + LOG_REPEAT_MS - 1, "held %d", 3);
	log__repeat(&r, 1000 + LOG_REPEAT_MS, "held %d", 4);
	log__repeat_end(&r);
	log__repeat_end(&r);
	log__stats(&b);
	CHECK_EQ(b.queued - a.queued, 3, "start, a minute on, end");
	out = drain(rd, saved, &left);
	CHECK(strstr(out, "held 1\n"), "start", "missing");
	CHECK(strstr(out, "held 4 (3 times in the last 60 s)"), "count", "missing: %s", out);
	CHECK(strstr(out, "test: condition: no longer, after 4 times"), "end", "missing");
	free(out);
}

static char *dup_str(const char *s)
{
	return strdup(s);
}

static void test_file_writer_newest_wins(void)
{
	char dir[] = "/tmp/umtrace-test-fw-XXXXXX", path[64], got[64] = "";
	struct file_writer_stats st;
	struct file_writer *w;
	ssize_t n;
	int fd, i;

	if (!CHECK(mkdtemp(dir), "mkdtemp", "%s", strerror(errno)))
		return;
	snprintf(path, sizeof(path), "%s/sub/state", dir);
	w = file_writer__new();
	if (!CHECK(w, "new", "%s", strerror(errno)))
		return;
	for (i = 0; i < 100; i++) {
		char buf[32];

		snprintf(buf, sizeof(buf), "content %d\n", i);
		file_writer__put(w, path, dup_str(buf), strlen(buf), 0600, true);
	}
	file_writer__stats(w, &st);
	CHECK_EQ(st.puts, 100, "puts");
	CHECK_EQ(file_writer__free(w, 5000), 0, "all written");
	fd = open(path, O_RDONLY);
	n = fd >= 0 ? read(fd, got, sizeof(got) - 1) : -1;
	if (fd >= 0)
		close(fd);
	CHECK(n > 0 && !strcmp(got, "content 99\n"), "newest", "got '%s'", got);
	unlink(path);
	snprintf(path, sizeof(path), "%s/sub", dir);
	rmdir(path);
	rmdir(dir);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	RUN_SUBTEST(test_full_stderr_never_blocks);
	RUN_SUBTEST(test_stop_lines_dropped_last);
	RUN_SUBTEST(test_repeat);
	RUN_SUBTEST(test_file_writer_newest_wins);
	return check_subtests_failed ? 1 : 0;
}
