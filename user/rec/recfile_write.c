// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Writing a recfile: the header, then chunks compressed one by one and
 * written whole, so that the file reads up to its last whole chunk
 * whenever the writer stops; with RECFILE_SYNC each is fdatasync'ed by a
 * thread of the writer's own.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <zlib.h>
#include "lib/sys.h"
#include "rec/recfile_int.h"

/*
 * Level 1: a recorder at 100,000 calls a second spends its CPU on the ring
 * buffer, not here, and the records are small varints that level 6 barely
 * shrinks further.
 */
#define ZLEVEL		1

struct recfile_writer {
	int fd;
	unsigned int flags;
	char *path;		/* the name asked for */
	char *tmp;		/* RECFILE_FORCE: the name written under until commit */
	uint8_t *buf;		/* the chunk being filled, raw */
	size_t len, cap;
	uint8_t *out;		/* chunk header and compressed bytes */
	size_t out_cap;
	z_stream z;
	bool z_ready;
	uint32_t seq;
	uint64_t pending_since_ns;	/* CLOCK_MONOTONIC_COARSE of buf's first byte */
	int err;
	struct recfile_wstats st;
	/* RECFILE_SYNC: fdatasync off the caller's thread */
	bool syncer_on;
	bool sync_failed;
	pthread_t syncer;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool sync_wanted, quit;
	int sync_err;
};

static void *syncer_main(void *arg)
{
	struct recfile_writer *w = arg;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!w->sync_wanted && !w->quit)
			pthread_cond_wait(&w->cond, &w->lock);
		if (!w->sync_wanted)
			break;
		w->sync_wanted = false;
		pthread_mutex_unlock(&w->lock);
		if (fdatasync(w->fd) && errno != EINVAL) {
			pthread_mutex_lock(&w->lock);
			if (!w->sync_err)
				w->sync_err = -errno;
			continue;
		}
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static int syncer_start(struct recfile_writer *w)
{
	int err;

	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	err = pthread_create(&w->syncer, NULL, syncer_main, w);
	if (err) {
		pthread_cond_destroy(&w->cond);
		pthread_mutex_destroy(&w->lock);
		return -err;
	}
	w->syncer_on = true;
	return 0;
}

/*
 * The thread starts with the first chunk, not at open: by then a
 * recorder has dropped the capabilities it no longer needs, and the
 * thread inherits what it kept rather than everything.
 */
static void syncer_kick(struct recfile_writer *w)
{
	int err;

	if (!(w->flags & RECFILE_SYNC))
		return;
	if (!w->syncer_on && !w->sync_failed && (err = syncer_start(w))) {
		w->sync_failed = true;	/* chunks are still written, just not synced */
		if (!w->err)
			w->err = err;
		return;
	}
	pthread_mutex_lock(&w->lock);
	w->sync_wanted = true;
	if (w->sync_err && !w->err)
		w->err = w->sync_err;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

static void syncer_stop(struct recfile_writer *w)
{
	if (!w->syncer_on)
		return;
	pthread_mutex_lock(&w->lock);
	w->quit = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->syncer, NULL);
	if (w->sync_err && !w->err)
		w->err = w->sync_err;
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	w->syncer_on = false;
}

