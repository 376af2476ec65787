// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Reading a recfile: the header checked, then chunk after chunk, each
 * checked (magic, sequence, lengths, CRC) before it is decompressed.
 * Reading stops at the first bad chunk; what lies after it is counted,
 * not read, since it may refer to what the bad chunk held.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "lib/parse.h"
#include "rec/recfile_int.h"

#define SCAN_BLOCK	(64 * 1024)

/* The largest compressed chunk a writer can make: what a reader accepts. */
static uint64_t comp_max(void)
{
	return compressBound(RECFILE_RAW_MAX);
}

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

static int read_header(struct recfile_reader *r, char *why, size_t why_len)
{
	uint8_t h[RECFILE_HDR_SIZE];
	ssize_t n = src_read(r, 0, h, sizeof(h));
	uint32_t hdr_size;

	if (n < 0) {
		errbuf__set(why, why_len, "%s", strerror((int)-n));
		return (int)n;
	}
	if (n == 0) {
		errbuf__set(why, why_len, "empty file: not a umtrace recording");
		return -EINVAL;
	}
	if (memcmp(h, HDR_MAGIC, (size_t)n < HDR_MAGIC_LEN ? (size_t)n : HDR_MAGIC_LEN)) {
		errbuf__set(why, why_len, "not a umtrace recording (no recording header)");
		return -EINVAL;
	}
	if (n >= 12 && get_le32(h + 8) != RECFILE_VERSION) {
		errbuf__set(why, why_len,
			    "recording format version %u: this umtrace reads version %u",
			    get_le32(h + 8), RECFILE_VERSION);
		return -EPROTONOSUPPORT;
	}
	if ((size_t)n < sizeof(h)) {
		errbuf__set(why, why_len,
			    "recording cut short inside its header (%zd of %d bytes): "
			    "nothing to read", n, RECFILE_HDR_SIZE);
		return -EBADMSG;
	}
	hdr_size = get_le32(h + 12);
	if (hdr_size != RECFILE_HDR_SIZE || get_le32(h + 168) != (uint32_t)crc32(0, h, 168)) {
		errbuf__set(why, why_len,
			    "recording header is damaged (checksum): nothing to read");
		return -EBADMSG;
	}
	r->info.version = RECFILE_VERSION;
	r->info.page_size = get_le32(h + 16);
	r->info.start_realtime_ns = get_le64(h + 24);
	r->info.start_mono_ns = get_le64(h + 32);
	memcpy(r->info.hostname, h + 40, RECFILE_NAME_MAX - 1);
	memcpy(r->info.release, h + 104, RECFILE_NAME_MAX - 1);
	if (!r->info.page_size || (r->info.page_size & (r->info.page_size - 1))) {
		errbuf__set(why, why_len,
			    "recording header is damaged (page size %u)", r->info.page_size);
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
		errbuf__set(why, why_len, "%s", strerror(ENOMEM));
		return NULL;
	}
	/* O_NONBLOCK: a FIFO must not hang the open; it is refused below. */
	r->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (r->fd < 0 || fstat(r->fd, &sb)) {
		err = errno;
		errbuf__set(why, why_len, "%s", strerror(err));
		recfile_reader__close(r);
		errno = err;
		return NULL;
	}
	if (!S_ISREG(sb.st_mode)) {
		errbuf__set(why, why_len, "not a regular file");
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
		errbuf__set(why, why_len, "%s", strerror(ENOMEM));
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
		errbuf__set(why, why_len,
			    "chunk %u at byte %llu is cut short (%zd of %d header bytes)",
			    seq, (unsigned long long)off, n, RECFILE_CHUNK_HDR);
		return -EBADMSG;
	}
	raw_len = get_le32(h + 8);
	comp_len = get_le32(h + 12);
	flags = get_le32(h + 16);
	if (memcmp(h, CHUNK_MAGIC, 4) || raw_len > RECFILE_RAW_MAX || !comp_len ||
	    comp_len > comp_max() || (flags & ~RECFILE_CHUNK_LAST)) {
		errbuf__set(why, why_len, "chunk %u at byte %llu: not a chunk header", seq,
			    (unsigned long long)off);
		return -EBADMSG;
	}
	if (check_seq && get_le32(h + 4) != seq) {
		errbuf__set(why, why_len,
			    "chunk %u at byte %llu: out of sequence (numbered %u)", seq,
			    (unsigned long long)off, get_le32(h + 4));
		return -EBADMSG;
	}
	if (comp_len > r->size - off - RECFILE_CHUNK_HDR) {
		errbuf__set(why, why_len,
			    "chunk %u at byte %llu is cut short (%llu of %u bytes)", seq,
			    (unsigned long long)off,
			    (unsigned long long)(r->size - off - RECFILE_CHUNK_HDR), comp_len);
		return -EBADMSG;
	}
	err = recfile__grow(&r->zbuf, &r->zcap, comp_len);
	if (err)
		return err;
	if (spent)
		*spent += comp_len;
	n = src_read(r, off + RECFILE_CHUNK_HDR, r->zbuf, comp_len);
	if (n < 0)
		return (int)n;
	if ((size_t)n < comp_len) {
		errbuf__set(why, why_len, "chunk %u at byte %llu is cut short", seq,
			    (unsigned long long)off);
		return -EBADMSG;
	}
	crc = (uint32_t)crc32(0, h, 20);
	crc = (uint32_t)crc32(crc, r->zbuf, comp_len);
	if (crc != get_le32(h + 20)) {
		errbuf__set(why, why_len, "chunk %u at byte %llu: checksum mismatch", seq,
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
		errbuf__set(r->st.why, sizeof(r->st.why), "%llu bytes of junk after the last chunk",
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
	err = recfile__grow(&r->raw, &r->rcap, c.raw_len ? c.raw_len : 1);
	if (err)
		return err;
	raw_len = c.raw_len;
	comp_len = c.comp_len;
	zerr = uncompress2(r->raw, &raw_len, r->zbuf, &comp_len);
	if (zerr != Z_OK || raw_len != c.raw_len || comp_len != c.comp_len) {
		errbuf__set(r->st.why, sizeof(r->st.why),
			    "chunk %u at byte %llu does not decompress",
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
