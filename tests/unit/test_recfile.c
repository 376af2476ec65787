// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* The recording container: chunks round trip, damage stops reading cleanly. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"
#include "rec/recfile.h"

static char dir[] = "/tmp/umt-recfile-XXXXXX";

#define tmp_path(name) check_path(dir, name)

static uint8_t *slurp(const char *path, size_t *len)
{
	struct stat sb;
	uint8_t *buf;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || fstat(fd, &sb)) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	buf = malloc((size_t)sb.st_size + 1);
	if (buf && read(fd, buf, (size_t)sb.st_size) != sb.st_size) {
		free(buf);
		buf = NULL;
	}
	close(fd);
	*len = (size_t)sb.st_size;
	return buf;
}

static void spit(const char *path, const uint8_t *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd < 0)
		return;
	if (write(fd, buf, len) != (ssize_t)len)
		perror("write");
	close(fd);
}

/* chunk i holds bytes (i * 7 + j) & 0xff, n_i = 1000 * (i + 1) of them */
static int write_chunks(const char *path, int n)
{
	struct recfile_writer *w = recfile_writer__open(path, 0);
	uint8_t buf[8000];
	int i, j, err = 0;

	if (!w)
		return -errno;
	for (i = 0; i < n && !err; i++) {
		for (j = 0; j < 1000 * (i + 1); j++)
			buf[j] = (uint8_t)(i * 7 + j);
		err = recfile_writer__append(w, buf, (size_t)j);
		if (!err)
			err = recfile_writer__flush(w);
	}
	if (err) {
		recfile_writer__close(w);
		return err;
	}
	return recfile_writer__close(w);
}

static bool chunk_ok(int i, const uint8_t *p, size_t len)
{
	size_t j;

	if (len != (size_t)(1000 * (i + 1)))
		return false;
	for (j = 0; j < len; j++)
		if (p[j] != (uint8_t)(i * 7 + j))
			return false;
	return true;
}

/* Read every chunk of r, checking each; how many were good. */
static int read_all(struct recfile_reader *r, bool *all_ok)
{
	const void *data;
	size_t len;
	int n = 0;

	*all_ok = true;
	while (recfile_reader__next(r, &data, &len) > 0) {
		if (!chunk_ok(n, data, len) && len)
			*all_ok = false;
		n++;
	}
	return n;
}

static void test_round_trip(void)
{
	const char *path = tmp_path("rt");
	struct recfile_reader *r;
	struct recfile_rstats st;
	struct stat sb;
	char why[128];
	bool ok;
	int n;

	CHECK_EQ(write_chunks(path, 4), 0, "write");
	CHECK(!stat(path, &sb) && (sb.st_mode & 0777) == 0600, "mode", "0%o", sb.st_mode & 0777);
	r = recfile_reader__open(path, why, sizeof(why));
	if (!CHECK(r, "open", "%s", why))
		return;
	CHECK_EQ(recfile_reader__info(r)->version, RECFILE_VERSION, "version");
	CHECK_EQ(recfile_reader__info(r)->page_size, (uint32_t)sysconf(_SC_PAGESIZE), "page");
	CHECK(recfile_reader__info(r)->start_mono_ns > 0, "mono", "0");
	CHECK(recfile_reader__info(r)->hostname[0], "host", "empty");
	n = read_all(r, &ok);
	CHECK_EQ(n, 5, "chunks and the empty last one");
	CHECK(ok, "content", "a chunk differs");
	recfile_reader__stats(r, &st);
	CHECK(st.complete && !st.damaged, "complete", "complete %d damaged %d", st.complete,
	      st.damaged);
	CHECK_EQ(st.good_bytes, (uint64_t)sb.st_size, "good bytes");
	CHECK_EQ(st.lost_bytes, 0, "lost");
	recfile_reader__close(r);
	unlink(path);
}

