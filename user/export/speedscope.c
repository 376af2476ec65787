// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * speedscope's file format (https://www.speedscope.app/file-format-schema.json):
 * shared.frames holds each frame name once; one "sampled" profile lists
 * every stack as frame indices, root first, with its value as weight.
 *
 * Strings: a stackset's names are valid UTF-8 without control characters
 * (text__clean()), so escaping '"' and '\' would do; control characters
 * are still written as \u00XX should one ever get here (json__utf8_string()).
 */
#include <errno.h>
#include <stdlib.h>
#include "export/export.h"
#include "lib/escape.h"

#ifndef UMTRACE_VERSION
#define UMTRACE_VERSION "unknown"
#endif

#define NO_INDEX UINT32_MAX

int export_speedscope(const struct stackset *s, enum stack_metric m, FILE *out)
{
	size_t n_names, i, j, n_frames = 0;
	const struct stack **v = NULL;
	uint32_t *index = NULL;		/* name id -> frame index */
	uint32_t *order = NULL;		/* frame index -> name id */
	const char *sep;
	uint64_t end;
	int err = 0;

	if (!s || !out || (unsigned int)m >= STACK_VAL__COUNT)
		return -EINVAL;
	n_names = stackset__n_names(s);
	v = stackset__sorted(s);
	index = malloc((n_names + 1) * sizeof(*index));
	order = malloc((n_names + 1) * sizeof(*order));
	if (!v || !index || !order) {
		err = -ENOMEM;
		goto out;
	}
	/* Frames in order of first use: only those of stacks drawn. */
	for (i = 0; i < n_names; i++)
		index[i] = NO_INDEX;
	end = 0;
	for (i = 0; v[i]; i++) {
		if (!v[i]->values[m])
			continue;
		end += v[i]->values[m];
		for (j = 0; j < v[i]->n_frames; j++) {
			uint32_t id = v[i]->frame_ids[j];

			if (index[id] == NO_INDEX) {
				index[id] = (uint32_t)n_frames;
				order[n_frames++] = id;
			}
		}
	}

	fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\n", out);
	fputs("\"exporter\":\"umtrace " UMTRACE_VERSION "\",\n", out);
	fprintf(out, "\"name\":\"umtrace: %s by GPU call stack\",\n", stack_metric__label(m));
	fputs("\"activeProfileIndex\":0,\n\"shared\":{\"frames\":[", out);
	for (i = 0; i < n_frames; i++) {
		fputs(i ? ",\n{\"name\":" : "\n{\"name\":", out);
		json__utf8_string(out, stackset__name(s, order[i]));
		fputc('}', out);
	}
	fputs("]},\n\"profiles\":[{\"type\":\"sampled\",", out);
	fprintf(out, "\"name\":\"%s of all processes\",\"unit\":\"%s\",", stack_metric__label(m),
		stack_metric__is_bytes(m) ? "bytes" : "none");
	fprintf(out, "\"startValue\":0,\"endValue\":%llu,\n\"samples\":[",
		(unsigned long long)end);
	for (i = 0, sep = "\n"; v[i] && !ferror(out); i++) {
		if (!v[i]->values[m])
			continue;
		fputs(sep, out);
		sep = ",\n";
		for (j = 0; j < v[i]->n_frames; j++)
			fprintf(out, "%c%u", j ? ',' : '[', index[v[i]->frame_ids[j]]);
		fputc(']', out);
	}
	fputs("],\n\"weights\":[", out);
	for (i = 0, sep = ""; v[i]; i++) {
		if (!v[i]->values[m])
			continue;
		fprintf(out, "%s%llu", sep, (unsigned long long)v[i]->values[m]);
		sep = ",";
	}
	fputs("]}]}\n", out);
out:
	free(v);
	free(index);
	free(order);
	if (err)
		return err;
	return export__finish(out);
}
