// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * lib/out_file.c's -o: a device or a FIFO is written where it is, never
 * replaced by a file (with --force or without), as a shell's redirection.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include "check.h"
#include "lib/out_file.h"

static char dir[] = "/tmp/umtrace-test-outfile-XXXXXX";

static bool is_chr(const char *path, dev_t want)
{
	struct stat sb;

	return !lstat(path, &sb) && S_ISCHR(sb.st_mode) && sb.st_rdev == want;
}

static void test_devices_written_in_place(void)
{
	static const bool forces[] = { false, true };
	const char *null = check_path(dir, "null"), *full = check_path(dir, "full");
	struct out_file o;
	unsigned int i;

	/* Copies of /dev/null and /dev/full: nothing of the host's is at stake. */
	if (!CHECK(!mknod(null, S_IFCHR | 0666, makedev(1, 3)) &&
		   !mknod(full, S_IFCHR | 0666, makedev(1, 7)), "mknod", "errno %d", errno))
		return;
	for (i = 0; i < 2; i++) {
		CHECK_EQ(out_file__open(&o, null, forces[i]), 0, "open null");
		fputs("discarded\n", o.f);
		CHECK_EQ(out_file__commit(&o), 0, "commit null");
		CHECK(is_chr(null, makedev(1, 3)), "null kept", "force %d", forces[i]);

		CHECK_EQ(out_file__open(&o, full, forces[i]), 0, "open full");
		fputs("no room\n", o.f);
		CHECK_EQ(out_file__commit(&o), -ENOSPC, "commit full");
		CHECK(is_chr(full, makedev(1, 7)), "full kept", "force %d", forces[i]);
	}
	unlink(null);
	unlink(full);
}

static void test_fifo(void)
{
	const char *fifo = check_path(dir, "fifo");
	struct out_file o;
	char buf[16] = "";
	int rd;

	if (!CHECK(!mkfifo(fifo, 0600), "mkfifo", "errno %d", errno))
		return;
	/* No reader: said at once, never a wait. */
	CHECK_EQ(out_file__open(&o, fifo, true), -EPIPE, "no reader");
	rd = open(fifo, O_RDONLY | O_NONBLOCK);
	if (CHECK(rd >= 0, "reader", "errno %d", errno)) {
		CHECK_EQ(out_file__open(&o, fifo, false), 0, "open");
		fputs("through\n", o.f);
		CHECK_EQ(out_file__commit(&o), 0, "commit");
		CHECK(read(rd, buf, sizeof(buf) - 1) == 8 && !strcmp(buf, "through\n"),
		      "read", "got '%s'", buf);
		close(rd);
	}
	CHECK(!access(fifo, F_OK), "fifo kept", "errno %d", errno);
	unlink(fifo);
}

static void test_files_as_before(void)
{
	const char *path = check_path(dir, "out.txt");
	struct out_file o;
	struct stat sb;
	FILE *f = fopen(path, "w");

	if (!CHECK(f, "create", "errno %d", errno))
		return;
	fclose(f);
	CHECK_EQ(out_file__open(&o, path, false), -EEXIST, "refused without force");
	CHECK_EQ(out_file__open(&o, path, true), 0, "force");
	fputs("new\n", o.f);
	CHECK_EQ(out_file__commit(&o), 0, "commit");
	CHECK(!stat(path, &sb) && S_ISREG(sb.st_mode) && sb.st_size == 4, "replaced",
	      "size %lld", (long long)sb.st_size);
	unlink(path);
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	RUN_SUBTEST(test_devices_written_in_place);
	RUN_SUBTEST(test_fifo);
	RUN_SUBTEST(test_files_as_before);
	rmdir(dir);
	return CHECK_EXIT();
}