static void test_exclusive_and_force(void)
{
	const char *path = tmp_path("excl"), *target = tmp_path("target");
	struct recfile_writer *w;
	struct stat sb;
	size_t len = 0;
	uint8_t *b;

	CHECK_EQ(write_chunks(path, 1), 0, "first");
	w = recfile_writer__open(path, 0);
	CHECK(!w && errno == EEXIST, "exists", "w %p errno %d", (void *)w, errno);
	recfile_writer__close(w);
	/* A symlink at path is never followed. */
	unlink(path);
	spit(target, (const uint8_t *)"precious", 8);
	CHECK_EQ(symlink(target, path), 0, "symlink");
	w = recfile_writer__open(path, 0);
	CHECK(!w && errno == EEXIST, "symlink refused", "errno %d", errno);
	recfile_writer__close(w);
	w = recfile_writer__open(path, RECFILE_FORCE);
	CHECK(w, "force", "errno %d", errno);
	CHECK_EQ(recfile_writer__close(w), 0, "close");
	CHECK(!lstat(path, &sb) && S_ISREG(sb.st_mode) && (sb.st_mode & 0777) == 0600,
	      "replaced", "mode 0%o", sb.st_mode);
	b = slurp(target, &len);
	CHECK(b && len == 8 && !memcmp(b, "precious", 8), "target untouched", "len %zu", len);
	free(b);
	unlink(target);
	unlink(path);
}

/* A device or FIFO named as the recording: refused, with --force too, and kept. */
static void test_special_files_kept(void)
{
	const char *null = tmp_path("null"), *fifo = tmp_path("fifo");
	static const unsigned int flags[] = { 0, RECFILE_FORCE };
	struct recfile_writer *w;
	struct stat sb;
	unsigned int i;

	if (!CHECK(!mknod(null, S_IFCHR | 0666, makedev(1, 3)) && !mkfifo(fifo, 0600),
		   "make", "errno %d", errno))
		goto out;
	for (i = 0; i < 2; i++) {
		w = recfile_writer__open(null, flags[i]);
		CHECK(!w && errno == EINVAL, "device refused", "flags %u errno %d", flags[i], errno);
		recfile_writer__close(w);
		w = recfile_writer__open(fifo, flags[i]);
		CHECK(!w && errno == EINVAL, "fifo refused", "flags %u errno %d", flags[i], errno);
		recfile_writer__close(w);
	}
	CHECK(!lstat(null, &sb) && S_ISCHR(sb.st_mode), "device kept", "mode 0%o", sb.st_mode);
	CHECK(!lstat(fifo, &sb) && S_ISFIFO(sb.st_mode), "fifo kept", "mode 0%o", sb.st_mode);
out:
	unlink(null);
	unlink(fifo);
}

static void test_flush_by_size_and_time(void)
{
	const char *path = tmp_path("flush");
	struct recfile_writer *w = recfile_writer__open(path, RECFILE_SYNC);
	static uint8_t big[RECFILE_CHUNK_BYTES];
	struct recfile_wstats st;
	struct stat sb;

	if (!CHECK(w, "open", "errno %d", errno))
		return;
	memset(big, 'x', sizeof(big));
	CHECK_EQ(recfile_writer__append(w, big, sizeof(big)), 0, "big");
	recfile_writer__stats(w, &st);
	CHECK_EQ(st.chunks, 1, "full chunk written at once");
	CHECK(!stat(path, &sb) && (uint64_t)sb.st_size == st.file_bytes, "on disk",
	      "%lld vs %llu", (long long)sb.st_size, (unsigned long long)st.file_bytes);
	CHECK_EQ(recfile_writer__append(w, "abc", 3), 0, "small");
	CHECK_EQ(recfile_writer__tick(w), 0, "tick");
	recfile_writer__stats(w, &st);
	CHECK_EQ(st.chunks, 1, "young chunk kept");
	usleep((RECFILE_FLUSH_MS + 50) * 1000);
	CHECK_EQ(recfile_writer__tick(w), 0, "tick");
	recfile_writer__stats(w, &st);
	CHECK_EQ(st.chunks, 2, "a second old: written");
	CHECK(!stat(path, &sb) && (uint64_t)sb.st_size == st.file_bytes, "on disk 2", "size");
	CHECK_EQ(recfile_writer__close(w), 0, "close");
	unlink(path);
}

