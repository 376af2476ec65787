// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * An interactive flamegraph as one self-contained SVG file: the stacks are
 * merged into a tree of frames, each frame drawn as a rectangle as wide as
 * its share of the metric. Icicle layout: "all" on top, then the processes,
 * down to the GPU calls. The layout is computed here; the inline script
 * only re-lays it out for zoom and marks search matches.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "export/export.h"
#include "lib/escape.h"
#include "lib/units.h"

#define X_PAD 10		/* left and right margin */
#define ROW_H 16		/* a frame row; the rectangle is 1 px less */
#define TOP 84			/* first frame row */
#define BOTTOM 30		/* room for the details line */
#define CHAR_W 7		/* estimated width of a 12 px character */
#define MIN_PX 0.1		/* narrower frames are not drawn */

struct node {
	const char *name;
	uint64_t value;		/* everything through this frame */
	uint64_t self;		/* stacks ending at this frame */
	uint32_t first, last;	/* children; 0 is none (node 0 is the root) */
	uint32_t next;		/* sibling */
	uint32_t depth;
};

struct tree {
	struct node *v;
	size_t n, cap;
	uint32_t max_depth;
	size_t procs;		/* frames at depth 1 */
};

struct svg_ctx {
	FILE *out;
	const struct tree *t;
	enum stack_metric m;
	uint64_t total;
	double width;		/* of the frame area */
};

