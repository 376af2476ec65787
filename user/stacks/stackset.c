// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Two hash tables (lib/hashtab.h): interned names (lib/strtab.h), and
 * stacks keyed by (pid, comm id, frame ids). A million samples over a few
 * thousand stacks cost a few hash probes each and no allocation once their
 * names and stacks are known.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "lib/escape.h"
#include "lib/hashtab.h"
#include "lib/strtab.h"
#include "lib/sys.h"
#include "stacks/stackset.h"

#define NO_ID STRTAB_NONE

struct stack_ent {
	struct stack pub;
	uint32_t comm_id;
	/* n_frames name pointers, then n_frames ids: one allocation */
	const char *frames[];
};

struct stackset {
	struct strtab names;
	struct stack_ent **stacks;	/* in the order first added */
	size_t n, cap;
	struct hashtab index;		/* stack hash -> index into stacks */
	size_t max_stacks;
	uint64_t refused;
	uint64_t totals[STACK_VAL__COUNT];
};

static const char *const metric_names[STACK_VAL__COUNT] = {
	[STACK_VAL__CALLS] = "calls",
	[STACK_VAL__HOST_BYTES] = "host_bytes",
	[STACK_VAL__GPU_BYTES] = "gpu_bytes",
};

static const char *const metric_labels[STACK_VAL__COUNT] = {
	[STACK_VAL__CALLS] = "calls",
	[STACK_VAL__HOST_BYTES] = "host bytes",
	[STACK_VAL__GPU_BYTES] = "GPU bytes",
};

const char *stack_metric__label(enum stack_metric m)
{
	return (unsigned int)m < STACK_VAL__COUNT ? metric_labels[m] : "?";
}

bool stack_metric__is_bytes(enum stack_metric m)
{
	return m == STACK_VAL__HOST_BYTES || m == STACK_VAL__GPU_BYTES;
}

int stack_metric__parse(const char *s, enum stack_metric *m)
{
	unsigned int i;

	if (!s)
		return -EINVAL;
	for (i = 0; i < STACK_VAL__COUNT; i++) {
		if (!strcasecmp(s, metric_names[i])) {
			*m = i;
			return 0;
		}
	}
	if (!strcasecmp(s, "host")) {
		*m = STACK_VAL__HOST_BYTES;
		return 0;
	}
	if (!strcasecmp(s, "gpu")) {
		*m = STACK_VAL__GPU_BYTES;
		return 0;
	}
	return -EINVAL;
}

/*
 * utf8__len(), but 0 for U+FFFE and U+FFFF too: not characters XML
 * allows, even escaped.
 */
static size_t xml_char_len(const unsigned char *s)
{
	size_t n = utf8__len(s);

	if (n == 3 && s[0] == 0xef && s[1] == 0xbf && s[2] >= 0xbe)
		return 0;
	return n;
}

size_t text__clean(char *dst, size_t len, const char *src)
{
	const unsigned char *s = (const unsigned char *)src;
	size_t o = 0;

	if (!len)
		return 0;
	while (*s) {
		const char *rep = (const char *)s;
		size_t n = xml_char_len(s), rn = n;

		if (n && utf8__is_control(s, n)) {
			rep = " ";
			rn = 1;
		} else if (!n) {
			rep = "\xef\xbf\xbd";	/* U+FFFD */
			rn = 3;
			n = 1;
		}
		if (o + rn >= len)
			break;
		memcpy(dst + o, rep, rn);
		o += rn;
		s += n;
	}
	dst[o] = '\0';
	return o;
}

/*
 * Plain printable ASCII that fits needs no copy: nearly every symbol
 * name. *len gets its length when it is.
 */