/* Cut at every length: a header cut is an error, past it chunks are read up to the cut. */
static void test_truncated_everywhere(void)
{
	const char *path = tmp_path("full"), *cut = tmp_path("cut");
	struct recfile_reader *r;
	struct recfile_rstats st;
	size_t len = 0, i, bad = 0, last_n = 0;
	char why[128];
	uint8_t *b;
	bool ok;
	int n;

	write_chunks(path, 3);
	b = slurp(path, &len);
	if (!CHECK(b, "slurp", "no file"))
		return;
	for (i = 0; i < len; i++) {
		spit(cut, b, i);
		r = recfile_reader__open(cut, why, sizeof(why));
		if (i < RECFILE_HDR_SIZE) {
			if (!r && ((i == 0 && errno == EINVAL) || (i && errno == EBADMSG)))
				continue;
			bad++;
			recfile_reader__close(r);
			continue;
		}
		if (!r) {
			bad++;
			continue;
		}
		n = read_all(r, &ok);
		recfile_reader__stats(r, &st);
		if (!ok || st.complete || st.good_bytes + st.lost_bytes != i ||
		    (size_t)n < last_n || (st.lost_bytes && !st.damaged) ||
		    (st.damaged && st.lost_chunks != 1))
			bad++;
		last_n = (size_t)n;
		recfile_reader__close(r);
	}
	CHECK_EQ(bad, 0, "cuts read wrong");
	CHECK_EQ(last_n, 3, "the cut before the end mark reads every data chunk");
	free(b);
	unlink(cut);
	unlink(path);
}

/* Any byte flipped after the header: the chunks before it read, the rest lost. */
static void test_flipped_bytes(void)
{
	const char *path = tmp_path("flip");
	struct recfile_reader *r;
	struct recfile_rstats st;
	size_t len = 0, i, bad = 0;
	char why[128];
	uint8_t *b;
	bool ok;
	int n;

	write_chunks(path, 3);
	b = slurp(path, &len);
	if (!CHECK(b, "slurp", "no file"))
		return;
	for (i = RECFILE_HDR_SIZE; i < len; i++) {
		b[i] ^= 0x40;
		r = recfile_reader__open_mem(b, len, why, sizeof(why));
		if (!r) {
			bad++;
			b[i] ^= 0x40;
			continue;
		}
		n = read_all(r, &ok);
		recfile_reader__stats(r, &st);
		if (!ok || !st.damaged || st.good_bytes > i || n > 3 ||
		    st.good_bytes + st.lost_bytes != len || !st.lost_chunks)
			bad++;
		recfile_reader__close(r);
		b[i] ^= 0x40;
	}
	CHECK_EQ(bad, 0, "flips read wrong");
	/* Chunk 0's CRC wrong: nothing read, it and the three after it lost. */
	b[RECFILE_HDR_SIZE + 20] ^= 1;
	r = recfile_reader__open_mem(b, len, why, sizeof(why));
	if (r) {
		n = read_all(r, &ok);
		recfile_reader__stats(r, &st);
		CHECK_EQ(n, 0, "nothing before chunk 0");
		CHECK_EQ(st.lost_chunks, 4, "chunk 0 and the three whole ones after it");
		CHECK(strstr(st.why, "chunk 0") != NULL, "why", "%s", st.why);
		recfile_reader__close(r);
	}
	free(b);
	unlink(path);
}

static void test_not_a_recording(void)
{
	const char *path = tmp_path("bad");
	uint8_t b[RECFILE_HDR_SIZE + 10];
	struct recfile_reader *r;
	size_t len = 0;
	char why[128];
	uint8_t *good;

	spit(path, (const uint8_t *)"", 0);
	r = recfile_reader__open(path, why, sizeof(why));
	CHECK(!r && errno == EINVAL && strstr(why, "empty"), "empty", "%s", why);
	memset(b, 'A', sizeof(b));
	spit(path, b, sizeof(b));
	r = recfile_reader__open(path, why, sizeof(why));
	CHECK(!r && errno == EINVAL && strstr(why, "not a umtrace recording"), "magic", "%s", why);
	unlink(path);
	write_chunks(path, 1);
	good = slurp(path, &len);
	if (!good)
		return;
	good[8] = 2;	/* a later format version */
	r = recfile_reader__open_mem(good, len, why, sizeof(why));
	CHECK(!r && errno == EPROTONOSUPPORT && strstr(why, "version 2"), "version", "%s", why);
	good[8] = 1;
	good[50] ^= 1;	/* the hostname, under the header's CRC */
	r = recfile_reader__open_mem(good, len, why, sizeof(why));
	CHECK(!r && errno == EBADMSG, "header crc", "%s", why);
	r = recfile_reader__open(tmp_path("nonexistent"), why, sizeof(why));
	CHECK(!r && errno == ENOENT, "missing", "%s", why);
	r = recfile_reader__open(dir, why, sizeof(why));
	CHECK(!r, "directory", "opened");
	free(good);
	unlink(path);
}

