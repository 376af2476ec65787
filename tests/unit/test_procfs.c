// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "lib/procfs.h"

/* A name with a newline and "Uid:" in it, as the kernel escapes it. */
static const char status[] =
	"Name:\tx\\nUid:\t0\n"
	"Umask:\t0022\n"
	"State:\tS (sleeping)\n"
	"Uid:\t1000\t1000\t1000\t1000\n"
	"NSpid:\t4242\t7\n"
	"VmRSS:\t   1234 kB\n"
	"Empty:\n"
	"CapEff:\t000001ffffffffff";

static void test_status_find(void)
{
	char b[64];

	CHECK(!proc__status_find(status, "Uid", b, sizeof(b)) &&
	      !strcmp(b, "1000\t1000\t1000\t1000"), "Uid at a line's start only", "got %s", b);
	CHECK(!proc__status_find(status, "NSpid", b, sizeof(b)) && !strcmp(b, "4242\t7"),
	      "NSpid", "got %s", b);
	CHECK(!proc__status_find(status, "VmRSS", b, sizeof(b)) && !strcmp(b, "1234 kB"),
	      "spaces after the tab", "got %s", b);
	CHECK(!proc__status_find(status, "Empty", b, sizeof(b)) && !strcmp(b, ""), "empty",
	      "got %s", b);
	CHECK(!proc__status_find(status, "CapEff", b, sizeof(b)) &&
	      !strcmp(b, "000001ffffffffff"), "last line, no newline", "got %s", b);
	CHECK_EQ(proc__status_find(status, "U", b, sizeof(b)), -ENOENT, "a key's prefix");
	CHECK_EQ(proc__status_find(status, "Threads", b, sizeof(b)), -ENOENT, "absent");
	CHECK_EQ(proc__status_find(status, "Uid", b, 8), -ENOSPC, "does not fit");
	CHECK_EQ(proc__status_find("", "Uid", b, sizeof(b)), -ENOENT, "empty text");
}

static void test_status_of_self(void)
{
	char b[64];

	CHECK(!proc__status(0, "Tgid", b, sizeof(b)) && atoi(b) == getpid(), "self",
	      "got %s", b);
	CHECK(!proc__status(getpid(), "Tgid", b, sizeof(b)) && atoi(b) == getpid(), "by pid",
	      "got %s", b);
	CHECK_EQ(proc__status(-1, "Tgid", b, sizeof(b)), -ENOENT, "no such process");
}

static const char maps[] =
	"7f0000000000-7f0000021000 r-xp 00001000 fd:01 1234   /usr/lib/libcuda.so.1 (deleted)\n"
	"7f0000021000-7f0000022000 rw-p 00000000 00:00 0 \n"
	"7ffc00000000-7ffc00002000 r-xp 00000000 00:00 0                          [vdso]\n"
	"not a maps line\n"
	"7f0000030000-7f0000031000 r--p 00000000 fd:01\n"
	"7f0000030000-7f0000031000 r--p 00000000 fd:01 99 /a path/with \\012 in it";

static void test_maps_parse(void)
{
	const char *line;
	struct maps_ent e[6];
	bool ok[6];
	int n;

	for (line = maps, n = 0; *line && n < 6; line = e[n++].next)
		ok[n] = proc__maps_parse(line, &e[n]);
	CHECK_EQ(n, 6, "lines");
	CHECK(ok[0] && e[0].lo == 0x7f0000000000ULL && e[0].hi == 0x7f0000021000ULL &&
	      !strcmp(e[0].perms, "r-xp") && e[0].offset == 0x1000 && e[0].ino == 1234,
	      "a file's fields", "lo %llx ino %lu", (unsigned long long)e[0].lo, e[0].ino);
	CHECK(e[0].path_len == strlen("/usr/lib/libcuda.so.1 (deleted)") &&
	      !strncmp(e[0].path, "/usr/lib/libcuda.so.1 (deleted)", e[0].path_len),
	      "a file's path, to the newline", "len %zu", e[0].path_len);
	CHECK(ok[1] && e[1].path_len == 0 && *e[1].path == '\n', "anonymous: no path",
	      "len %zu", e[1].path_len);
	CHECK(ok[2] && !strncmp(e[2].path, "[vdso]", e[2].path_len) && e[2].path_len == 6,
	      "vdso", "len %zu", e[2].path_len);
	CHECK(!ok[3], "junk", "parsed");
	CHECK(!ok[4], "cut short", "parsed");
	CHECK(ok[5] && !strcmp(e[5].path, "/a path/with \\012 in it") && *e[5].next == '\0',
	      "last line, spaces", "got %s", e[5].path);
}

static int find_self(pid_t pid, void *seen)
{
	if (pid != getpid())
		return 0;
	*(bool *)seen = true;
	return 7;
}

static void test_each_pid(void)
{
	bool seen = false;

	CHECK_EQ(proc__each_pid(find_self, &seen), 7, "stops at the first non-zero");
	CHECK(seen, "this process is among them", "not seen");
}

int main(void)
{
	RUN_SUBTEST(test_status_find);
	RUN_SUBTEST(test_status_of_self);
	RUN_SUBTEST(test_maps_parse);
	RUN_SUBTEST(test_each_pid);
	return CHECK_EXIT();
}