static bool is_clean(const char *s, size_t *len)
{
	const unsigned char *p = (const unsigned char *)s;

	for (; *p; p++)
		if (*p < 0x20 || *p >= 0x7f)
			return false;
	*len = p - (const unsigned char *)s;
	return *len <= STACKSET_NAME_MAX;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

struct stackset *stackset__new(size_t max_stacks)
{
	struct stackset *set = calloc(1, sizeof(*set));

	if (!set)
		return NULL;
	set->max_stacks = max_stacks ? max_stacks : STACKSET_MAX_STACKS;
	return set;
}

void stackset__free(struct stackset *set)
{
	size_t i;

	if (!set)
		return;
	for (i = 0; i < set->n; i++)
		free(set->stacks[i]);
	free(set->stacks);
	hashtab__free(&set->index);
	strtab__free(&set->names);
	free(set);
}

static uint64_t stack_hash(uint32_t pid, uint32_t comm_id, const uint32_t *ids, size_t n)
{
	uint64_t h = hash__add(0x9e3779b97f4a7c15ULL, (uint64_t)pid << 32 | comm_id);
	size_t i;

	for (i = 0; i + 1 < n; i += 2)
		h = hash__add(h, (uint64_t)ids[i] << 32 | ids[i + 1]);
	if (i < n)
		h = hash__add(h, ids[i]);
	return hash__mix(h ^ n);
}

static const uint32_t *ent_ids(const struct stack_ent *e, size_t n)
{
	return (const uint32_t *)&e->frames[n];
}

/* The stack's index in set->stacks, or NO_ID. */
static uint32_t stack_find(const struct stackset *set, uint32_t pid, uint32_t comm_id,
			   const uint32_t *ids, size_t n, uint64_t h)
{
	const struct stack_ent *e;
	struct hashtab_iter it;
	uint32_t i;

	for (i = hashtab__first(&set->index, h, &it); i != HASHTAB_NONE;
	     i = hashtab__next(&set->index, &it)) {
		e = set->stacks[i];
		if (e->pub.pid == pid && e->comm_id == comm_id && e->pub.n_frames == n &&
		    !memcmp(ent_ids(e, n), ids, n * sizeof(*ids)))
			return i;
	}
	return NO_ID;
}

static int stack_insert(struct stackset *set, uint32_t pid, uint32_t comm_id,
			const uint32_t *ids, size_t n, uint64_t h)
{
	struct stack_ent *e;
	uint32_t *eids;
	size_t i;

	if (set->n == set->cap) {
		size_t cap = set->cap ? set->cap * 2 : 256;
		struct stack_ent **v = realloc(set->stacks, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		set->stacks = v;
		set->cap = cap;
	}
	e = calloc(1, sizeof(*e) + n * (sizeof(e->frames[0]) + sizeof(*ids)));
	if (!e)
		return -ENOMEM;
	if (hashtab__add(&set->index, h, (uint32_t)set->n)) {
		free(e);
		return -ENOMEM;
	}
	eids = (uint32_t *)&e->frames[n];
	for (i = 0; i < n; i++) {
		e->frames[i] = strtab__str(&set->names, ids[i]);
		eids[i] = ids[i];
	}
	e->comm_id = comm_id;
	e->pub.pid = pid;
	e->pub.comm = strtab__str(&set->names, comm_id);
	e->pub.comm_id = comm_id;
	e->pub.n_frames = n;
	e->pub.frames = e->frames;
	e->pub.frame_ids = eids;
	set->stacks[set->n++] = e;
	return 0;
}

/*
 * The name as stored: s itself when it is plain, else its cleaned copy in
 * buf (STACKSET_NAME_MAX + 1 bytes). *len gets its length.
 */
static const char *stored_name(const char *s, char *buf, size_t *len)
{
	if (is_clean(s, len))
		return s;
	*len = text__clean(buf, STACKSET_NAME_MAX + 1, s);
	return buf;
}

/*
 * names[0] is the comm, names[1] the process frame, names[2..] the
 * caller's frames; ids[] gets their ids, NO_ID for those not yet known.
 * Returns whether all are known.
 */
static bool lookup_names(const struct stackset *set, const char *const *names,
			 size_t n, uint32_t *ids, char *buf)
{
	bool all = true;
	size_t i, len;

	for (i = 0; i < n; i++) {
		const char *s = stored_name(names[i], buf, &len);

		ids[i] = strtab__find(&set->names, s, len);
		all &= ids[i] != NO_ID;
	}
	return all;
}

static int intern_missing(struct stackset *set, const char *const *names,
			  size_t n, uint32_t *ids, char *buf)
{
	size_t i, len;
	bool fresh;

	for (i = 0; i < n; i++) {
		const char *s;

		if (ids[i] != NO_ID)
			continue;
		s = stored_name(names[i], buf, &len);
		/* Past 2^31 names it is memory that runs out first. */
		if (strtab__intern(&set->names, s, len, &ids[i], &fresh))
			return -ENOMEM;
	}
	return 0;
}

int stackset__add(struct stackset *set, uint32_t pid, const char *comm,
		  const char *const *frames, size_t n,
		  const uint64_t values[STACK_VAL__COUNT])
{
	/* comm, process frame, frames: about 12 KiB of stack in all */
	const char *names[STACKSET_MAX_DEPTH + 2];
	uint32_t ids[STACKSET_MAX_DEPTH + 2];
	char buf[STACKSET_NAME_MAX + 1], cname[32], proc[48];
	struct stack_ent *e;
	uint32_t found;
	uint64_t h;
	size_t i;
	int err;

	if (!set || !comm || !frames || !values || !n)
		return -EINVAL;
	if (n > STACKSET_MAX_DEPTH)
		return -E2BIG;
	for (i = 0; i < n; i++) {
		if (!frames[i])
			return -EINVAL;
		names[i + 2] = frames[i];
	}
	/* A comm is the kernel's 15 bytes; a longer one is cut to fit here. */
	text__clean(cname, sizeof(cname), comm);
	snprintf(proc, sizeof(proc), "%s (%u)", cname, pid);
	names[0] = cname;
	names[1] = proc;

	if (lookup_names(set, names, n + 2, ids, buf)) {
		h = stack_hash(pid, ids[0], ids + 1, n + 1);
		found = stack_find(set, pid, ids[0], ids + 1, n + 1, h);
		if (found != NO_ID) {
			e = set->stacks[found];
			goto charge;
		}
	}
	if (set->n >= set->max_stacks) {
		set->refused++;
		return -ENOSPC;
	}
	err = intern_missing(set, names, n + 2, ids, buf);
	if (err)
		return err;
	h = stack_hash(pid, ids[0], ids + 1, n + 1);
	err = stack_insert(set, pid, ids[0], ids + 1, n + 1, h);
	if (err)
		return err;
	e = set->stacks[set->n - 1];
charge:
	for (i = 0; i < STACK_VAL__COUNT; i++) {
		e->pub.values[i] = sat_add(e->pub.values[i], values[i]);
		set->totals[i] = sat_add(set->totals[i], values[i]);
	}
	return 0;
}

size_t stackset__count(const struct stackset *set)
{
	return set->n;
}

uint64_t stackset__refused(const struct stackset *set)
{
	return set->refused;
}

uint64_t stackset__total(const struct stackset *set, enum stack_metric m)
{
	return (unsigned int)m < STACK_VAL__COUNT ? set->totals[m] : 0;
}

int stackset__for_each(const struct stackset *set,
		       int (*cb)(const struct stack *st, void *ctx), void *ctx)
{
	size_t i;
	int ret;

	for (i = 0; i < set->n; i++) {
		ret = cb(&set->stacks[i]->pub, ctx);
		if (ret)
			return ret;
	}
	return 0;
}

static int stack_cmp(const void *a, const void *b)
{
	const struct stack *x = *(const struct stack *const *)a;
	const struct stack *y = *(const struct stack *const *)b;
	size_t i, n = x->n_frames < y->n_frames ? x->n_frames : y->n_frames;
	int c;

	for (i = 0; i < n; i++) {
		if (x->frame_ids[i] == y->frame_ids[i])
			continue;
		c = strcmp(x->frames[i], y->frames[i]);
		if (c)
			return c;
	}
	return cmp__u64(x->n_frames, y->n_frames) ?: cmp__u64(x->pid, y->pid);
}

const struct stack **stackset__sorted(const struct stackset *set)
{
	const struct stack **v = calloc(set->n + 1, sizeof(*v));
	size_t i;

	if (!v)
		return NULL;
	for (i = 0; i < set->n; i++)
		v[i] = &set->stacks[i]->pub;
	qsort(v, set->n, sizeof(*v), stack_cmp);
	return v;
}

size_t stackset__n_names(const struct stackset *set)
{
	return strtab__count(&set->names);
}

const char *stackset__name(const struct stackset *set, uint32_t id)
{
	return id < strtab__count(&set->names) ? strtab__str(&set->names, id) : NULL;
}
