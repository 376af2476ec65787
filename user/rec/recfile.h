/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The recording file's container: a header, then a sequence of chunks,
 * each compressed on its own (zlib) and carrying its lengths and a
 * CRC-32. What the chunks hold is the records' business (rec/recording.h);
 * this knows nothing of record types. Written by recfile_write.c, read
 * by recfile_read.c.
 *
 * A chunk goes to the file with write(2) as soon as it holds
 * RECFILE_CHUNK_BYTES or its oldest byte is RECFILE_FLUSH_MS old, so a
 * recorder killed at any moment leaves a file that reads up to its last
 * whole chunk; with RECFILE_SYNC each chunk is also fdatasync'ed (in a
 * thread of its own, off the recorder's loop), so a host that goes down
 * loses about a second too.
 *
 * Layout (integers little-endian):
 *
 *   header, RECFILE_HDR_SIZE bytes in version 1
 *     0    magic "\x89UMTREC\n"
 *     8    u32 format version (RECFILE_VERSION)
 *     12   u32 header size, CRC included
 *     16   u32 page size of the recording host
 *     20   u32 flags, 0
 *     24   u64 start, CLOCK_REALTIME ns   } read at the same moment: they
 *     32   u64 start, CLOCK_MONOTONIC ns  } turn record times into wall time
 *     40   char hostname[64], NUL-padded
 *     104  char kernel release[64], NUL-padded
 *     168  u32 CRC-32 of every byte before it
 *   chunk
 *     0    magic "UMTC"
 *     4    u32 sequence number: 0, 1, 2...
 *     8    u32 raw (uncompressed) length, at most RECFILE_RAW_MAX
 *     12   u32 compressed length
 *     16   u32 flags: RECFILE_CHUNK_LAST on the one written at close
 *     20   u32 CRC-32 of bytes 0..20 and of the compressed bytes
 *     24   the compressed bytes (one zlib stream)
 *
 * A reader takes chunks in order and stops at the first that is cut
 * short, fails its checks or is out of sequence: what follows may refer
 * to what it held. It then counts what it could not read.
 */
#ifndef UMTRACE_RECFILE_H
#define UMTRACE_RECFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RECFILE_VERSION		1
#define RECFILE_HDR_SIZE	172
#define RECFILE_CHUNK_HDR	24
#define RECFILE_NAME_MAX	64
#define RECFILE_CHUNK_BYTES	(256 * 1024)	/* flush when a chunk passes this */
#define RECFILE_FLUSH_MS	1000		/* or when its oldest byte is this old */
#define RECFILE_RAW_MAX		(16 * 1024 * 1024)	/* one chunk, uncompressed */
#define RECFILE_CHUNK_LAST	1

struct recfile_info {
	uint32_t version;
	uint32_t page_size;
	uint64_t start_realtime_ns;
	uint64_t start_mono_ns;
	char hostname[RECFILE_NAME_MAX];	/* NUL-terminated */
	char release[RECFILE_NAME_MAX];
};

enum recfile_flags {
	/*
	 * Replace an existing file. The new one is written under a temporary
	 * name in the same directory (O_EXCL, 0600) and renamed over path
	 * once its header is written: at no moment is path a half-written
	 * header, and a symlink at path is replaced, never followed.
	 */
	RECFILE_FORCE = 1 << 0,
	/* fdatasync(2) every chunk, in a background thread. */
	RECFILE_SYNC = 1 << 1,
};

struct recfile_writer;

struct recfile_wstats {
	uint64_t chunks;
	uint64_t file_bytes;	/* written to the file, header included */
	uint64_t raw_bytes;	/* appended, before compression */
};

/*
 * Create path (0600, O_CREAT | O_EXCL | O_NOFOLLOW unless RECFILE_FORCE)
 * and write its header, describing this host now. NULL with errno set.
 * With RECFILE_FORCE the file is written under a temporary name beside
 * path until recfile_writer__commit() (or close) renames it over path.
 */
struct recfile_writer *recfile_writer__open(const char *path, unsigned int flags);
/* RECFILE_FORCE: put the file in place now. 0 or -errno. */
int recfile_writer__commit(struct recfile_writer *w);
/*
 * Add len bytes to the current chunk; they never straddle two chunks.
 * Flushes the chunk when it is full or old enough. 0, or the first error
 * the writer met (-ENOSPC...): after one nothing more is written, and the
 * file reads up to its last whole chunk.
 */
int recfile_writer__append(struct recfile_writer *w, const void *data, size_t len);
/* Flush the chunk if its oldest byte is RECFILE_FLUSH_MS old. */
int recfile_writer__tick(struct recfile_writer *w);
int recfile_writer__flush(struct recfile_writer *w);
int recfile_writer__error(const struct recfile_writer *w);
void recfile_writer__stats(const struct recfile_writer *w, struct recfile_wstats *st);
/*
 * Write what is pending and the last chunk (marked RECFILE_CHUNK_LAST),
 * fdatasync, close and free. 0 or the first error met since open.
 */
int recfile_writer__close(struct recfile_writer *w);
/* Close and remove the file: nothing worth keeping was written. */
void recfile_writer__discard(struct recfile_writer *w);

struct recfile_reader;

struct recfile_rstats {
	uint64_t file_bytes;	/* what the file or buffer holds */
	uint64_t good_bytes;	/* header and chunks read */
	uint64_t chunks;	/* chunks read */
	uint64_t lost_bytes;	/* after the last chunk read */
	uint64_t lost_chunks;	/* the bad one and the whole ones after it */
	bool complete;		/* ended with the last chunk, nothing after it */
	bool damaged;		/* reading stopped at a bad chunk or junk */
	char why[128];		/* what stopped reading, when damaged */
};

/*
 * Open a recording and check its header. NULL with errno set and a
 * one-line reason in why: EINVAL not a recording, EPROTONOSUPPORT a
 * format version this build does not read, EBADMSG a header cut short
 * or damaged, or the error of open(2).
 */
struct recfile_reader *recfile_reader__open(const char *path, char *why, size_t why_len);
/* The same over len bytes at buf, which must outlive the reader. */
struct recfile_reader *recfile_reader__open_mem(const void *buf, size_t len,
						char *why, size_t why_len);
const struct recfile_info *recfile_reader__info(const struct recfile_reader *r);
/*
 * The next chunk's raw bytes into *data, *len (valid until the next
 * call): 1, or 0 at the end of what can be read (a clean end or the
 * first bad chunk; recfile_reader__stats tells which), or -errno for an
 * I/O or memory error.
 */
int recfile_reader__next(struct recfile_reader *r, const void **data, size_t *len);
void recfile_reader__stats(const struct recfile_reader *r, struct recfile_rstats *st);
void recfile_reader__close(struct recfile_reader *r);

#endif /* UMTRACE_RECFILE_H */
