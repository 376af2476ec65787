// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * PyTorch's caching allocator on the timeline's memory plot: for the
 * largest few processes and devices, reserved as a line and allocated's
 * range (its floor to its peak between two samples) as a band under it.
 * Fragmentation reads at a glance: the line climbs away from a flat band.
 * Its episodes (model/torch.h: fragmentation, leak, cache-held) shade the
 * plot from their start to their end, under the lines, labelled by kind.
 * Points are folded per pixel column, so an hour of samples draws as fast
 * as a minute.
 */
#include <stdlib.h>
#include <string.h>
#include "export/export.h"
#include "export/timeline.h"
#include "lib/escape.h"
#include "lib/units.h"

static const char *const torch_colors[TIMELINE_TORCH_DRAWN] = {
	"#c0392b", "#2c3e50", "#8e44ad", "#16a085",
};

/* The series drawn, largest first: indexes into t->torch; how many. */
static size_t drawn(const struct timeline *t, size_t *idx)
{
	size_t n = 0, i, j;

	for (i = 0; i < t->n_torch; i++) {
		if (!t->torch[i].n_points)
			continue;
		for (j = n; j > 0 && t->torch[idx[j - 1]].peak < t->torch[i].peak; j--)
			if (j < TIMELINE_TORCH_DRAWN)
				idx[j] = idx[j - 1];
		if (j < TIMELINE_TORCH_DRAWN)
			idx[j] = i;
		if (n < TIMELINE_TORCH_DRAWN)
			n++;
	}
	return n;
}

uint64_t timeline_torch__max(const struct timeline *t)
{
	uint64_t max = 0;
	size_t i;

	for (i = 0; i < t->n_torch; i++)
		max = t->torch[i].peak > max ? t->torch[i].peak : max;
	return max;
}

static double x_of(const struct timeline_frame *fr, uint64_t t_ns)
{
	return fr->x0 + (double)(t_ns - fr->tmin) / fr->span * fr->pw;
}

static double y_of(const struct timeline_frame *fr, uint64_t bytes)
{
	return fr->bottom - (double)bytes / fr->unit / fr->ytop * (fr->bottom - fr->top);
}

struct column {
	double x;
	uint64_t reserved, low, high;
};

/* The series folded into one point per pixel column; how many. */
static size_t fold(const struct timeline_torch *s, const struct timeline_frame *fr,
		   struct column *cols)
{
	size_t n = 0, i;
	long last = -1, c;

	for (i = 0; i < s->n_points; i++) {
		const struct timeline_torch_point *p = &s->points[i];

		c = (long)x_of(fr, p->t_ns);
		if (c != last) {
			cols[n++] = (struct column){ x_of(fr, p->t_ns), p->reserved, p->alloc_low,
						     p->alloc_high };
			last = c;
			continue;
		}
		if (p->reserved > cols[n - 1].reserved)
			cols[n - 1].reserved = p->reserved;
		if (p->alloc_low < cols[n - 1].low)
			cols[n - 1].low = p->alloc_low;
		if (p->alloc_high > cols[n - 1].high)
			cols[n - 1].high = p->alloc_high;
	}
	return n;
}

static void draw_one(const struct timeline_torch *s, const struct timeline_frame *fr,
		     const char *color, struct column *cols, FILE *out)
{
	size_t n = fold(s, fr, cols), k;
	char b[3][32];

	fprintf(out, "<g class=\"torch\"><title>");
	esc__xml(out, s->comm);
	fprintf(out, " (%u) cuda:%u, PyTorch's caching allocator: ", s->pid, s->device);
	if (s->reserved_known)
		fprintf(out, "reserved (line) up to %s, ",
			fmt_bytes_iec(s->points[s->n_points - 1].reserved, b[0], sizeof(b[0])));
	fprintf(out, "allocated (band) between %s and %s at the end</title>\n",
		fmt_bytes_iec(s->points[s->n_points - 1].alloc_low, b[1], sizeof(b[1])),
		fmt_bytes_iec(s->points[s->n_points - 1].alloc_high, b[2], sizeof(b[2])));
	fprintf(out, "<path fill=\"%s\" opacity=\"0.3\" stroke=\"none\" d=\"", color);
	for (k = 0; k < n; k++)
		fprintf(out, "%c%.1f %.1f ", k ? 'L' : 'M', cols[k].x, y_of(fr, cols[k].high));
	for (k = n; k-- > 0;)
		fprintf(out, "L%.1f %.1f ", cols[k].x + (n == 1 ? 2 : 0), y_of(fr, cols[k].low));
	fputs("Z\"/>\n", out);
	if (s->reserved_known) {
		fprintf(out, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"",
			color);
		for (k = 0; k < n; k++)
			fprintf(out, "%s%.1f,%.1f", k ? " " : "", cols[k].x,
				y_of(fr, cols[k].reserved));
		fputs("\"/>\n", out);
	}
	fputs("</g>\n", out);
}

