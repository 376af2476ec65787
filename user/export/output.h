/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* One line per GPU call, as text for people or JSON for programs. */
#ifndef UMTRACE_OUTPUT_H
#define UMTRACE_OUTPUT_H

#include <stdint.h>
#include <stdio.h>
#include <linux/types.h>
#include "umtrace.h"

struct output_clock {
	int64_t realtime_minus_mono_ns;	/* turns record times into wall time */
	uint64_t page_size;
};

void output__clock_init(struct output_clock *c);
void output__call_header(FILE *f);
void output__call_text(FILE *f, const struct output_clock *c,
		       const struct umt_call_rec *r);
void output__call_json(FILE *f, const struct output_clock *c,
		       const struct umt_call_rec *r);
const char *output__end_name(uint32_t end);

#endif /* UMTRACE_OUTPUT_H */
