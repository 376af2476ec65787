// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/* Interned strings (lib/strtab.h): ids in order, copies that never move. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "lib/strtab.h"

static uint32_t intern(struct strtab *t, const char *s, bool *fresh)
{
	uint32_t id = STRTAB_NONE;

	CHECK_EQ(strtab__intern(t, s, strlen(s), &id, fresh), 0, s);
	return id;
}

static void test_ids(void)
{
	struct strtab t = {};
	bool fresh;

	CHECK_EQ(strtab__find(&t, "a", 1), STRTAB_NONE, "nothing in a zeroed table");
	CHECK_EQ(intern(&t, "main", &fresh), 0, "first id");
	CHECK(fresh, "fresh", "%d", fresh);
	CHECK_EQ(intern(&t, "cuMemAlloc_v2", &fresh), 1, "second id");
	CHECK_EQ(intern(&t, "main", &fresh), 0, "same string, same id");
	CHECK(!fresh, "not fresh", "%d", fresh);
	CHECK_EQ(intern(&t, "", &fresh), 2, "the empty string");
	CHECK_EQ(strtab__count(&t), 3, "count");
	CHECK_EQ(strtab__find(&t, "cuMemAlloc_v2", 13), 1, "find");
	CHECK_EQ(strtab__find(&t, "cuMemAlloc", 10), STRTAB_NONE, "a prefix is another key");
	CHECK(!strcmp(strtab__str(&t, 1), "cuMemAlloc_v2") && strtab__len(&t, 1) == 13, "copy",
	      "%s", strtab__str(&t, 1));
	strtab__free(&t);
	CHECK(!t.n && !t.ents, "freed to zero", "%u", t.n);
	CHECK_EQ(intern(&t, "again", &fresh), 0, "usable after free");
	strtab__free(&t);
}

/* Keys are bytes: a NUL inside is part of the key, and copies end in one. */
static void test_binary(void)
{
	static const uint64_t k1[4] = { 1, 0, 3, 4 }, k2[4] = { 1, 0, 3, 5 };
	struct strtab t = {};
	uint32_t a, b, c;
	bool fresh;

	strtab__intern(&t, k1, sizeof(k1), &a, &fresh);
	strtab__intern(&t, k2, sizeof(k2), &b, &fresh);
	strtab__intern(&t, k1, 8, &c, &fresh);
	CHECK(a != b && a != c && b != c, "three keys", "%u %u %u", a, b, c);
	CHECK(!memcmp(strtab__str(&t, a), k1, sizeof(k1)) && !strtab__str(&t, a)[sizeof(k1)],
	      "copied, NUL after", "%d", 0);
	strtab__intern(&t, "x\0y", 3, &a, &fresh);
	strtab__intern(&t, "x", 1, &b, &fresh);
	CHECK(a != b && strtab__len(&t, a) == 3, "embedded NUL", "%u %u", a, b);
	strtab__free(&t);
}

/* A hundred thousand names, and a key bigger than a block: none moves. */
static void test_stable(void)
{
	enum { N = 100000 };
	struct strtab t = {};
	const char **ptr = calloc(N, sizeof(*ptr));
	char name[64], *big = malloc(100000);
	const char *bigp = NULL;
	unsigned int i, bad = 0;
	uint32_t id;
	bool fresh;

	if (!CHECK(ptr && big, "alloc", "%d", 0))
		goto out;
	memset(big, 'x', 99999);
	big[99999] = '\0';
	for (i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "ns::function_%u(int)", i);
		ptr[i] = strtab__intern_str(&t, name);
		if (i == N / 2)
			bigp = strtab__intern_str(&t, big);
	}
	for (i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "ns::function_%u(int)", i);
		bad += strcmp(ptr[i], name) || strtab__intern_str(&t, name) != ptr[i];
	}
	CHECK_EQ(bad, 0, "every copy where it was, and found again");
	CHECK(bigp && !strcmp(bigp, big), "big key", "%p", (const void *)bigp);
	CHECK_EQ(strtab__count(&t), N + 1, "count");
	CHECK_EQ(strtab__intern(&t, big, 99999, &id, &fresh), 0, "big again");
	CHECK(!fresh && strtab__str(&t, id) == bigp, "big found", "%u", id);
out:
	strtab__free(&t);
	free(big);
	free(ptr);
}

/* Keys of every size around the blocks' (4 KiB up to 64 KiB) and an eighth of them. */
static void test_sizes(void)
{
	static const size_t lens[] = { 6000, 0, 1, 511, 512, 513, 3000, 4095, 4096, 8191,
				       8192, 9000, 70000, 2, 100 };
	enum { N = sizeof(lens) / sizeof(lens[0]) };
	struct strtab t = {};
	uint32_t ids[N];
	unsigned int i, bad = 0;
	char *key;
	bool fresh;
	size_t j;

	for (i = 0; i < N; i++) {
		key = malloc(lens[i] + 1);
		if (!CHECK(key, "alloc", "%zu", lens[i]))
			break;
		for (j = 0; j < lens[i]; j++)
			key[j] = (char)('a' + (i + j) % 26);
		bad += strtab__intern(&t, key, lens[i], &ids[i], &fresh) || !fresh;
		free(key);
	}
	for (i = 0; i < N && !bad; i++) {
		const char *s = strtab__str(&t, ids[i]);

		bad += strtab__len(&t, ids[i]) != lens[i] || s[lens[i]] != '\0';
		for (j = 0; j < lens[i]; j++)
			bad += s[j] != (char)('a' + (i + j) % 26);
	}
	CHECK_EQ(bad, 0, "every size kept whole");
	strtab__free(&t);
}

int main(void)
{
	RUN_SUBTEST(test_ids);
	RUN_SUBTEST(test_binary);
	RUN_SUBTEST(test_stable);
	RUN_SUBTEST(test_sizes);
	return CHECK_EXIT();
}
