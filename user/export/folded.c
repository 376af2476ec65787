// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Folded stacks: the input of flamegraph.pl and inferno-flamegraph. */
#include <errno.h>
#include <stdlib.h>
#include "export/export.h"
#include "lib/escape.h"

int export_folded(const struct stackset *s, enum stack_metric m, FILE *out)
{
	const struct stack **v;
	size_t i, j;

	if (!s || !out || (unsigned int)m >= STACK_VAL__COUNT)
		return -EINVAL;
	v = stackset__sorted(s);
	if (!v)
		return -ENOMEM;
	for (i = 0; v[i] && !ferror(out); i++) {
		const struct stack *st = v[i];

		if (!st->values[m])
			continue;
		for (j = 0; j < st->n_frames; j++) {
			if (j)
				fputc(';', out);
			esc__folded_frame(out, st->frames[j]);
		}
		fprintf(out, " %llu\n", (unsigned long long)st->values[m]);
	}
	free(v);
	return export__finish(out);
}