static int write_all(int fd, const void *data, size_t len)
{
	const uint8_t *p = data;
	ssize_t n;

	while (len) {
		n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void fill_info(struct recfile_info *info)
{
	struct utsname u;

	memset(info, 0, sizeof(*info));
	info->version = RECFILE_VERSION;
	info->page_size = (uint32_t)page__size();
	info->start_realtime_ns = clock__ns_of(CLOCK_REALTIME);
	info->start_mono_ns = clock__mono_ns();
	if (!uname(&u)) {
		snprintf(info->hostname, sizeof(info->hostname), "%.63s", u.nodename);
		snprintf(info->release, sizeof(info->release), "%.63s", u.release);
	}
}

static void encode_header(const struct recfile_info *info, uint8_t *h)
{
	memset(h, 0, RECFILE_HDR_SIZE);
	memcpy(h, HDR_MAGIC, HDR_MAGIC_LEN);
	put_le32(h + 8, info->version);
	put_le32(h + 12, RECFILE_HDR_SIZE);
	put_le32(h + 16, info->page_size);
	put_le32(h + 20, 0);
	put_le64(h + 24, info->start_realtime_ns);
	put_le64(h + 32, info->start_mono_ns);
	memcpy(h + 40, info->hostname, strnlen(info->hostname, RECFILE_NAME_MAX - 1));
	memcpy(h + 104, info->release, strnlen(info->release, RECFILE_NAME_MAX - 1));
	put_le32(h + 168, (uint32_t)crc32(0, h, 168));
}

/*
 * Without --force the name is taken exclusively. With it, the file is
 * built under a temporary name beside path and renamed over it at
 * recfile_writer__commit() (rename(2) replaces a symlink, never follows
 * it), so a recorder that fails to start leaves the old file alone.
 */
static int create_file(struct recfile_writer *w, const char *path, const uint8_t *hdr)
{
	char *tmp = NULL;
	struct stat sb;
	int fd, err;

	/*
	 * A recording is a file, read back by seeking: a device or a FIFO
	 * named as one is refused, never replaced (--force renamed a file
	 * over /dev/null, for the whole host).
	 */
	if (!lstat(path, &sb) && !S_ISREG(sb.st_mode) && !S_ISLNK(sb.st_mode))
		return S_ISDIR(sb.st_mode) ? -EISDIR : -EINVAL;
	if (!(w->flags & RECFILE_FORCE)) {
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return -errno;
		err = write_all(fd, hdr, RECFILE_HDR_SIZE);
		if (err) {
			unlink(path);
			close(fd);
			return err;
		}
		w->fd = fd;
		return 0;
	}
	if (asprintf(&tmp, "%s.XXXXXX", path) < 0)
		return -ENOMEM;
	fd = mkostemp(tmp, O_CLOEXEC);	/* O_CREAT | O_EXCL, 0600 */
	if (fd < 0) {
		err = -errno;
		free(tmp);
		return err;
	}
	err = write_all(fd, hdr, RECFILE_HDR_SIZE);
	if (err) {
		unlink(tmp);
		close(fd);
		free(tmp);
		return err;
	}
	w->tmp = tmp;
	w->fd = fd;
	return 0;
}

int recfile_writer__commit(struct recfile_writer *w)
{
	if (!w->tmp)
		return 0;
	if (rename(w->tmp, w->path))
		return -errno;
	free(w->tmp);
	w->tmp = NULL;
	return 0;
}

struct recfile_writer *recfile_writer__open(const char *path, unsigned int flags)
{
	struct recfile_writer *w = calloc(1, sizeof(*w));
	uint8_t hdr[RECFILE_HDR_SIZE];
	struct recfile_info info;
	int err;

	if (!w)
		return NULL;
	w->fd = -1;
	w->flags = flags;
	w->path = strdup(path);
	if (!w->path) {
		err = -ENOMEM;
		goto err_free;
	}
	w->cap = RECFILE_CHUNK_BYTES + RECFILE_CHUNK_BYTES / 4;
	w->buf = malloc(w->cap);
	if (!w->buf) {
		err = -ENOMEM;
		goto err_free;
	}
	if (deflateInit(&w->z, ZLEVEL) != Z_OK) {
		err = -ENOMEM;
		goto err_free;
	}
	w->z_ready = true;
	fill_info(&info);
	encode_header(&info, hdr);
	err = create_file(w, path, hdr);
	if (err)
		goto err_free;
	w->st.file_bytes = RECFILE_HDR_SIZE;
	return w;
err_free:
	if (w->z_ready)
		deflateEnd(&w->z);
	free(w->buf);
	free(w->path);
	free(w);
	errno = -err;
	return NULL;
}

/* A failed write may have left part of a chunk: cut it off again. */
static int fail(struct recfile_writer *w, int err)
{
	int r;

	if (!w->err) {
		w->err = err;
		/* Best effort: a reader stops at a torn chunk anyway. */
		r = ftruncate(w->fd, (off_t)w->st.file_bytes);
		(void)r;
	}
	return w->err;
}

static int write_chunk(struct recfile_writer *w, uint32_t flags)
{
	uint8_t *h;
	size_t bound = deflateBound(&w->z, w->len);
	uint32_t crc;
	int err;

	if (w->err)
		return w->err;
	err = recfile__grow(&w->out, &w->out_cap, RECFILE_CHUNK_HDR + bound);
	if (err)
		return fail(w, err);
	deflateReset(&w->z);
	w->z.next_in = w->buf;
	w->z.avail_in = (uInt)w->len;
	w->z.next_out = w->out + RECFILE_CHUNK_HDR;
	w->z.avail_out = (uInt)bound;
	if (deflate(&w->z, Z_FINISH) != Z_STREAM_END)
		return fail(w, -EIO);
	h = w->out;
	memcpy(h, CHUNK_MAGIC, 4);
	put_le32(h + 4, w->seq);
	put_le32(h + 8, (uint32_t)w->len);
	put_le32(h + 12, (uint32_t)w->z.total_out);
	put_le32(h + 16, flags);
	crc = (uint32_t)crc32(0, h, 20);
	crc = (uint32_t)crc32(crc, h + RECFILE_CHUNK_HDR, (uInt)w->z.total_out);
	put_le32(h + 20, crc);
	err = write_all(w->fd, h, RECFILE_CHUNK_HDR + w->z.total_out);
	if (err)
		return fail(w, err);
	w->seq++;
	w->st.chunks++;
	w->st.file_bytes += RECFILE_CHUNK_HDR + w->z.total_out;
	w->len = 0;
	syncer_kick(w);
	return w->err;
}

int recfile_writer__flush(struct recfile_writer *w)
{
	if (w->err || !w->len)
		return w->err;
	return write_chunk(w, 0);
}

static bool chunk_old(const struct recfile_writer *w)
{
	return w->len &&
	       clock__ns_of(CLOCK_MONOTONIC_COARSE) - w->pending_since_ns >=
	       (uint64_t)RECFILE_FLUSH_MS * 1000000;
}

int recfile_writer__append(struct recfile_writer *w, const void *data, size_t len)
{
	int err;

	if (w->err)
		return w->err;
	if (len > RECFILE_RAW_MAX - w->len && (err = recfile_writer__flush(w)))
		return err;
	if (len > RECFILE_RAW_MAX)
		return -E2BIG;
	err = recfile__grow(&w->buf, &w->cap, w->len + len);
	if (err)
		return err;
	if (!w->len)
		w->pending_since_ns = clock__ns_of(CLOCK_MONOTONIC_COARSE);
	memcpy(w->buf + w->len, data, len);
	w->len += len;
	w->st.raw_bytes += len;
	if (w->len >= RECFILE_CHUNK_BYTES || chunk_old(w))
		return recfile_writer__flush(w);
	return 0;
}

int recfile_writer__tick(struct recfile_writer *w)
{
	if (chunk_old(w))
		return recfile_writer__flush(w);
	return w->err;
}

int recfile_writer__error(const struct recfile_writer *w)
{
	return w->err;
}

void recfile_writer__stats(const struct recfile_writer *w, struct recfile_wstats *st)
{
	*st = w->st;
}

static int finish(struct recfile_writer *w, bool keep)
{
	int err;

	if (!w)
		return 0;
	if (keep)
		write_chunk(w, RECFILE_CHUNK_LAST);
	syncer_stop(w);
	if (keep && !w->err && fdatasync(w->fd) && errno != EINVAL)
		w->err = -errno;
	if (close(w->fd) && !w->err)
		w->err = -errno;
	if (keep && !w->err && (err = recfile_writer__commit(w)))
		w->err = err;
	if (!keep || w->tmp)
		unlink(w->tmp ? w->tmp : w->path);
	err = w->err;
	deflateEnd(&w->z);
	free(w->buf);
	free(w->out);
	free(w->tmp);
	free(w->path);
	free(w);
	return err;
}

int recfile_writer__close(struct recfile_writer *w)
{
	return finish(w, true);
}

void recfile_writer__discard(struct recfile_writer *w)
{
	finish(w, false);
}