/* 1234567 -> "1,234,567": call counts are read, not parsed. */
static const char *fmt_count(uint64_t v, char *buf, size_t len)
{
	char digits[24];
	size_t n, i, o = 0;

	n = (size_t)snprintf(digits, sizeof(digits), "%llu", (unsigned long long)v);
	for (i = 0; i < n && o + 2 < len; i++) {
		if (i && (n - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = digits[i];
	}
	buf[o] = '\0';
	return buf;
}

static const char *fmt_value(enum stack_metric m, uint64_t v, char *buf, size_t len)
{
	char n[32];

	if (stack_metric__is_bytes(m))
		return fmt_bytes_iec(v, buf, len);
	snprintf(buf, len, "%s call%s", fmt_count(v, n, sizeof(n)), v == 1 ? "" : "s");
	return buf;
}

static int tree_add(struct tree *t, uint32_t parent, const char *name)
{
	struct node *n;

	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 1024;
		struct node *v = realloc(t->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		t->v = v;
		t->cap = cap;
	}
	if (t->n >= UINT32_MAX)
		return -ENOMEM;
	n = &t->v[t->n];
	memset(n, 0, sizeof(*n));
	n->name = name;
	n->depth = t->v[parent].depth + 1;
	if (t->v[parent].last)
		t->v[t->v[parent].last].next = (uint32_t)t->n;
	else
		t->v[parent].first = (uint32_t)t->n;
	t->v[parent].last = (uint32_t)t->n;
	if (n->depth > t->max_depth)
		t->max_depth = n->depth;
	if (n->depth == 1)
		t->procs++;
	return (int)t->n++;
}

/*
 * Sorted stacks share their prefix with the stack before them, so each is
 * merged by walking only the path where it parts from its predecessor.
 */
static int tree_build(struct tree *t, const struct stackset *s, enum stack_metric m)
{
	uint32_t path[STACKSET_MAX_DEPTH + 2];
	const struct stack **v, *prev = NULL;
	size_t i, j, common;
	int err = 0, id;

	memset(t, 0, sizeof(*t));
	t->cap = 1024;
	t->v = calloc(t->cap, sizeof(*t->v));
	v = stackset__sorted(s);
	if (!t->v || !v) {
		err = -ENOMEM;
		goto out;
	}
	t->v[0].name = "all";
	t->n = 1;
	path[0] = 0;
	for (i = 0; v[i]; i++) {
		const struct stack *st = v[i];
		uint64_t w = st->values[m];

		if (!w)
			continue;
		common = 0;
		if (prev)
			while (common < st->n_frames && common < prev->n_frames &&
			       st->frame_ids[common] == prev->frame_ids[common])
				common++;
		for (j = common; j < st->n_frames; j++) {
			id = tree_add(t, path[j], st->frames[j]);
			if (id < 0) {
				err = id;
				goto out;
			}
			path[j + 1] = (uint32_t)id;
		}
		for (j = 0; j <= st->n_frames; j++)
			t->v[path[j]].value += w;
		t->v[path[st->n_frames]].self += w;
		prev = st;
	}
out:
	free(v);
	return err;
}

static int child_cmp(const void *a, const void *b, void *arg)
{
	const struct node *v = arg;
	const struct node *x = &v[*(const uint32_t *)a], *y = &v[*(const uint32_t *)b];

	if (x->value != y->value)
		return x->value > y->value ? -1 : 1;
	return strcmp(x->name, y->name);
}

static uint32_t name_hash(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

enum frame_kind { KIND_ALL, KIND_PROC, KIND_API, KIND_DRIVER, KIND_CODE };

static enum frame_kind frame_kind(const struct node *n)
{
	if (!n->depth)
		return KIND_ALL;
	if (n->depth == 1)
		return KIND_PROC;
	if (n->self)
		return KIND_API;
	/* "libcuda.so": not libcudart, the runtime, which is application side. */
	if (strstr(n->name, "libcuda.so") || strstr(n->name, "libnvidia"))
		return KIND_DRIVER;
	return KIND_CODE;
}

/* Base colour and spread per kind: a hue family, varied by name. */
static const struct {
	const char *cls;
	unsigned char base[3], spread[3];
	const char *legend;
} kinds[] = {
	[KIND_ALL] = { "all", { 200, 200, 200 }, { 0, 0, 0 }, NULL },
	[KIND_PROC] = { "proc", { 110, 160, 215 }, { 30, 30, 30 }, "process" },
	[KIND_API] = { "api", { 215, 55, 50 }, { 35, 40, 30 }, "GPU API call" },
	[KIND_DRIVER] = { "drv", { 150, 110, 205 }, { 35, 35, 35 }, "libcuda / driver" },
	[KIND_CODE] = { "code", { 230, 145, 45 }, { 25, 85, 40 }, "application code" },
};

static void frame_fill(const struct node *n, enum frame_kind k, unsigned char rgb[3])
{
	uint32_t h = name_hash(n->name);
	unsigned int i;

	for (i = 0; i < 3; i++)
		rgb[i] = (unsigned char)(kinds[k].base[i] + kinds[k].spread[i] * ((h >> (8 * i)) & 0xff) / 255);
}

/* Cut name to about max characters (not bytes: UTF-8), ".." marking the cut. */
static void put_fitted(FILE *out, const char *name, double px)
{
	long max = (long)((px - 6) / CHAR_W);
	size_t i, chars = 0, cut = 0;

	if (max < 3)
		return;
	for (i = 0; name[i]; i++) {
		if (((unsigned char)name[i] & 0xc0) == 0x80)
			continue;
		if (chars == (size_t)max - 2)
			cut = i;
		chars++;
	}
	if (chars <= (size_t)max) {
		esc__xml(out, name);
		return;
	}
	esc__xml_n(out, name, cut);
	fputs("..", out);
}

static int emit(const struct svg_ctx *c, uint32_t id, uint64_t start)
{
	const struct node *n = &c->t->v[id];
	enum frame_kind k = frame_kind(n);
	double x = X_PAD + (double)start / (double)c->total * c->width;
	double w = (double)n->value / (double)c->total * c->width;
	uint32_t *kids = NULL, ch;
	size_t nk = 0, i;
	unsigned char rgb[3];
	char val[48];
	int err = 0;

	if (w < MIN_PX)
		return 0;
	frame_fill(n, k, rgb);
	fprintf(c->out, "<g class=\"f %s\" data-s=\"%llu\" data-v=\"%llu\" data-d=\"%u\"><title>",
		kinds[k].cls, (unsigned long long)start, (unsigned long long)n->value, n->depth);
	esc__xml(c->out, n->name);
	fprintf(c->out, "&#10;%s, %.2f%% of all", fmt_value(c->m, n->value, val, sizeof(val)),
		100.0 * (double)n->value / (double)c->total);
	/* A GPU API that also calls another (nested probes): its own share. */
	if (n->self && n->self < n->value)
		fprintf(c->out, "&#10;self: %s", fmt_value(c->m, n->self, val, sizeof(val)));
	fprintf(c->out, "</title><rect x=\"%.2f\" y=\"%u\" width=\"%.2f\" height=\"%u\" "
		"fill=\"rgb(%u,%u,%u)\"/><text x=\"%.2f\" y=\"%.1f\">", x, TOP + n->depth * ROW_H,
		w, ROW_H - 1, rgb[0], rgb[1], rgb[2], x + 3, TOP + n->depth * ROW_H + 11.5);
	put_fitted(c->out, n->name, w);
	fputs("</text></g>\n", c->out);
	if (ferror(c->out))
		return -EIO;

	for (ch = n->first; ch; ch = c->t->v[ch].next)
		nk++;
	if (!nk)
		return 0;
	kids = malloc(nk * sizeof(*kids));
	if (!kids)
		return -ENOMEM;
	for (i = 0, ch = n->first; ch; ch = c->t->v[ch].next)
		kids[i++] = ch;
	/* Biggest first: the eye starts on the left. */
	qsort_r(kids, nk, sizeof(*kids), child_cmp, c->t->v);
	for (i = 0; i < nk && !err; i++) {
		err = emit(c, kids[i], start);
		start += c->t->v[kids[i]].value;
	}
	free(kids);
	return err;
}

static const char css[] =
	"text { font-family: 'DejaVu Sans', Verdana, sans-serif; font-size: 12px; fill: #111; }\n"
	".title { font-size: 17px; font-weight: bold; }\n"
	".sub { fill: #444; }\n"
	".btn { cursor: pointer; fill: #1a57a8; text-decoration: underline; }\n"
	"g.f { cursor: pointer; }\n"
	"g.f text { pointer-events: none; }\n"
	"g.f rect { stroke: #fbfbf8; stroke-width: 0.5; }\n"
	"g.f:hover rect { stroke: #000; stroke-width: 1; }\n"
	"g.f.anc rect { opacity: 0.55; }\n"
	"g.f.hl rect { fill: rgb(230, 40, 230); }\n";

/*
 * Zoom lays every frame out again relative to the clicked one (s, v from
 * data-s, data-v); ancestors span the width, faded. Search marks matches
 * and sums the union of their spans, so a match inside a match is counted
 * once.
 */
static const char js[] =
	"(function () {\n"
	"var frames = Array.prototype.slice.call(document.querySelectorAll('g.f'));\n"
	"var details = document.getElementById('details');\n"
	"var matched = document.getElementById('matched');\n"
	"var unzoom = document.getElementById('unzoom');\n"
	"var sbtn = document.getElementById('search');\n"
	"var root = frames[0];\n"
	"function num(g, k) { return +g.getAttribute('data-' + k); }\n"
	"function name(g) { return g.firstElementChild.textContent.split('\\n')[0]; }\n"
	"function fmt(v) {\n"
	"  if (!BYTES) return v.toLocaleString('en-US') + (v === 1 ? ' call' : ' calls');\n"
	"  var u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'], i = 0;\n"
	"  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }\n"
	"  return i ? v.toFixed(1) + ' ' + u[i] : v + ' B';\n"
	"}\n"
	"function pct(v) { return (100 * v / TOTAL).toFixed(2) + '%'; }\n"
	"function fit(g, w) {\n"
	"  var t = g.lastElementChild, n = name(g), c = Math.floor((w - 6) / CHAR_W);\n"
	"  var ch = Array.from(n);\n"
	"  t.textContent = c < 3 ? '' : ch.length <= c ? n : ch.slice(0, c - 2).join('') + '..';\n"
	"}\n"
	"function zoom(z) {\n"
	"  var s = num(z, 's'), v = num(z, 'v'), d = num(z, 'd');\n"
	"  frames.forEach(function (f) {\n"
	"    var fs = num(f, 's'), fv = num(f, 'v'), fd = num(f, 'd'), x, w;\n"
	"    var r = f.querySelector('rect');\n"
	"    if (fd < d && fs <= s && fs + fv >= s + v) { x = X0; w = WIDTH; f.classList.add('anc'); }\n"
	"    else if (fd >= d && fs >= s && fs + fv <= s + v) {\n"
	"      x = X0 + (fs - s) / v * WIDTH; w = fv / v * WIDTH; f.classList.remove('anc');\n"
	"    } else { f.style.display = 'none'; return; }\n"
	"    f.style.display = '';\n"
	"    r.setAttribute('x', x.toFixed(2)); r.setAttribute('width', w.toFixed(2));\n"
	"    f.lastElementChild.setAttribute('x', (x + 3).toFixed(2));\n"
	"    fit(f, w);\n"
	"  });\n"
	"  unzoom.style.display = z === root ? 'none' : '';\n"
	"}\n"
	"function search(re) {\n"
	"  var spans = [], sum = 0, end = -1;\n"
	"  frames.forEach(function (f) {\n"
	"    var hit = !!re && re.test(name(f));\n"
	"    f.classList.toggle('hl', hit);\n"
	"    if (hit) spans.push([num(f, 's'), num(f, 's') + num(f, 'v')]);\n"
	"  });\n"
	"  spans.sort(function (a, b) { return a[0] - b[0]; });\n"
	"  spans.forEach(function (p) {\n"
	"    if (p[1] <= end) return;\n"
	"    sum += p[1] - Math.max(p[0], end); end = p[1];\n"
	"  });\n"
	"  matched.textContent = re ? 'Matched ' + spans.length + ' frames: ' + fmt(sum) + ' (' + pct(sum) + ')' : '';\n"
	"  sbtn.textContent = re ? 'Reset search' : 'Search';\n"
	"}\n"
	"function ask() {\n"
	"  var term = window.prompt('Search frames (regular expression):', '');\n"
	"  if (!term) { search(null); return; }\n"
	"  try { search(new RegExp(term)); } catch (e) { matched.textContent = 'Bad expression: ' + e.message; }\n"
	"}\n"
	"document.documentElement.addEventListener('click', function (e) {\n"
	"  var g = e.target.closest ? e.target.closest('g.f') : null;\n"
	"  if (g) zoom(g);\n"
	"});\n"
	"unzoom.addEventListener('click', function () { zoom(root); });\n"
	"sbtn.addEventListener('click', function () {\n"
	"  if (sbtn.textContent === 'Search') ask(); else search(null);\n"
	"});\n"
	"document.addEventListener('keydown', function (e) {\n"
	"  if ((e.ctrlKey && e.key === 'f') || e.key === '/') { e.preventDefault(); ask(); }\n"
	"  if (e.key === 'Escape') { search(null); zoom(root); }\n"
	"});\n"
	"document.documentElement.addEventListener('mouseover', function (e) {\n"
	"  var g = e.target.closest ? e.target.closest('g.f') : null;\n"
	"  if (g) details.textContent = name(g) + ': ' + fmt(num(g, 'v')) + ' (' + pct(num(g, 'v')) + ')';\n"
	"});\n"
	"document.documentElement.addEventListener('mouseout', function () { details.textContent = ' '; });\n"
	"})();\n";

static void put_header(const struct svg_ctx *c, const struct stackset *s,
		       const struct svg_opts *o, unsigned int W, unsigned int H)
{
	char tot[48], calls[48], refused[48];
	double x = X_PAD;
	unsigned int k;

	fprintf(c->out, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%u\" "
		"height=\"%u\" viewBox=\"0 0 %u %u\">\n<style>\n%s</style>\n", W, H, W, H, css);
	fprintf(c->out, "<rect x=\"0\" y=\"0\" width=\"%u\" height=\"%u\" fill=\"#fbfbf8\"/>\n",
		W, H);
	fprintf(c->out, "<text class=\"title\" x=\"%u\" y=\"24\" text-anchor=\"middle\">", W / 2);
	if (o && o->title) {
		esc__xml(c->out, o->title);
	} else {
		fputs("GPU allocation call sites by ", c->out);
		esc__xml(c->out, stack_metric__label(c->m));
	}
	fputs("</text>\n", c->out);

	fprintf(c->out, "<text class=\"sub\" x=\"%u\" y=\"44\" text-anchor=\"middle\">"
		"Total %s", W / 2, fmt_value(c->m, c->total, tot, sizeof(tot)));
	if (stack_metric__is_bytes(c->m))
		fprintf(c->out, " of %s in %s calls", stack_metric__label(c->m),
			fmt_count(stackset__total(s, STACK_VAL__CALLS), calls, sizeof(calls)));
	fprintf(c->out, ", %zu stacks, %zu process%s", stackset__count(s), c->t->procs,
		c->t->procs == 1 ? "" : "es");
	if (stackset__refused(s))
		fprintf(c->out, "; %s samples refused (the stack table was full)",
			fmt_count(stackset__refused(s), refused, sizeof(refused)));
	fputs("</text>\n", c->out);

	/* Legend: one swatch per kind of frame. */
	for (k = KIND_PROC; k <= KIND_CODE; k++) {
		fprintf(c->out, "<rect x=\"%.0f\" y=\"56\" width=\"12\" height=\"12\" "
			"fill=\"rgb(%u,%u,%u)\"/><text x=\"%.0f\" y=\"66\">%s</text>\n", x,
			kinds[k].base[0] + kinds[k].spread[0] / 2,
			kinds[k].base[1] + kinds[k].spread[1] / 2,
			kinds[k].base[2] + kinds[k].spread[2] / 2, x + 16, kinds[k].legend);
		x += 16 + CHAR_W * strlen(kinds[k].legend) + 18;
	}
	fprintf(c->out, "<text id=\"unzoom\" class=\"btn\" x=\"%u\" y=\"66\" text-anchor=\"end\" "
		"style=\"display: none\">Reset zoom</text>\n", W - X_PAD - 110);
	fprintf(c->out, "<text id=\"search\" class=\"btn\" x=\"%u\" y=\"66\" "
		"text-anchor=\"end\">Search</text>\n", W - X_PAD);
	fprintf(c->out, "<text id=\"details\" x=\"%u\" y=\"%u\"> </text>\n", X_PAD, H - 10);
	fprintf(c->out, "<text id=\"matched\" x=\"%u\" y=\"%u\" text-anchor=\"end\"></text>\n",
		W - X_PAD, H - 10);
}

int export_svg(const struct stackset *s, enum stack_metric m,
	       const struct svg_opts *opts, FILE *out)
{
	unsigned int W = opts && opts->width ? opts->width : SVG_DEFAULT_WIDTH, H;
	struct svg_ctx c = { .out = out, .m = m };
	struct tree t;
	int err;

	if (!s || !out || (unsigned int)m >= STACK_VAL__COUNT || W < 200 || W > 100000)
		return -EINVAL;
	err = tree_build(&t, s, m);
	if (err)
		goto out;
	c.t = &t;
	c.total = t.v[0].value;
	c.width = W - 2 * X_PAD;
	H = TOP + (t.max_depth + 1) * ROW_H + BOTTOM;
	put_header(&c, s, opts, W, H);
	if (c.total) {
		err = emit(&c, 0, 0);
		if (err)
			goto out;
	} else {
		fprintf(out, "<text x=\"%u\" y=\"%u\" text-anchor=\"middle\">No stack has any ",
			W / 2, TOP + 12);
		esc__xml(out, stack_metric__label(m));
		fputs("</text>\n", out);
	}
	fprintf(out, "<script type=\"text/ecmascript\"><![CDATA[\n"
		"var TOTAL = %llu, BYTES = %s, X0 = %u, WIDTH = %.2f, CHAR_W = %u;\n%s]]></script>\n"
		"</svg>\n", (unsigned long long)c.total,
		stack_metric__is_bytes(m) ? "true" : "false", X_PAD, c.width, CHAR_W, js);
out:
	free(t.v);
	/* A failed write is reported by export__finish() with its errno. */
	if (err && !ferror(out))
		return err;
	return export__finish(out);
}