/* Junk after the end mark is lost data, said so. */
static void test_junk_after_end(void)
{
	const char *path = tmp_path("junk");
	struct recfile_reader *r;
	struct recfile_rstats st;
	size_t len = 0;
	char why[128];
	uint8_t *b;
	bool ok;

	write_chunks(path, 2);
	b = slurp(path, &len);
	if (!b)
		return;
	b = realloc(b, len + 5);
	memcpy(b + len, "junk!", 5);
	r = recfile_reader__open_mem(b, len + 5, why, sizeof(why));
	if (CHECK(r, "open", "%s", why)) {
		CHECK_EQ(read_all(r, &ok), 3, "chunks");
		recfile_reader__stats(r, &st);
		CHECK(st.damaged && !st.complete && st.lost_bytes == 5, "junk",
		      "damaged %d lost %llu", st.damaged, (unsigned long long)st.lost_bytes);
		recfile_reader__close(r);
	}
	free(b);
	unlink(path);
}

/*
 * A write that fails (here: past RLIMIT_FSIZE, as with a full disk) stops
 * the writer for good, with the file cut back to its last whole chunk.
 */
static void test_write_error_sticks(void)
{
	const char *path = tmp_path("full-disk");
	struct recfile_reader *r;
	struct recfile_rstats st;
	char why[128];
	int status = 0;
	pid_t pid;

	pid = fork();
	if (pid == 0) {
		struct rlimit rl = { 20000, 20000 };
		struct recfile_writer *w;
		uint8_t buf[1000];
		int i, err = 0, first = 0;
		size_t j;

		signal(SIGXFSZ, SIG_IGN);
		setrlimit(RLIMIT_FSIZE, &rl);
		w = recfile_writer__open(path, 0);
		if (!w)
			_exit(10);
		/* incompressible chunks of 1000 bytes: the 20th or so cannot be written */
		srand(1);
		for (i = 0; i < 100; i++) {
			for (j = 0; j < sizeof(buf); j++)
				buf[j] = (uint8_t)rand();
			err = recfile_writer__append(w, buf, sizeof(buf));
			if (!err)
				err = recfile_writer__flush(w);
			if (err && !first)
				first = err;
			if (err && err != first)
				_exit(11);
		}
		err = recfile_writer__close(w);
		_exit(first == -EFBIG && err == -EFBIG ? 0 : 12);
	}
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child", "status 0x%x", status);
	r = recfile_reader__open(path, why, sizeof(why));
	if (CHECK(r, "open", "%s", why)) {
		int n = 0;
		const void *data;
		size_t len;

		while (recfile_reader__next(r, &data, &len) > 0)
			n++;
		recfile_reader__stats(r, &st);
		CHECK(n >= 10 && !st.damaged && !st.complete, "readable to the last chunk",
		      "n %d damaged %d complete %d", n, st.damaged, st.complete);
		recfile_reader__close(r);
	}
	unlink(path);
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	RUN_SUBTEST(test_round_trip);
	RUN_SUBTEST(test_exclusive_and_force);
	RUN_SUBTEST(test_special_files_kept);
	RUN_SUBTEST(test_flush_by_size_and_time);
	RUN_SUBTEST(test_truncated_everywhere);
	RUN_SUBTEST(test_flipped_bytes);
	RUN_SUBTEST(test_not_a_recording);
	RUN_SUBTEST(test_junk_after_end);
	RUN_SUBTEST(test_write_error_sticks);
	rmdir(dir);
	return CHECK_EXIT();
}
