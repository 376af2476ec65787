// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The timeline (built in timeline.c, user/export/timeline.h) drawn as one
 * static SVG (export_timeline(), user/export/export.h): a memory plot with
 * the host's available, free and total memory as lines over the
 * GPU-attributed memory of each process as stacked areas, PyTorch's
 * allocator over them (timeline_torch.c), two lanes under it on the same
 * time axis for GPU allocation bursts and reclaim activity, and a vertical
 * line at every guard stop. Details are in <title> tooltips;
 * no script.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "export/export.h"
#include "export/timeline.h"
#include "lib/escape.h"
#include "lib/units.h"

#define W TIMELINE_WIDTH
#define H TIMELINE_HEIGHT
#define ML 72			/* left margin: memory tick labels */
#define MR 20
#define PLOT_BOTTOM (H - 150)
#define BURST_TOP (PLOT_BOTTOM + 12)
#define BURST_H 50
#define RECLAIM_TOP (BURST_TOP + BURST_H + 8)
#define RECLAIM_H 16
#define AXIS_Y (RECLAIM_TOP + RECLAIM_H)
#define SERIES_MAX 8		/* processes drawn on their own; the rest are "other" */
#define BURST_LABELS 5		/* the largest bursts get their size written */
#define STOP_LABELS 40
#define LEGEND_CHAR_W 6.6

static const char *const series_colors[SERIES_MAX + 1] = {
	"#f28e2b", "#59a14f", "#b07aa1", "#edc948", "#76b7b2",
	"#ff9da7", "#9c755f", "#86bcb6", "#c9c9c9",	/* the last: other */
};

#define COLOR_AVAIL "#1f5fbf"
#define COLOR_FREE "#17a2b8"
#define COLOR_POOL "#8a5a00"
#define COLOR_TOTAL "#555555"
#define COLOR_BURST "#6a3d9a"
#define COLOR_RECLAIM "#8c564b"
#define COLOR_STOP "#d62728"

struct draw {
	const struct timeline *t;
	FILE *out;
	uint64_t tmin;
	double span;		/* ns, never 0 */
	double x0, pw;		/* plot left and width */
	double top, bottom;	/* plot top and bottom */
	double unit;		/* bytes per memory axis unit */
	const char *uname;
	double ytop, ystep;	/* memory axis top and tick step, in units */
	size_t ncols;		/* pixel columns */
	uint64_t *attributed;	/* by sample: the sum over processes */
};

static double xt(const struct draw *d, uint64_t t_ns)
{
	return d->x0 + (double)(t_ns - d->tmin) / d->span * d->pw;
}

static double yv(const struct draw *d, uint64_t bytes)
{
	return d->bottom - (double)bytes / d->unit / d->ytop * (d->bottom - d->top);
}

static size_t col_of(const struct draw *d, uint64_t t_ns)
{
	size_t c = (size_t)((double)(t_ns - d->tmin) / d->span * (double)d->ncols);

	return c < d->ncols ? c : d->ncols - 1;
}

