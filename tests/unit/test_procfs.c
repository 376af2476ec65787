// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
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

int main(void)
{
	RUN_SUBTEST(test_status_find);
	RUN_SUBTEST(test_status_of_self);
	return CHECK_EXIT();
}