/* By kind: the worse, the warmer. */
static const char *band_color(const char *kind)
{
	if (!strcmp(kind, "leak"))
		return "#c0392b";
	if (!strcmp(kind, "fragmentation"))
		return "#e67e22";
	return "#95a5a6";
}

static void draw_bands(const struct timeline_torch *s, const struct timeline_frame *fr,
		       FILE *out)
{
	const struct timeline_torch_band *b;
	uint64_t tmax = fr->tmin + (uint64_t)fr->span;
	double x0, x1;
	size_t i;

	for (i = 0; i < s->n_bands; i++) {
		b = &s->bands[i];
		if (b->end_ns < fr->tmin || b->start_ns > tmax)
			continue;
		x0 = x_of(fr, b->start_ns < fr->tmin ? fr->tmin : b->start_ns);
		x1 = x_of(fr, b->end_ns > tmax ? tmax : b->end_ns);
		if (x1 - x0 < 2)
			x1 = x0 + 2;	/* a short one stays visible */
		fprintf(out, "<g class=\"torch-episode\"><title>");
		esc__xml(out, s->comm);
		fprintf(out, " (%u) cuda:%u: ", s->pid, s->device);
		esc__xml(out, b->kind);
		fprintf(out, " from %.1f s to %.1f s of the timeline</title>\n",
			(double)(b->start_ns - fr->tmin) / 1e9,
			(double)(b->end_ns - fr->tmin) / 1e9);
		fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
			"fill=\"%s\" opacity=\"0.15\"/>\n", x0, fr->top, x1 - x0,
			fr->bottom - fr->top, band_color(b->kind));
		fprintf(out, "<text class=\"blabel\" x=\"%.1f\" y=\"%.1f\" style=\"fill: %s\">",
			x0 + 2, fr->top + 12 + 12 * (double)(i % 2), band_color(b->kind));
		esc__xml(out, b->kind);
		fputs("</text></g>\n", out);
	}
}

void timeline_torch__draw(const struct timeline *t, const struct timeline_frame *fr,
			  FILE *out)
{
	size_t idx[TIMELINE_TORCH_DRAWN], n = drawn(t, idx), i, most = 0;
	struct column *cols;

	for (i = 0; i < n; i++)
		most = t->torch[idx[i]].n_points > most ? t->torch[idx[i]].n_points : most;
	cols = calloc(most ? most : 1, sizeof(*cols));
	if (!cols)
		return;
	for (i = 0; i < n; i++)
		draw_bands(&t->torch[idx[i]], fr, out);
	for (i = 0; i < n; i++)
		draw_one(&t->torch[idx[i]], fr, torch_colors[i], cols, out);
	free(cols);
}

void timeline_torch__legend(const struct timeline *t,
			    void (*fn)(void *ctx, const char *label, const char *color, bool band),
			    void *ctx)
{
	size_t idx[TIMELINE_TORCH_DRAWN], n = drawn(t, idx), i;
	char label[TIMELINE_COMM_LEN + 64];

	for (i = 0; i < n; i++) {
		const struct timeline_torch *s = &t->torch[idx[i]];

		if (s->reserved_known) {
			snprintf(label, sizeof(label), "%s (%u) cuda:%u reserved", s->comm, s->pid,
				 s->device);
			fn(ctx, label, torch_colors[i], false);
		}
		snprintf(label, sizeof(label), "%s (%u) cuda:%u allocated", s->comm, s->pid,
			 s->device);
		fn(ctx, label, torch_colors[i], true);
	}
}
