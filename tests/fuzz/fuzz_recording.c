// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * libFuzzer target for the recording reader. Whatever the bytes, replay
 * must end without a crash, a leak or a hang, hand out frames whose
 * strings are readable, and account for every byte as read or lost.
 *
 * An input starting with a 0 byte is one chunk's raw records: it is put
 * in a well-formed container first (the format of user/rec/recfile.h, built
 * here on purpose rather than with the writer), so that mutations reach
 * the record decoder instead of dying at the checksum. Any other input
 * is read as a whole recording file.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "model/callsites.h"
#include "rec/recording.h"

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/* A version 1 header and one last chunk holding raw[0..len). */
static uint8_t *wrap(const uint8_t *raw, size_t len, size_t *out_len)
{
	uLongf clen = compressBound(len);
	uint8_t *f = calloc(1, RECFILE_HDR_SIZE + RECFILE_CHUNK_HDR + clen), *c;
	uint32_t crc;

	if (!f)
		return NULL;
	memcpy(f, "\x89UMTREC\n", 8);
	put32(f + 8, RECFILE_VERSION);
	put32(f + 12, RECFILE_HDR_SIZE);
	put32(f + 16, 4096);
	memcpy(f + 40, "fuzz", 4);
	put32(f + 168, (uint32_t)crc32(0, f, 168));
	c = f + RECFILE_HDR_SIZE;
	if (compress2(c + RECFILE_CHUNK_HDR, &clen, raw, len, 1) != Z_OK) {
		free(f);
		return NULL;
	}
	memcpy(c, "UMTC", 4);
	put32(c + 4, 0);
	put32(c + 8, (uint32_t)len);
	put32(c + 12, (uint32_t)clen);
	put32(c + 16, RECFILE_CHUNK_LAST);
	crc = (uint32_t)crc32(0, c, 20);
	put32(c + 20, (uint32_t)crc32(crc, c + RECFILE_CHUNK_HDR, clen));
	*out_len = RECFILE_HDR_SIZE + RECFILE_CHUNK_HDR + clen;
	return f;
}

static volatile size_t sink;

static void on_call(void *ctx, const struct umt_call_rec *r, const struct sym_frame *frames,
		    size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (frames[i].func)
			sink += strlen(frames[i].func);
		if (frames[i].module)
			sink += strlen(frames[i].module);
	}
	callsites__add(ctx, r, frames, n, 4096);
}

static void on_stop(void *ctx, const struct rec_stop *s)
{
	(void)ctx;
	sink += strlen(s->comm) + strlen(s->reason_text) + strlen(s->site);
}

/* PyTorch's allocator samples, whatever their figures, into its model. */
static struct torch_model torch;

static void on_torch(void *ctx, const struct torch_sample *s)
{
	(void)ctx;
	torch_model__add(&torch, s);
}

static const struct recording_ops ops = {
	.on_call = on_call,
	.on_stop = on_stop,
	.on_torch = on_torch,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct replay_stats st;
	struct torch_verdict v;
	struct callsites cs;
	uint8_t *file = NULL;
	size_t i;
	char warn[320];
	size_t len = size;
	int err;

	if (size && !data[0]) {
		file = wrap(data + 1, size - 1, &len);
		if (!file)
			return 0;
		data = file;
	}
	callsites__init(&cs, 1000);
	torch_model__init(&torch, NULL);
	err = recording__replay_mem(data, len, &ops, &cs, &st);
	if (!err) {
		if (st.file.good_bytes + st.file.lost_bytes != st.file.file_bytes)
			abort();	/* every byte is read or said lost */
		replay_stats__warning(&st, warn, sizeof(warn));
	}
	for (i = 0; i < torch.n; i++) {
		torch_model__judge(&torch, torch_model__dev(&torch, i), &v);
		sink += v.kind + v.advice;
	}
	torch_model__free(&torch);
	callsites__free(&cs);
	free(file);
	return 0;
}
