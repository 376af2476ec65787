// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include "rec/recfile.h"

#define HDR_MAGIC	"\x89UMTREC\n"
#define HDR_MAGIC_LEN	8
#define CHUNK_MAGIC	"UMTC"
/*
 * Level 1: a recorder at 100,000 calls a second spends its CPU on the ring
 * buffer, not here, and the records are small varints that level 6 barely
 * shrinks further.
 */
#define ZLEVEL		1
#define SCAN_BLOCK	(64 * 1024)

static void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static void put_le64(uint8_t *p, uint64_t v)
{
	put_le32(p, (uint32_t)v);
	put_le32(p + 4, (uint32_t)(v >> 32));
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t get_le64(const uint8_t *p)
{
	return (uint64_t)get_le32(p) | (uint64_t)get_le32(p + 4) << 32;
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The largest compressed chunk a writer can make: what a reader accepts. */
static uint64_t comp_max(void)
{
	return compressBound(RECFILE_RAW_MAX);
}

/* ---- writer ---- */

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
	long ps = sysconf(_SC_PAGESIZE);

	memset(info, 0, sizeof(*info));
	info->version = RECFILE_VERSION;
	info->page_size = ps > 0 ? (uint32_t)ps : 4096;
	info->start_realtime_ns = clock_ns(CLOCK_REALTIME);
	info->start_mono_ns = clock_ns(CLOCK_MONOTONIC);
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
	int fd, err;

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

static int grow(uint8_t **buf, size_t *cap, size_t need)
{
	size_t n = *cap ? *cap : 4096;
	uint8_t *p;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	p = realloc(*buf, n);
	if (!p)
		return -ENOMEM;
	*buf = p;
	*cap = n;
	return 0;
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
	err = grow(&w->out, &w->out_cap, RECFILE_CHUNK_HDR + bound);
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
	       clock_ns(CLOCK_MONOTONIC_COARSE) - w->pending_since_ns >=
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
	err = grow(&w->buf, &w->cap, w->len + len);
	if (err)
		return err;
	if (!w->len)
		w->pending_since_ns = clock_ns(CLOCK_MONOTONIC_COARSE);
	memcpy(w->buf + w->len, data, len);
	w->len += len;
	w->st.raw_bytes += len;
	if (w->len >= RECFILE_CHUNK_BYTES || chunk_old(w))
		return recfile_writer__flush(w);
	return 0;
}

size_t recfile_writer__pending(const struct recfile_writer *w)
{
	return w->len;
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

/* ---- reader ---- */

struct recfile_reader {
	int fd;			/* -1: reading mem */
	const uint8_t *mem;
	uint64_t size;
	uint64_t off;		/* the next chunk */
	uint32_t seq;
	bool last_seen, done;
	struct recfile_info info;
	uint8_t *zbuf, *raw;
	size_t zcap, rcap;
	struct recfile_rstats st;
};

/* Up to len bytes at off: how many, or -errno. */
static ssize_t src_read(struct recfile_reader *r, uint64_t off, void *dst, size_t len)
{
	size_t done = 0;
	ssize_t n;

	if (off >= r->size)
		return 0;
	if (len > r->size - off)
		len = (size_t)(r->size - off);
	if (r->fd < 0) {
		memcpy(dst, r->mem + off, len);
		return (ssize_t)len;
	}
	while (done < len) {
		n = pread(r->fd, (uint8_t *)dst + done, len - done, (off_t)(off + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (!n)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

static void say(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!why || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

static int read_header(struct recfile_reader *r, char *why, size_t why_len)
{
	uint8_t h[RECFILE_HDR_SIZE];
	ssize_t n = src_read(r, 0, h, sizeof(h));
	uint32_t hdr_size;

	if (n < 0) {
		say(why, why_len, "%s", strerror((int)-n));
		return (int)n;
	}
	if (n == 0) {
		say(why, why_len, "empty file: not a umtrace recording");
		return -EINVAL;
	}
	if (memcmp(h, HDR_MAGIC, (size_t)n < HDR_MAGIC_LEN ? (size_t)n : HDR_MAGIC_LEN)) {
		say(why, why_len, "not a umtrace recording (no recording header)");
		return -EINVAL;
	}
	if (n >= 12 && get_le32(h + 8) != RECFILE_VERSION) {
		say(why, why_len, "recording format version %u: this umtrace reads version %u",
		    get_le32(h + 8), RECFILE_VERSION);
		return -EPROTONOSUPPORT;
	}
	if ((size_t)n < sizeof(h)) {
		say(why, why_len, "recording cut short inside its header (%zd of %d bytes): "
		    "nothing to read", n, RECFILE_HDR_SIZE);
		return -EBADMSG;
	}
	hdr_size = get_le32(h + 12);
	if (hdr_size != RECFILE_HDR_SIZE || get_le32(h + 168) != (uint32_t)crc32(0, h, 168)) {
		say(why, why_len, "recording header is damaged (checksum): nothing to read");
		return -EBADMSG;
	}
	r->info.version = RECFILE_VERSION;
	r->info.page_size = get_le32(h + 16);
	r->info.start_realtime_ns = get_le64(h + 24);
	r->info.start_mono_ns = get_le64(h + 32);
	memcpy(r->info.hostname, h + 40, RECFILE_NAME_MAX - 1);
	memcpy(r->info.release, h + 104, RECFILE_NAME_MAX - 1);
	if (!r->info.page_size || (r->info.page_size & (r->info.page_size - 1))) {
		say(why, why_len, "recording header is damaged (page size %u)", r->info.page_size);
		return -EBADMSG;
	}
	r->off = RECFILE_HDR_SIZE;
	r->st.good_bytes = RECFILE_HDR_SIZE;
	return 0;
}

static struct recfile_reader *reader_start(struct recfile_reader *r, char *why, size_t why_len)
{
	int err;

	r->st.file_bytes = r->size;
	err = read_header(r, why, why_len);
	if (err) {
		recfile_reader__close(r);
		errno = -err;
		return NULL;
	}
	return r;
}

struct recfile_reader *recfile_reader__open(const char *path, char *why, size_t why_len)
{
	struct recfile_reader *r = calloc(1, sizeof(*r));
	struct stat sb;
	int err;

	if (!r) {
		say(why, why_len, "%s", strerror(ENOMEM));
		return NULL;
	}
	/* O_NONBLOCK: a FIFO must not hang the open; it is refused below. */
	r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (r->fd < 0 || fstat(r->fd, &sb)) {
		err = errno;
		say(why, why_len, "%s", strerror(err));
		recfile_reader__close(r);
		errno = err;
		return NULL;
	}
	if (!S_ISREG(sb.st_mode)) {
		say(why, why_len, "not a regular file");
		recfile_reader__close(r);
		errno = EINVAL;
		return NULL;
	}
	r->size = (uint64_t)sb.st_size;
	return reader_start(r, why, why_len);
}

struct recfile_reader *recfile_reader__open_mem(const void *buf, size_t len,
						char *why, size_t why_len)
{
	struct recfile_reader *r = calloc(1, sizeof(*r));

	if (!r) {
		say(why, why_len, "%s", strerror(ENOMEM));
		return NULL;
	}
	r->fd = -1;
	r->mem = buf;
	r->size = len;
	return reader_start(r, why, why_len);
}

const struct recfile_info *recfile_reader__info(const struct recfile_reader *r)
{
	return &r->info;
}

struct chunk {
	uint32_t raw_len;
	uint32_t comp_len;	/* its bytes are in r->zbuf */
	uint32_t flags;
};

/*
 * Whether a well-formed chunk sits at off (its header sane and its CRC
 * right), read into *c and r->zbuf. Decompression is not tried.
 */
static int chunk_at(struct recfile_reader *r, uint64_t off, uint32_t seq, bool check_seq,
		    struct chunk *c, uint64_t *spent, char *why, size_t why_len)
{
	uint8_t h[RECFILE_CHUNK_HDR];
	uint32_t raw_len, comp_len, flags, crc;
	ssize_t n = src_read(r, off, h, sizeof(h));
	int err;

	if (n < 0)
		return (int)n;
	if ((size_t)n < sizeof(h)) {
		say(why, why_len, "chunk %u at byte %llu is cut short (%zd of %d header bytes)",
		    seq, (unsigned long long)off, n, RECFILE_CHUNK_HDR);
		return -EBADMSG;
	}
	raw_len = get_le32(h + 8);
	comp_len = get_le32(h + 12);
	flags = get_le32(h + 16);
	if (memcmp(h, CHUNK_MAGIC, 4) || raw_len > RECFILE_RAW_MAX || !comp_len ||
	    comp_len > comp_max() || (flags & ~RECFILE_CHUNK_LAST)) {
		say(why, why_len, "chunk %u at byte %llu: not a chunk header", seq,
		    (unsigned long long)off);
		return -EBADMSG;
	}
	if (check_seq && get_le32(h + 4) != seq) {
		say(why, why_len, "chunk %u at byte %llu: out of sequence (numbered %u)", seq,
		    (unsigned long long)off, get_le32(h + 4));
		return -EBADMSG;
	}
	if (comp_len > r->size - off - RECFILE_CHUNK_HDR) {
		say(why, why_len, "chunk %u at byte %llu is cut short (%llu of %u bytes)", seq,
		    (unsigned long long)off,
		    (unsigned long long)(r->size - off - RECFILE_CHUNK_HDR), comp_len);
		return -EBADMSG;
	}
	err = grow(&r->zbuf, &r->zcap, comp_len);
	if (err)
		return err;
	if (spent)
		*spent += comp_len;
	n = src_read(r, off + RECFILE_CHUNK_HDR, r->zbuf, comp_len);
	if (n < 0)
		return (int)n;
	if ((size_t)n < comp_len) {
		say(why, why_len, "chunk %u at byte %llu is cut short", seq,
		    (unsigned long long)off);
		return -EBADMSG;
	}
	crc = (uint32_t)crc32(0, h, 20);
	crc = (uint32_t)crc32(crc, r->zbuf, comp_len);
	if (crc != get_le32(h + 20)) {
		say(why, why_len, "chunk %u at byte %llu: checksum mismatch", seq,
		    (unsigned long long)off);
		return -EBADMSG;
	}
	c->raw_len = raw_len;
	c->comp_len = comp_len;
	c->flags = flags;
	return 0;
}

/* Where the next chunk magic is at or after from, or size if none. */
static uint64_t find_magic(struct recfile_reader *r, uint64_t from, uint8_t *blk)
{
	ssize_t n;
	size_t i;

	while (from + 4 <= r->size) {
		n = src_read(r, from, blk, SCAN_BLOCK);
		if (n < 4)
			break;
		for (i = 0; i + 4 <= (size_t)n; i++)
			if (blk[i] == 'U' && !memcmp(blk + i, CHUNK_MAGIC, 4))
				return from + i;
		from += (uint64_t)n - 3;
	}
	return r->size;
}

/*
 * The whole chunks after a bad one: lost with it, since they may refer to
 * it. Checking a candidate reads its payload; a hostile file full of
 * candidates claiming long payloads would make that quadratic, so the
 * reading is bounded (the count is then a lower bound).
 */
static uint64_t count_chunks_after(struct recfile_reader *r, uint64_t from)
{
	uint8_t *blk = malloc(SCAN_BLOCK);
	uint64_t n = 0, p = from, spent = 0, budget = 2 * (r->size - from) + (1 << 20);
	struct chunk c;

	if (!blk)
		return 0;
	while (spent < budget && (p = find_magic(r, p, blk)) < r->size) {
		if (!chunk_at(r, p, 0, false, &c, &spent, NULL, 0)) {
			n++;
			p += RECFILE_CHUNK_HDR + (uint64_t)c.comp_len;
		} else {
			p++;
		}
	}
	free(blk);
	return n;
}

static int stop_damaged(struct recfile_reader *r)
{
	r->done = true;
	r->st.damaged = true;
	r->st.lost_bytes = r->size - r->off;
	r->st.lost_chunks = 1 + count_chunks_after(r, r->off + 1);
	return 0;
}

int recfile_reader__next(struct recfile_reader *r, const void **data, size_t *len)
{
	struct chunk c;
	uLongf raw_len;
	uLong comp_len;
	int err, zerr;

	if (r->done)
		return 0;
	if (r->off == r->size) {
		r->done = true;
		r->st.complete = r->last_seen;
		return 0;
	}
	if (r->last_seen) {
		/* Nothing belongs after the last chunk. */
		say(r->st.why, sizeof(r->st.why), "%llu bytes of junk after the last chunk",
		    (unsigned long long)(r->size - r->off));
		r->done = true;
		r->st.damaged = true;
		r->st.lost_bytes = r->size - r->off;
		r->st.lost_chunks = count_chunks_after(r, r->off);
		return 0;
	}
	err = chunk_at(r, r->off, r->seq, true, &c, NULL, r->st.why, sizeof(r->st.why));
	if (err == -EBADMSG)
		return stop_damaged(r);
	if (err)
		return err;
	err = grow(&r->raw, &r->rcap, c.raw_len ? c.raw_len : 1);
	if (err)
		return err;
	raw_len = c.raw_len;
	comp_len = c.comp_len;
	zerr = uncompress2(r->raw, &raw_len, r->zbuf, &comp_len);
	if (zerr != Z_OK || raw_len != c.raw_len || comp_len != c.comp_len) {
		say(r->st.why, sizeof(r->st.why), "chunk %u at byte %llu does not decompress",
		    r->seq, (unsigned long long)r->off);
		return stop_damaged(r);
	}
	if (c.flags & RECFILE_CHUNK_LAST)
		r->last_seen = true;
	r->off += RECFILE_CHUNK_HDR + (uint64_t)c.comp_len;
	r->seq++;
	r->st.chunks++;
	r->st.good_bytes = r->off;
	*data = r->raw;
	*len = c.raw_len;
	return 1;
}

void recfile_reader__stats(const struct recfile_reader *r, struct recfile_rstats *st)
{
	*st = r->st;
}

void recfile_reader__close(struct recfile_reader *r)
{
	if (!r)
		return;
	if (r->fd >= 0)
		close(r->fd);
	free(r->zbuf);
	free(r->raw);
	free(r);
}
