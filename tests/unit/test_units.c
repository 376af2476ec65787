// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <string.h>
#include "check.h"
#include "lib/units.h"

static void size_ok(const char *s, uint64_t want)
{
	uint64_t v = 0;
	int err = parse_size(s, &v);

	CHECK(!err && v == want, s, "err %d value %llu, expected %llu", err,
	      (unsigned long long)v, (unsigned long long)want);
}

static void size_bad(const char *s, int want_err)
{
	uint64_t v = 0;
	int err = parse_size(s, &v);

	CHECK(err == want_err, s, "err %d, expected %d", err, want_err);
}

static void test_parse_size(void)
{
	size_ok("0", 0);
	size_ok("4096", 4096);
	size_ok("64K", 64 << 10);
	size_ok("1536M", 1536ULL << 20);
	size_ok("2G", 2ULL << 30);
	size_ok("2g", 2ULL << 30);
	size_ok("2GiB", 2ULL << 30);
	size_ok("2GB", 2ULL << 30);
	size_ok("1T", 1ULL << 40);
	size_bad("", -EINVAL);
	size_bad("-1", -EINVAL);
	size_bad("12Q", -EINVAL);
	size_bad("12MX", -EINVAL);
	size_bad("1.5G", -EINVAL);
	size_bad(" 5", -EINVAL);
	size_bad("99999999999999999999", -ERANGE);
	size_bad("17179869184G", -ERANGE);
}

static void test_parse_long(void)
{
	long v = 0;

	CHECK(!parse_long("42", 1, 100, &v) && v == 42, "42", "got %ld", v);
	CHECK_EQ(parse_long("0", 1, 100, &v), -ERANGE, "below");
	CHECK_EQ(parse_long("101", 1, 100, &v), -ERANGE, "above");
	CHECK_EQ(parse_long("4x", 1, 100, &v), -EINVAL, "junk");
	CHECK_EQ(parse_long("", 1, 100, &v), -EINVAL, "empty");
	CHECK_EQ(parse_long("99999999999999999999999", 1, 100, &v), -ERANGE, "huge");
}

static void test_parse_duration(void)
{
	uint64_t ms = 0;

	CHECK(!parse_duration_ms("5", &ms) && ms == 5000, "5", "got %llu", (unsigned long long)ms);
	CHECK(!parse_duration_ms("1.5s", &ms) && ms == 1500, "1.5s", "got %llu", (unsigned long long)ms);
	CHECK(!parse_duration_ms("250ms", &ms) && ms == 250, "250ms", "got %llu", (unsigned long long)ms);
	CHECK(!parse_duration_ms("2m", &ms) && ms == 120000, "2m", "got %llu", (unsigned long long)ms);
	CHECK_EQ(parse_duration_ms("5x", &ms), -EINVAL, "5x");
	CHECK_EQ(parse_duration_ms("-1", &ms), -EINVAL, "-1");
	CHECK_EQ(parse_duration_ms("1e300", &ms), -ERANGE, "1e300");
}

static void test_fmt_bytes(void)
{
	char b[16];

	CHECK(!strcmp(fmt_bytes(0, b, sizeof(b)), "0B"), "0", "got %s", b);
	CHECK(!strcmp(fmt_bytes(4096, b, sizeof(b)), "4.0K"), "4K", "got %s", b);
	CHECK(!strcmp(fmt_bytes(64ULL << 20, b, sizeof(b)), "64M"), "64M", "got %s", b);
	CHECK(!strcmp(fmt_bytes(1536ULL << 20, b, sizeof(b)), "1.5G"), "1.5G", "got %s", b);
	CHECK(strlen(fmt_bytes(~0ULL, b, 4)) == 3, "short buffer", "got %s", b);
}

/* The SVG files' style: units spelled out, always one decimal. */
static void test_fmt_bytes_signed(void)
{
	char b[24];

	CHECK(!strcmp(fmt_bytes_signed(-(64LL << 20), false, b, sizeof(b)), "-64M"), "-64M",
	      "got %s", b);
	CHECK(!strcmp(fmt_bytes_signed(64LL << 20, false, b, sizeof(b)), "64M"), "64M",
	      "got %s", b);
	CHECK(!strcmp(fmt_bytes_signed(64LL << 20, true, b, sizeof(b)), "+64M"), "+64M",
	      "got %s", b);
	CHECK(!strcmp(fmt_bytes_signed(0, true, b, sizeof(b)), "+0B"), "+0B", "got %s", b);
	/* Its magnitude has no int64_t: it must not be negated as one. */
	CHECK(!strcmp(fmt_bytes_signed(INT64_MIN, false, b, sizeof(b)), "-8.0E"), "min",
	      "got %s", b);
}

static void test_fmt_bytes_iec(void)
{
	char b[16];

	CHECK(!strcmp(fmt_bytes_iec(0, b, sizeof(b)), "0 B"), "0", "got %s", b);
	CHECK(!strcmp(fmt_bytes_iec(512, b, sizeof(b)), "512 B"), "512", "got %s", b);
	CHECK(!strcmp(fmt_bytes_iec(4096, b, sizeof(b)), "4.0 KiB"), "4K", "got %s", b);
	CHECK(!strcmp(fmt_bytes_iec(64ULL << 20, b, sizeof(b)), "64.0 MiB"), "64M", "got %s", b);
	CHECK(!strcmp(fmt_bytes_iec(1536ULL << 20, b, sizeof(b)), "1.5 GiB"), "1.5G", "got %s", b);
	CHECK(!strcmp(fmt_bytes_iec(~0ULL, b, sizeof(b)), "16.0 EiB"), "max", "got %s", b);
	CHECK(strlen(fmt_bytes_iec(~0ULL, b, 4)) == 3, "short buffer", "got %s", b);
}

static void test_fmt_seconds(void)
{
	static const struct {
		uint64_t s;
		const char *want;
	} cases[] = {
		{ 0, "0 s" }, { 17, "17 s" }, { 119, "119 s" }, { 120, "2 min" },
		{ 149, "2 min" }, { 150, "3 min" }, { 7199, "120 min" }, { 7200, "2.0 h" },
		{ 460800, "128.0 h" },
	};
	char b[32];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		CHECK(!strcmp(fmt_seconds(cases[i].s, b, sizeof(b)), cases[i].want), "seconds",
		      "%llu: got %s, want %s", (unsigned long long)cases[i].s, b, cases[i].want);
}

int main(void)
{
	RUN_SUBTEST(test_parse_size);
	RUN_SUBTEST(test_parse_long);
	RUN_SUBTEST(test_parse_duration);
	RUN_SUBTEST(test_fmt_bytes);
	RUN_SUBTEST(test_fmt_bytes_signed);
	RUN_SUBTEST(test_fmt_bytes_iec);
	RUN_SUBTEST(test_fmt_seconds);
	return CHECK_EXIT();
}
