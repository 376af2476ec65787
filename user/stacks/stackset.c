// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Two open-addressing hash tables with linear probing, kept at most half
 * full: interned names, and stacks keyed by (pid, comm id, frame ids). A
 * million samples over a few thousand stacks cost a few hash probes each
 * and no allocation once their names and stacks are known.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "stacks/stackset.h"

#define NO_ID UINT32_MAX
#define MIN_SLOTS 64

struct name_tab {
	char **strs;		/* by id; each its own allocation, so never moves */
	uint64_t *hashes;	/* by id */
	size_t n, cap;
	uint32_t *slots;	/* id + 1; 0 is empty */
	size_t n_slots;		/* a power of two */
};

struct stack_ent {
	struct stack pub;
	uint64_t hash;
	uint32_t comm_id;
	/* n_frames name pointers, then n_frames ids: one allocation */
	const char *frames[];
};

struct stackset {
	struct name_tab names;
	struct stack_ent **stacks;	/* in the order first added */
	size_t n, cap;
	uint32_t *slots;		/* index into stacks + 1; 0 is empty */
	size_t n_slots;
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

const char *stack_metric__name(enum stack_metric m)
{
	return (unsigned int)m < STACK_VAL__COUNT ? metric_names[m] : "?";
}

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

/* Length of the valid UTF-8 character at s, or 0 for an invalid byte. */
static size_t utf8_len(const unsigned char *s)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n, i;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		n = 2;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		n = 3;
		if (s[0] == 0xe0)
			lo = 0xa0;	/* overlong */
		else if (s[0] == 0xed)
			hi = 0x9f;	/* UTF-16 surrogates */
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		n = 4;
		if (s[0] == 0xf0)
			lo = 0x90;	/* overlong */
		else if (s[0] == 0xf4)
			hi = 0x8f;	/* past U+10FFFF */
	} else {
		return 0;
	}
	/* A NUL fails these tests, so nothing past the string is read. */
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (i = 2; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	/* U+FFFE and U+FFFF: not characters XML allows, even escaped. */
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
		size_t n = utf8_len(s), rn = n;

		if (n == 1 && (*s < 0x20 || *s == 0x7f)) {
			rep = " ";
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

/* Plain printable ASCII that fits needs no copy: nearly every symbol name. */
static bool is_clean(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	for (; *p; p++)
		if (*p < 0x20 || *p >= 0x7f)
			return false;
	return p - (const unsigned char *)s <= STACKSET_NAME_MAX;
}

static uint64_t str_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;	/* FNV-1a */

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

/* A finalizer that spreads word-wise FNV over the low bits used as slots. */
static uint64_t mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static size_t name_slot(const struct name_tab *t, const char *s, uint64_t h)
{
	size_t mask = t->n_slots - 1, i = h & mask;

	while (t->slots[i]) {
		uint32_t id = t->slots[i] - 1;

		if (t->hashes[id] == h && !strcmp(t->strs[id], s))
			break;
		i = (i + 1) & mask;
	}
	return i;
}

static uint32_t names_find(const struct name_tab *t, const char *s, uint64_t h)
{
	size_t i = name_slot(t, s, h);

	return t->slots[i] ? t->slots[i] - 1 : NO_ID;
}

static int names_grow(struct name_tab *t)
{
	size_t n_slots = t->n_slots * 2, i, j, mask = n_slots - 1;
	uint32_t *slots;

	slots = calloc(n_slots, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (i = 0; i < t->n; i++) {
		j = t->hashes[i] & mask;
		while (slots[j])
			j = (j + 1) & mask;
		slots[j] = (uint32_t)i + 1;
	}
	free(t->slots);
	t->slots = slots;
	t->n_slots = n_slots;
	return 0;
}

static int names_intern(struct name_tab *t, const char *s, uint64_t h, uint32_t *id)
{
	size_t i;
	char *dup;

	i = name_slot(t, s, h);
	if (t->slots[i]) {
		*id = t->slots[i] - 1;
		return 0;
	}
	if (t->n >= NO_ID - 1)
		return -ENOMEM;
	if ((t->n + 1) * 2 > t->n_slots) {
		if (names_grow(t))
			return -ENOMEM;
		i = name_slot(t, s, h);
	}
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 256;
		char **strs = realloc(t->strs, cap * sizeof(*strs));
		uint64_t *hashes;

		if (!strs)
			return -ENOMEM;
		t->strs = strs;
		hashes = realloc(t->hashes, cap * sizeof(*hashes));
		if (!hashes)
			return -ENOMEM;
		t->hashes = hashes;
		t->cap = cap;
	}
	dup = strdup(s);
	if (!dup)
		return -ENOMEM;
	t->strs[t->n] = dup;
	t->hashes[t->n] = h;
	t->slots[i] = (uint32_t)t->n + 1;
	*id = (uint32_t)t->n++;
	return 0;
}

struct stackset *stackset__new(size_t max_stacks)
{
	struct stackset *set = calloc(1, sizeof(*set));

	if (!set)
		return NULL;
	set->max_stacks = max_stacks ? max_stacks : STACKSET_MAX_STACKS;
	set->names.n_slots = MIN_SLOTS;
	set->names.slots = calloc(MIN_SLOTS, sizeof(*set->names.slots));
	set->n_slots = MIN_SLOTS;
	set->slots = calloc(MIN_SLOTS, sizeof(*set->slots));
	if (!set->names.slots || !set->slots) {
		stackset__free(set);
		errno = ENOMEM;
		return NULL;
	}
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
	free(set->slots);
	for (i = 0; i < set->names.n; i++)
		free(set->names.strs[i]);
	free(set->names.strs);
	free(set->names.hashes);
	free(set->names.slots);
	free(set);
}

static uint64_t stack_hash(uint32_t pid, uint32_t comm_id, const uint32_t *ids, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t i;

	h = (h ^ pid) * 0x100000001b3ULL;
	h = (h ^ comm_id) * 0x100000001b3ULL;
	for (i = 0; i < n; i++)
		h = (h ^ ids[i]) * 0x100000001b3ULL;
	return mix(h);
}

static const uint32_t *ent_ids(const struct stack_ent *e, size_t n)
{
	return (const uint32_t *)&e->frames[n];
}

static size_t stack_slot(const struct stackset *set, uint32_t pid, uint32_t comm_id,
			 const uint32_t *ids, size_t n, uint64_t h)
{
	size_t mask = set->n_slots - 1, i = h & mask;

	while (set->slots[i]) {
		const struct stack_ent *e = set->stacks[set->slots[i] - 1];

		if (e->hash == h && e->pub.pid == pid && e->comm_id == comm_id &&
		    e->pub.n_frames == n && !memcmp(ent_ids(e, n), ids, n * sizeof(*ids)))
			break;
		i = (i + 1) & mask;
	}
	return i;
}

static int stacks_grow(struct stackset *set)
{
	size_t n_slots = set->n_slots * 2, i, j, mask = n_slots - 1;
	uint32_t *slots;

	slots = calloc(n_slots, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (i = 0; i < set->n; i++) {
		j = set->stacks[i]->hash & mask;
		while (slots[j])
			j = (j + 1) & mask;
		slots[j] = (uint32_t)i + 1;
	}
	free(set->slots);
	set->slots = slots;
	set->n_slots = n_slots;
	return 0;
}

static int stack_insert(struct stackset *set, uint32_t pid, uint32_t comm_id,
			const uint32_t *ids, size_t n, uint64_t h)
{
	struct stack_ent *e;
	uint32_t *eids;
	size_t i, slot;

	if ((set->n + 1) * 2 > set->n_slots && stacks_grow(set))
		return -ENOMEM;
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
	eids = (uint32_t *)&e->frames[n];
	for (i = 0; i < n; i++) {
		e->frames[i] = set->names.strs[ids[i]];
		eids[i] = ids[i];
	}
	e->hash = h;
	e->comm_id = comm_id;
	e->pub.pid = pid;
	e->pub.comm = set->names.strs[comm_id];
	e->pub.comm_id = comm_id;
	e->pub.n_frames = n;
	e->pub.frames = e->frames;
	e->pub.frame_ids = eids;
	slot = stack_slot(set, pid, comm_id, ids, n, h);
	set->stacks[set->n++] = e;
	set->slots[slot] = (uint32_t)set->n;
	return 0;
}

/*
 * The name as stored: s itself when it is plain, else its cleaned copy in
 * buf (STACKSET_NAME_MAX + 1 bytes).
 */
static const char *stored_name(const char *s, char *buf)
{
	if (is_clean(s))
		return s;
	text__clean(buf, STACKSET_NAME_MAX + 1, s);
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
	size_t i;

	for (i = 0; i < n; i++) {
		const char *s = stored_name(names[i], buf);

		ids[i] = names_find(&set->names, s, str_hash(s));
		all &= ids[i] != NO_ID;
	}
	return all;
}

static int intern_missing(struct stackset *set, const char *const *names,
			  size_t n, uint32_t *ids, char *buf)
{
	size_t i;
	int err;

	for (i = 0; i < n; i++) {
		const char *s;

		if (ids[i] != NO_ID)
			continue;
		s = stored_name(names[i], buf);
		err = names_intern(&set->names, s, str_hash(s), &ids[i]);
		if (err)
			return err;
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
	size_t i, slot;
	uint64_t h;
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
		slot = stack_slot(set, pid, ids[0], ids + 1, n + 1, h);
		if (set->slots[slot]) {
			e = set->stacks[set->slots[slot] - 1];
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
	if (x->n_frames != y->n_frames)
		return x->n_frames < y->n_frames ? -1 : 1;
	return x->pid < y->pid ? -1 : x->pid > y->pid;
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
	return set->names.n;
}

const char *stackset__name(const struct stackset *set, uint32_t id)
{
	return id < set->names.n ? set->names.strs[id] : NULL;
}