/* 1, 2, 2.5 or 5 times a power of ten, at least raw (no libm here). */
static double nice_step(double raw)
{
	static const double f[] = { 1, 2, 2.5, 5, 10 };
	double mag = 1;
	unsigned int i;

	if (!(raw > 0))
		return 1;
	while (mag * 10 <= raw)
		mag *= 10;
	while (mag > raw)
		mag /= 10;
	for (i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (f[i] * mag >= raw * (1 - 1e-9))
			return f[i] * mag;
	return 10 * mag;
}

/* Decimals that print every multiple of step exactly: 2.5 needs one. */
static int step_decimals(double step)
{
	double v = step;
	int d;

	for (d = 0; d < 6; d++, v *= 10) {
		double r = (double)(long long)(v + 0.5);

		if (v - r < 1e-6 * (v > 1 ? v : 1) && r - v < 1e-6 * (v > 1 ? v : 1))
			return d;
	}
	return 6;
}

static void put_text(FILE *out, const char *cls, double x, double y, const char *anchor,
		     const char *s)
{
	fprintf(out, "<text class=\"%s\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">", cls, x, y,
		anchor);
	esc__xml(out, s);
	fputs("</text>\n", out);
}

static void proc_name(const struct timeline_proc *p, char *buf, size_t len)
{
	if (p->pid)
		snprintf(buf, len, "%s (%u)", p->comm, p->pid);
	else
		snprintf(buf, len, "%s", p->comm);
}

static const char *comm_of(const struct timeline *t, uint32_t pid)
{
	size_t i;

	for (i = 0; i < t->n_procs; i++)
		if (t->procs[i].pid == pid)
			return t->procs[i].comm;
	return NULL;
}

static void put_axes(const struct draw *d)
{
	double span_s = d->span / 1e9, step, v;
	char buf[64];
	int dec;

	/* Memory: horizontal grid and labels. */
	step = d->ystep;
	dec = step_decimals(step);
	for (v = 0; v <= d->ytop * (1 + 1e-9); v += step) {
		double y = d->bottom - v / d->ytop * (d->bottom - d->top);

		fprintf(d->out, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
			d->x0, y, d->x0 + d->pw, y);
		snprintf(buf, sizeof(buf), "%.*f", dec, v);
		put_text(d->out, "tick", d->x0 - 6, y + 4, "end", buf);
	}
	snprintf(buf, sizeof(buf), "host memory (%s)", d->uname);
	fprintf(d->out, "<text class=\"axis\" transform=\"translate(18 %.1f) rotate(-90)\" "
		"text-anchor=\"middle\">%s</text>\n", (d->top + d->bottom) / 2, buf);

	/* Time: vertical grid through the plot and the lanes, labels under. */
	step = nice_step(span_s / 8);
	dec = step_decimals(step);
	for (v = 0; v <= span_s * (1 + 1e-9); v += step) {
		double x = d->x0 + v / span_s * d->pw;

		fprintf(d->out, "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%u\"/>\n",
			x, d->top, x, AXIS_Y);
		snprintf(buf, sizeof(buf), "%.*f", dec, v);
		put_text(d->out, "tick", x, AXIS_Y + 16, "middle", buf);
	}
	put_text(d->out, "axis", d->x0 + d->pw / 2, AXIS_Y + 38, "middle",
		 "time (s) since the start of the recording");
	fprintf(d->out, "<path class=\"frame\" d=\"M%.1f %.1f V%.1f H%.1f\"/>\n", d->x0, d->top,
		d->bottom, d->x0 + d->pw);
	put_text(d->out, "lane", d->x0 - 6, BURST_TOP + BURST_H / 2 + 4, "end", "GPU allocs");
	put_text(d->out, "lane", d->x0 - 6, RECLAIM_TOP + RECLAIM_H - 4, "end", "reclaim");
	fprintf(d->out, "<rect class=\"laneb\" x=\"%.1f\" y=\"%u\" width=\"%.1f\" height=\"%u\"/>\n"
		"<rect class=\"laneb\" x=\"%.1f\" y=\"%u\" width=\"%.1f\" height=\"%u\"/>\n",
		d->x0, BURST_TOP, d->pw, BURST_H, d->x0, RECLAIM_TOP, d->pw, RECLAIM_H);
}

/*
 * The samples to draw: all of them when they fit, else per pixel column
 * the ones with the lowest and highest available memory and the highest
 * attributed memory, in time order. Returns how many, in pick.
 */
static size_t pick_samples(const struct draw *d, size_t *pick)
{
	const struct timeline *t = d->t;
	size_t n = 0, i, k, col = SIZE_MAX, lo = 0, hi = 0, top = 0;

	if (t->n_samples <= 2 * d->ncols) {
		for (i = 0; i < t->n_samples; i++)
			pick[i] = i;
		return t->n_samples;
	}
	for (i = 0; i <= t->n_samples; i++) {
		size_t c = i < t->n_samples ? col_of(d, t->samples[i].t_ns) : SIZE_MAX;
		size_t three[3];

		if (c == col) {
			if (t->samples[i].mem_available < t->samples[lo].mem_available)
				lo = i;
			if (t->samples[i].mem_available > t->samples[hi].mem_available)
				hi = i;
			if (d->attributed[i] > d->attributed[top])
				top = i;
			continue;
		}
		if (col != SIZE_MAX) {
			/* Flush the column: its picks sorted, without repeats. */
			three[0] = lo;
			three[1] = hi;
			three[2] = top;
			for (k = 1; k < 3; k++) {
				size_t v = three[k], j = k;

				while (j && three[j - 1] > v) {
					three[j] = three[j - 1];
					j--;
				}
				three[j] = v;
			}
			for (k = 0; k < 3; k++)
				if (!n || pick[n - 1] != three[k])
					pick[n++] = three[k];
		}
		col = c;
		lo = hi = top = i;
	}
	return n;
}

/* Rank processes by peak; ser[i] is the series of procs[i]. */
static size_t assign_series(const struct timeline *t, size_t *ser)
{
	size_t i, j, rank, n_own = 0;

	for (i = 0; i < t->n_procs; i++) {
		const struct timeline_proc *p = &t->procs[i];

		rank = 0;
		for (j = 0; j < t->n_procs; j++) {
			const struct timeline_proc *q = &t->procs[j];

			if (q->pid && (q->peak > p->peak || (q->peak == p->peak && j < i)))
				rank++;
		}
		ser[i] = p->pid && rank < SERIES_MAX ? rank : SERIES_MAX;
		if (ser[i] < SERIES_MAX && ser[i] + 1 > n_own)
			n_own = ser[i] + 1;
	}
	return n_own;
}

/*
 * vals[s * n + k]: series s at pick k. Both a process's points and the
 * picks ascend by sample, so one cursor each walks them together.
 */
static void series_values(const struct timeline *t, const size_t *ser, const size_t *pick,
			  size_t n, uint64_t *vals)
{
	size_t i, k;

	for (i = 0; i < t->n_procs; i++) {
		const struct timeline_proc *p = &t->procs[i];
		size_t c = 0;

		for (k = 0; k < n; k++) {
			while (c < p->n_points && p->points[c].sample < pick[k])
				c++;
			if (c < p->n_points && p->points[c].sample == pick[k])
				vals[ser[i] * n + k] += p->points[c].bytes;
		}
	}
}

/* x of pick k; a lone sample is held across the whole plot. */
static double pick_x(const struct draw *d, const size_t *pick, size_t n, size_t k)
{
	if (n == 1)
		return k ? d->x0 + d->pw : d->x0;
	return xt(d, d->t->samples[pick[k]].t_ns);
}

static int put_areas(const struct draw *d, const size_t *pick, size_t n,
		     const uint64_t *vals, const bool *present)
{
	size_t m = n == 1 ? 2 : n, s, k, r;
	uint64_t *base = calloc(n, sizeof(*base));

	if (!base)
		return -ENOMEM;
	for (s = 0; s <= SERIES_MAX; s++) {
		if (!present[s])
			continue;
		fprintf(d->out, "<path class=\"area\" fill=\"%s\" d=\"", series_colors[s]);
		for (k = 0; k < m; k++) {
			size_t p = n == 1 ? 0 : k;

			fprintf(d->out, "%c%.1f %.1f ", k ? 'L' : 'M', pick_x(d, pick, n, k),
				yv(d, base[p] + vals[s * n + p]));
		}
		for (r = m; r-- > 0;) {
			size_t p = n == 1 ? 0 : r;

			fprintf(d->out, "L%.1f %.1f ", pick_x(d, pick, n, r), yv(d, base[p]));
		}
		fputs("Z\"/>\n", d->out);
		for (k = 0; k < n; k++)
			base[k] += vals[s * n + k];
	}
	free(base);
	return 0;
}

enum mem_field { MEM_TOTAL, MEM_AVAILABLE, MEM_FREE, MEM_POOL };

static uint64_t mem_of(const struct timeline_sample *s, enum mem_field f)
{
	switch (f) {
	case MEM_TOTAL:
		return s->mem_total;
	case MEM_AVAILABLE:
		return s->mem_available;
	case MEM_FREE:
		return s->mem_free;
	default:
		return s->pool;
	}
}

/* Did the driver's pool hold anything at any sample? */
static bool any_pool(const struct timeline *t)
{
	size_t i;

	for (i = 0; i < t->n_samples; i++)
		if (t->samples[i].pool)
			return true;
	return false;
}

static void put_line(const struct draw *d, const size_t *pick, size_t n, enum mem_field f,
		     const char *cls)
{
	size_t m = n == 1 ? 2 : n, k;

	fprintf(d->out, "<polyline class=\"%s\" points=\"", cls);
	for (k = 0; k < m; k++)
		fprintf(d->out, "%s%.1f,%.1f", k ? " " : "", pick_x(d, pick, n, k),
			yv(d, mem_of(&d->t->samples[pick[n == 1 ? 0 : k]], f)));
	fputs("\"/>\n", d->out);
	if (n == 1)
		fprintf(d->out, "<circle class=\"%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"3\"/>\n", cls,
			xt(d, d->t->samples[pick[0]].t_ns), yv(d, mem_of(&d->t->samples[pick[0]], f)));
}

struct col_sum {
	uint64_t sum;
	uint32_t count;
	uint32_t pid;		/* the first one seen */
	bool many_pids;
	uint64_t first_ns;
};

/* The tallest column: the scale of bursts' or reclaims' bars. */
static uint64_t cols_max(const struct col_sum *cols, size_t n)
{
	uint64_t max = 0;
	size_t c;

	for (c = 0; c < n; c++)
		if (cols[c].sum > max)
			max = cols[c].sum;
	return max;
}

static void put_bursts(const struct draw *d, struct col_sum *cols)
{
	const struct timeline *t = d->t;
	size_t i, c, labelled[BURST_LABELS], n_lab = 0;
	uint64_t max;
	char b[32], tip[192];

	memset(cols, 0, d->ncols * sizeof(*cols));
	for (i = 0; i < t->n_bursts; i++) {
		struct col_sum *cs = &cols[col_of(d, t->bursts[i].t_ns)];

		if (!cs->count) {
			cs->pid = t->bursts[i].pid;
			cs->first_ns = t->bursts[i].t_ns;
		}
		cs->many_pids |= cs->pid != t->bursts[i].pid;
		cs->count++;
		cs->sum += t->bursts[i].bytes;
	}
	max = cols_max(cols, d->ncols);
	for (c = 0; c < d->ncols; c++) {
		double h, x = d->x0 + (double)c;
		const char *comm;

		if (!cols[c].count)
			continue;
		h = max ? 2 + (BURST_H - 16) * (double)cols[c].sum / (double)max : 2;
		fmt_bytes_iec(cols[c].sum, b, sizeof(b));
		comm = comm_of(t, cols[c].pid);
		if (cols[c].count == 1)
			snprintf(tip, sizeof(tip), "GPU allocation burst: %s by %s (%u) at %.2f s", b,
				 comm ? comm : "pid", cols[c].pid,
				 (double)(cols[c].first_ns - d->tmin) / 1e9);
		else
			snprintf(tip, sizeof(tip), "%u GPU allocation bursts: %s%s at %.2f s",
				 cols[c].count, b, cols[c].many_pids ? " by several processes" : "",
				 (double)(cols[c].first_ns - d->tmin) / 1e9);
		fprintf(d->out, "<rect class=\"burst\" x=\"%.1f\" y=\"%.1f\" width=\"2\" "
			"height=\"%.1f\"><title>", x - 1, BURST_TOP + BURST_H - h, h);
		esc__xml(d->out, tip);
		fputs("</title></rect>\n", d->out);
	}
	/* Label the largest, keeping labels apart. */
	while (n_lab < BURST_LABELS) {
		size_t best = SIZE_MAX, j;

		for (c = 0; c < d->ncols; c++) {
			bool near = false;

			if (!cols[c].count || (best != SIZE_MAX && cols[c].sum <= cols[best].sum))
				continue;
			for (j = 0; j < n_lab; j++)
				near |= (c > labelled[j] ? c - labelled[j] : labelled[j] - c) < 64;
			if (!near)
				best = c;
		}
		if (best == SIZE_MAX)
			break;
		labelled[n_lab++] = best;
		put_text(d->out, "blabel", d->x0 + (double)best,
			 BURST_TOP + BURST_H - (2 + (BURST_H - 16) * (double)cols[best].sum /
						(double)max) - 3,
			 "middle", fmt_bytes_iec(cols[best].sum, b, sizeof(b)));
	}
}

static void put_reclaims(const struct draw *d, struct col_sum *cols)
{
	const struct timeline *t = d->t;
	uint64_t max;
	size_t i, c;

	memset(cols, 0, d->ncols * sizeof(*cols));
	for (i = 0; i < t->n_reclaims; i++) {
		struct col_sum *cs = &cols[col_of(d, t->reclaims[i].t_ns)];

		if (!cs->count)
			cs->first_ns = t->reclaims[i].t_ns;
		cs->count++;
		cs->sum += t->reclaims[i].count;
	}
	max = cols_max(cols, d->ncols);
	for (c = 0; c < d->ncols; c++) {
		if (!cols[c].count)
			continue;
		fprintf(d->out, "<rect class=\"reclaim\" x=\"%.1f\" y=\"%u\" width=\"2\" height=\"%u\" "
			"opacity=\"%.2f\"><title>reclaim: %llu at %.2f s</title></rect>\n",
			d->x0 + (double)c - 1, RECLAIM_TOP, RECLAIM_H,
			0.3 + 0.7 * (max ? (double)cols[c].sum / (double)max : 1),
			(unsigned long long)cols[c].sum, (double)(cols[c].first_ns - d->tmin) / 1e9);
	}
}

static void put_stops(const struct draw *d)
{
	const struct timeline *t = d->t;
	char label[TIMELINE_COMM_LEN + TIMELINE_REASON_LEN + 48], avail[32];
	size_t i;

	for (i = 0; i < t->n_stops; i++) {
		const struct timeline_stop *s = &t->stops[i];
		double x = xt(d, s->t_ns);
		bool left = x > d->x0 + d->pw * 0.6;

		fmt_bytes_iec(s->available, avail, sizeof(avail));
		fprintf(d->out, "<g class=\"stop\"><title>");
		fprintf(d->out, "guard stopped ");
		esc__xml(d->out, s->comm);
		fprintf(d->out, " (%u) at %.2f s: ", s->pid, (double)(s->t_ns - d->tmin) / 1e9);
		esc__xml(d->out, s->reason);
		fprintf(d->out, "; available %s</title>", avail);
		fprintf(d->out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%u\"/>", x, d->top, x,
			AXIS_Y);
		if (i < STOP_LABELS) {
			snprintf(label, sizeof(label), "stop %s (%u): %s", s->comm, s->pid, s->reason);
			fputs("\n", d->out);
			put_text(d->out, "slabel", left ? x - 4 : x + 4,
				 d->top + 14 + (double)(i % 4) * 15, left ? "end" : "start", label);
		}
		fputs("</g>\n", d->out);
	}
}

static const char css[] =
	"text { font-family: 'DejaVu Sans', Verdana, sans-serif; font-size: 12px; fill: #222; }\n"
	".title { font-size: 16px; font-weight: bold; }\n"
	".sub { fill: #444; }\n"
	".tick { font-size: 11px; fill: #444; }\n"
	".axis { font-size: 12px; font-weight: bold; fill: #333; }\n"
	".lane { font-size: 11px; fill: #444; }\n"
	".grid { stroke: #e2e2e2; stroke-width: 1; }\n"
	".frame { fill: none; stroke: #888; stroke-width: 1; }\n"
	".laneb { fill: #f4f4f2; }\n"
	".area { stroke: none; opacity: 0.85; }\n"
	".avail { fill: none; stroke: " COLOR_AVAIL "; stroke-width: 2; }\n"
	"circle.avail { fill: " COLOR_AVAIL "; }\n"
	".free { fill: none; stroke: " COLOR_FREE "; stroke-width: 1; stroke-dasharray: 2 2; }\n"
	"circle.free { fill: " COLOR_FREE "; }\n"
	".total { fill: none; stroke: " COLOR_TOTAL "; stroke-width: 1; stroke-dasharray: 6 3; }\n"
	"circle.total { fill: " COLOR_TOTAL "; }\n"
	".pool { fill: none; stroke: " COLOR_POOL "; stroke-width: 2; stroke-dasharray: 8 2 2 2; }\n"
	"circle.pool { fill: " COLOR_POOL "; }\n"
	".burst { fill: " COLOR_BURST "; }\n"
	".blabel { font-size: 10px; fill: " COLOR_BURST "; font-weight: bold; }\n"
	".reclaim { fill: " COLOR_RECLAIM "; }\n"
	".stop line, line.stop { stroke: " COLOR_STOP "; stroke-width: 1.5; stroke-dasharray: 4 3; }\n"
	".slabel { font-size: 11px; fill: " COLOR_STOP "; paint-order: stroke; "
	"stroke: #fff; stroke-width: 3px; }\n";

struct legend {
	FILE *out;
	double x, y;
};

/* One legend entry: a swatch (a line or a box) and its label; wraps. */
static void legend_item(struct legend *l, const char *swatch_cls, const char *fill,
			const char *label)
{
	double w = 22 + LEGEND_CHAR_W * (double)strlen(label) + 16;

	if (l->x + w > W - MR) {
		l->x = ML;
		l->y += 18;
	}
	if (fill)
		fprintf(l->out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"16\" height=\"10\" fill=\"%s\"/>",
			l->x, l->y - 9, fill);
	else
		fprintf(l->out, "<line class=\"%s\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>",
			swatch_cls, l->x, l->y - 4, l->x + 16, l->y - 4);
	put_text(l->out, "", l->x + 22, l->y, "start", label);
	l->x += w;
}

static void torch_legend_item(void *ctx, const char *label, const char *color, bool band)
{
	struct legend *l = ctx;
	double w = 22 + LEGEND_CHAR_W * (double)strlen(label) + 16;

	if (band) {
		legend_item(l, NULL, color, label);
		return;
	}
	if (l->x + w > W - MR) {
		l->x = ML;
		l->y += 18;
	}
	fprintf(l->out, "<line stroke=\"%s\" stroke-width=\"2\" x1=\"%.1f\" y1=\"%.1f\" "
		"x2=\"%.1f\" y2=\"%.1f\"/>", color, l->x, l->y - 4, l->x + 16, l->y - 4);
	put_text(l->out, "", l->x + 22, l->y, "start", label);
	l->x += w;
}

static double put_legend(const struct draw *d, const bool *present, const size_t *ser,
			 size_t n_own)
{
	const struct timeline *t = d->t;
	struct legend l = { d->out, ML, 66 };
	char name[TIMELINE_COMM_LEN + 64], b[32];
	size_t s, i;

	legend_item(&l, "avail", NULL, "available");
	legend_item(&l, "free", NULL, "free");
	legend_item(&l, "total", NULL, "total");
	if (any_pool(t))
		legend_item(&l, "pool", NULL, "driver page pool");
	for (s = 0; s < n_own; s++) {
		for (i = 0; i < t->n_procs && ser[i] != s; i++)
			;
		if (i == t->n_procs)
			continue;
		proc_name(&t->procs[i], name, sizeof(name));
		snprintf(name + strlen(name), sizeof(name) - strlen(name), ", peak %s",
			 fmt_bytes_iec(t->procs[i].peak, b, sizeof(b)));
		legend_item(&l, NULL, series_colors[s], name);
	}
	if (present[SERIES_MAX])
		legend_item(&l, NULL, series_colors[SERIES_MAX], "other processes");
	timeline_torch__legend(t, torch_legend_item, &l);
	legend_item(&l, NULL, COLOR_BURST, "GPU allocation burst");
	legend_item(&l, NULL, COLOR_RECLAIM, "reclaim");
	legend_item(&l, "stop", NULL, "guard stop");
	return l.y;
}

static void put_title(const struct draw *d)
{
	const struct timeline *t = d->t;
	const struct timeline_sample *low = &t->samples[0];
	uint64_t burst_sum = 0;
	char sub[512], b1[32], b2[32];
	size_t i;

	for (i = 1; i < t->n_samples; i++)
		if (t->samples[i].mem_available < low->mem_available)
			low = &t->samples[i];
	for (i = 0; i < t->n_bursts; i++)
		burst_sum += t->bursts[i].bytes;
	put_text(d->out, "title", W / 2, 24, "middle",
		 "Host memory over time, and the GPU allocations that took it");
	snprintf(sub, sizeof(sub),
		 "%zu sample%s over %.2f s; lowest available %s at %.2f s; %zu GPU allocation "
		 "bursts (%s); %zu reclaim marks; %zu guard stops",
		 t->n_samples, t->n_samples == 1 ? "" : "s", (double)(t->samples[t->n_samples - 1].t_ns - t->samples[0].t_ns) / 1e9,
		 fmt_bytes_iec(low->mem_available, b1, sizeof(b1)),
		 (double)(low->t_ns - d->tmin) / 1e9, t->n_bursts,
		 fmt_bytes_iec(burst_sum, b2, sizeof(b2)), t->n_reclaims, t->n_stops);
	put_text(d->out, "sub", W / 2, 44, "middle", sub);
}

/* The time range covers samples and events alike. */
static void time_range(struct draw *d)
{
	const struct timeline *t = d->t;
	uint64_t lo = t->samples[0].t_ns, hi = t->samples[t->n_samples - 1].t_ns;
	size_t i;

	for (i = 0; i < t->n_bursts; i++) {
		lo = t->bursts[i].t_ns < lo ? t->bursts[i].t_ns : lo;
		hi = t->bursts[i].t_ns > hi ? t->bursts[i].t_ns : hi;
	}
	for (i = 0; i < t->n_reclaims; i++) {
		lo = t->reclaims[i].t_ns < lo ? t->reclaims[i].t_ns : lo;
		hi = t->reclaims[i].t_ns > hi ? t->reclaims[i].t_ns : hi;
	}
	for (i = 0; i < t->n_stops; i++) {
		lo = t->stops[i].t_ns < lo ? t->stops[i].t_ns : lo;
		hi = t->stops[i].t_ns > hi ? t->stops[i].t_ns : hi;
	}
	d->tmin = lo;
	/* One sample alone still gets an axis: one second wide. */
	d->span = hi > lo ? (double)(hi - lo) : 1e9;
}

static void mem_scale(struct draw *d)
{
	const struct timeline *t = d->t;
	uint64_t max = 0;
	size_t i;

	for (i = 0; i < t->n_samples; i++) {
		const struct timeline_sample *s = &t->samples[i];
		uint64_t m = s->mem_total;

		m = s->mem_available > m ? s->mem_available : m;
		m = s->mem_free > m ? s->mem_free : m;
		m = d->attributed[i] > m ? d->attributed[i] : m;
		max = m > max ? m : max;
	}
	if (timeline_torch__max(t) > max)
		max = timeline_torch__max(t);
	if (max >= 1ULL << 30) {
		d->unit = (double)(1ULL << 30);
		d->uname = "GiB";
	} else if (max >= 1ULL << 20) {
		d->unit = (double)(1ULL << 20);
		d->uname = "MiB";
	} else {
		d->unit = 1024;
		d->uname = "KiB";
	}
	/* About six ticks, the top one at or above the highest value. */
	d->ystep = nice_step((double)max / d->unit / 6);
	d->ytop = d->ystep * (double)(long long)((double)max / d->unit / d->ystep + 1 - 1e-9);
	if (d->ytop <= 0)
		d->ytop = d->ystep;
}

int export_timeline(const struct timeline *t, FILE *out)
{
	bool present[SERIES_MAX + 1] = { false };
	struct draw d = { .t = t, .out = out };
	size_t *pick = NULL, *ser = NULL, n, n_own, i, k;
	struct col_sum *cols = NULL;
	uint64_t *vals = NULL;
	int err = 0;

	if (!t || !out || !t->n_samples)
		return -EINVAL;
	d.x0 = ML;
	d.pw = W - ML - MR;
	d.ncols = (size_t)d.pw;
	d.attributed = calloc(t->n_samples, sizeof(*d.attributed));
	pick = calloc(t->n_samples < 3 * d.ncols ? t->n_samples : 3 * d.ncols, sizeof(*pick));
	ser = calloc(t->n_procs + 1, sizeof(*ser));
	cols = calloc(d.ncols, sizeof(*cols));
	if (!d.attributed || !pick || !ser || !cols) {
		err = -ENOMEM;
		goto out;
	}
	for (i = 0; i < t->n_procs; i++)
		for (k = 0; k < t->procs[i].n_points; k++)
			d.attributed[t->procs[i].points[k].sample] += t->procs[i].points[k].bytes;
	time_range(&d);
	mem_scale(&d);
	n = pick_samples(&d, pick);
	n_own = assign_series(t, ser);
	vals = calloc((SERIES_MAX + 1) * n, sizeof(*vals));
	if (!vals) {
		err = -ENOMEM;
		goto out;
	}
	series_values(t, ser, pick, n, vals);
	for (i = 0; i < t->n_procs; i++)
		present[ser[i]] |= t->procs[i].peak > 0;

	fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%u\" "
		"height=\"%u\" viewBox=\"0 0 %u %u\">\n<style>\n%s</style>\n"
		"<rect x=\"0\" y=\"0\" width=\"%u\" height=\"%u\" fill=\"#fff\"/>\n",
		W, H, W, H, css, W, H);
	put_title(&d);
	d.top = put_legend(&d, present, ser, n_own) + 14;
	d.bottom = PLOT_BOTTOM;
	put_axes(&d);
	err = put_areas(&d, pick, n, vals, present);
	if (err)
		goto out;
	timeline_torch__draw(t, &(struct timeline_frame){ d.tmin, d.span, d.x0, d.pw, d.top,
							  d.bottom, d.unit, d.ytop }, out);
	put_line(&d, pick, n, MEM_TOTAL, "total");
	put_line(&d, pick, n, MEM_FREE, "free");
	put_line(&d, pick, n, MEM_AVAILABLE, "avail");
	if (any_pool(t))
		put_line(&d, pick, n, MEM_POOL, "pool");
	put_bursts(&d, cols);
	put_reclaims(&d, cols);
	put_stops(&d);
	fputs("</svg>\n", out);
out:
	free(d.attributed);
	free(pick);
	free(ser);
	free(cols);
	free(vals);
	if (err)
		return err;
	return export__finish(out);
}
