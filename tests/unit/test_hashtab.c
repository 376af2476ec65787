// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The one hash table (lib/hashtab.h): ids found under their hash whatever
 * else shares it, removal that keeps every other id reachable, a table
 * that churns without growing; and the hashes it is keyed with.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "lib/hashtab.h"

/* Whether id is among those stored under hash. */
static bool has(const struct hashtab *t, uint64_t hash, uint32_t id)
{
	struct hashtab_iter it;
	uint32_t i;

	for (i = hashtab__first(t, hash, &it); i != HASHTAB_NONE; i = hashtab__next(t, &it))
		if (i == id)
			return true;
	return false;
}

/* How many ids are stored under hash's tag (other keys' included). */
static unsigned int under(const struct hashtab *t, uint64_t hash)
{
	struct hashtab_iter it;
	unsigned int n = 0;
	uint32_t i;

	for (i = hashtab__first(t, hash, &it); i != HASHTAB_NONE; i = hashtab__next(t, &it))
		n++;
	return n;
}

static void test_empty(void)
{
	struct hashtab t = {};
	struct hashtab_iter it;

	CHECK_EQ(hashtab__first(&t, 42, &it), HASHTAB_NONE, "nothing in a zeroed table");
	CHECK_EQ(hashtab__del(&t, 42, 0), -ENOENT, "del from a zeroed table");
	CHECK_EQ(hashtab__bytes(&t), 0, "no memory until the first add");
	CHECK_EQ(hashtab__add(&t, 42, HASHTAB_NONE), -EINVAL, "the reserved id");
	CHECK_EQ(hashtab__add(&t, 42, 7), 0, "add");
	CHECK(has(&t, 42, 7), "found", "%d", 0);
	CHECK(!has(&t, 43, 7), "not under another hash", "%d", 0);
	CHECK_EQ(hashtab__del(&t, 42, 8), -ENOENT, "del of an id not there");
	CHECK_EQ(hashtab__del(&t, 43, 7), -ENOENT, "del under the wrong hash");
	CHECK_EQ(hashtab__del(&t, 42, 7), 0, "del");
	CHECK(!has(&t, 42, 7), "gone", "%d", 0);
	CHECK_EQ(t.n, 0, "count");
	hashtab__free(&t);
	CHECK(!t.slots && !t.n, "freed to zero", "%u", t.n);
}

static void test_many(void)
{
	enum { N = 200000 };
	struct hashtab t = {};
	uint32_t i, missing = 0;

	for (i = 0; i < N; i++)
		if (!CHECK_EQ(hashtab__add(&t, hash__mix(i), i), 0, "add"))
			break;
	CHECK_EQ(t.n, N, "count");
	for (i = 0; i < N; i++)
		missing += !has(&t, hash__mix(i), i);
	CHECK_EQ(missing, 0, "every id found");
	CHECK(t.n <= (t.mask + 1) / 4 * 3, "at most 3/4 full", "%u of %u", t.n, t.mask + 1);
	CHECK(hashtab__bytes(&t) <= 4 * N * sizeof(struct hashtab_slot), "bytes", "%zu",
	      hashtab__bytes(&t));
	hashtab__free(&t);
}

/* One hash for many keys: the caller's equality tells them apart. */
static void test_same_hash(void)
{
	struct hashtab t = {};
	uint32_t i;

	for (i = 0; i < 1000; i++)
		hashtab__add(&t, 0xdeadbeef, i);
	hashtab__add(&t, 1, 5000);
	CHECK_EQ(under(&t, 0xdeadbeef), 1000, "all of them under the hash");
	CHECK(has(&t, 0xdeadbeef, 999) && has(&t, 1, 5000), "found", "%d", 0);
	for (i = 0; i < 1000; i += 2)
		hashtab__del(&t, 0xdeadbeef, i);
	CHECK_EQ(under(&t, 0xdeadbeef), 500, "half removed");
	CHECK(!has(&t, 0xdeadbeef, 0) && has(&t, 0xdeadbeef, 1) && has(&t, 1, 5000),
	      "the others kept", "%d", 0);
	hashtab__free(&t);
}

/*
 * Removal shifts a run back: hashes that crowd the end of a small table
 * make runs that wrap past its start. Check every id after every removal
 * against what should be there.
 */
static void test_del_wraps(void)
{
	enum { N = 11 };
	struct hashtab t = {};
	bool in[N] = {};
	uint32_t i, j, order[N] = { 3, 9, 0, 10, 5, 1, 8, 2, 7, 4, 6 };
	uint64_t h[N];
	unsigned int bad = 0;

	if (!CHECK_EQ(hashtab__reserve(&t, N), 0, "reserve"))
		return;
	/* Homes at the last three slots and the first: runs wrap. */
	for (i = 0; i < N; i++) {
		h[i] = (uint64_t)i << 32 | ((t.mask - 2 + i % 4) & t.mask);
		hashtab__add(&t, h[i], i);
		in[i] = true;
	}
	for (j = 0; j < N; j++) {
		CHECK_EQ(hashtab__del(&t, h[order[j]], order[j]), 0, "del");
		in[order[j]] = false;
		for (i = 0; i < N; i++)
			bad += has(&t, h[i], i) != in[i];
	}
	CHECK_EQ(bad, 0, "what is left is reachable, what went is gone");
	CHECK_EQ(t.n, 0, "empty");
	hashtab__free(&t);
}

/* A bounded cache: as many removed as added, forever, in a table sized once. */
static void test_churn(void)
{
	enum { CAP = 1000, ROUNDS = 100000 };
	struct hashtab t = {};
	size_t bytes;
	uint32_t i, bad = 0;

	hashtab__reserve(&t, CAP);
	bytes = hashtab__bytes(&t);
	for (i = 0; i < CAP; i++)
		hashtab__add(&t, hash__mix(i), i % CAP);
	for (i = CAP; i < ROUNDS; i++) {
		/* id i % CAP now stands for key i; key i - CAP leaves. */
		if (hashtab__del(&t, hash__mix(i - CAP), i % CAP) ||
		    hashtab__add(&t, hash__mix(i), i % CAP))
			bad++;
	}
	CHECK_EQ(bad, 0, "each del found its id, each add fit");
	CHECK_EQ(hashtab__bytes(&t), bytes, "never grew");
	for (i = ROUNDS - CAP; i < ROUNDS; i++)
		bad += !has(&t, hash__mix(i), i % CAP);
	CHECK_EQ(bad, 0, "the last CAP keys all found");
	hashtab__free(&t);
}

static void test_hashes(void)
{
	static const uint8_t zeros[16];
	uint8_t buf[64];
	uint64_t h[17];
	unsigned int i, j, same = 0;

	/* Keys of zeros differ by their length alone. */
	for (i = 0; i <= 16; i++)
		h[i] = hash__bytes(zeros, i);
	for (i = 0; i <= 16; i++)
		for (j = i + 1; j <= 16; j++)
			same += h[i] == h[j];
	CHECK_EQ(same, 0, "lengths told apart");
	/* Each byte of each length counts, the tail read in pieces included. */
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 37 + 11);
	for (i = 1; i <= 40; i++) {
		uint64_t base = hash__bytes(buf, i);

		for (j = 0; j < i; j++) {
			buf[j] ^= 1;
			same += hash__bytes(buf, i) == base;
			buf[j] ^= 1;
		}
		same += hash__bytes(buf, i) != base;
	}
	CHECK_EQ(same, 0, "every byte counts, the same bytes hash the same");
	CHECK(hash__mix(1) != hash__mix(2) && hash__add(0, 1) != hash__add(0, 2), "mix", "%d", 0);
}

int main(void)
{
	RUN_SUBTEST(test_empty);
	RUN_SUBTEST(test_many);
	RUN_SUBTEST(test_same_hash);
	RUN_SUBTEST(test_del_wraps);
	RUN_SUBTEST(test_churn);
	RUN_SUBTEST(test_hashes);
	return CHECK_EXIT();
}
