// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "check.h"
#include "attach/libcuda.h"
#include "attach/torch.h"
#include "lib/out_file.h"
#include "lib/procfs.h"

static void test_kinds(void)
{
	CHECK_EQ(lib_kind__of("/usr/lib/x86_64-linux-gnu/libcuda.so.1"), LIB_CUDA, "libcuda.so.1");
	CHECK_EQ(lib_kind__of("libcuda.so.580.65.06"), LIB_CUDA, "versioned");
	CHECK_EQ(lib_kind__of("/opt/torch/lib/libc10.so"), LIB_C10, "libc10");
	CHECK_EQ(lib_kind__of("/opt/torch/lib/libc10_cuda.so"), -1, "libc10_cuda");
	CHECK_EQ(lib_kind__of("/lib64/ld-linux-x86-64.so.2"), LIB_LOADER, "x86 loader");
	CHECK_EQ(lib_kind__of("/lib/ld-linux-aarch64.so.1"), LIB_LOADER, "arm64 loader");
	CHECK_EQ(lib_kind__of("/lib/x86_64-linux-gnu/ld-2.31.so"), LIB_LOADER, "old glibc");
	CHECK_EQ(lib_kind__of("/usr/bin/ld-wrapper"), -1, "not a loader");
	CHECK_EQ(lib_kind__of("/usr/lib/libcudart.so.12"), -1, "libcudart");
}

/* This test program is dynamically linked: its own maps hold its loader. */
static void test_scan_finds_own_loader(void)
{
	struct libcuda_set set = {};
	int n;

	set.skip = 1U << LIB_CUDA | 1U << LIB_C10;
	n = libcuda_set__scan_pid(&set, getpid());
	CHECK_EQ(n, 1, "one loader");
	CHECK_EQ(libcuda_set__count(&set, LIB_LOADER), 1, "counted");
	CHECK(set.n == 1 && strstr(set.libs[0].name, "/ld-") != NULL, "path", "%s",
	      set.n ? set.libs[0].name : "(none)");
	/* The same file again is not new. */
	CHECK_EQ(libcuda_set__scan_pid(&set, getpid()), 0, "again");
	libcuda_set__free(&set);
	/* Not looked for: nothing. */
	set.skip = 1U << LIB_LOADER;
	CHECK_EQ(libcuda_set__scan_pid(&set, getpid()), 0, "skipped");
	libcuda_set__free(&set);
}

/*
 * Found is what is read and probed: the set holds the file open, and the
 * path it hands out is that open file, whatever happens to the path.
 */
static void test_found_file_is_held(void)
{
	char dir[] = "/tmp/umtrace-test-libcuda-XXXXXX", path[256], moved[256], buf[32];
	struct libcuda_set set = {};
	struct stat a, b;
	const char *file;
	int fd;

	if (!mkdtemp(dir))
		return;
	snprintf(path, sizeof(path), "%s/libcuda.so.1", dir);
	snprintf(moved, sizeof(moved), "%s/old", dir);
	fd = open(path, O_WRONLY | O_CREAT, 0644);
	if (fd >= 0)
		close(fd);
	CHECK_EQ(libcuda_set__add(&set, path, LIB_CUDA), 1, "added");
	stat(path, &a);
	/* The path now names another file. */
	rename(path, moved);
	fd = open(path, O_WRONLY | O_CREAT, 0644);
	if (fd >= 0)
		close(fd);
	file = set.n ? libcuda__file(&set.libs[0], buf, sizeof(buf)) : NULL;
	CHECK(file && !strncmp(file, "/proc/self/fd/", 14) && !stat(file, &b) &&
	      b.st_ino == a.st_ino, "the file found", "%s", file ? file : "(none)");
	if (set.n)
		libcuda__close(&set.libs[0]);
	CHECK(set.n && !libcuda__file(&set.libs[0], buf, sizeof(buf)), "closed", "still open");
	libcuda_set__free(&set);
	unlink(path);
	unlink(moved);
	rmdir(dir);
}

/* A path a process names is resolved in its root: no link, no FIFO, no device. */
static void test_open_in_root(void)
{
	char dir[] = "/tmp/umtrace-test-inroot-XXXXXX", file[256], link[256], fifo[256];
	struct stat st;
	int fd;

	if (!mkdtemp(dir))
		return;
	snprintf(file, sizeof(file), "%s/lib.so", dir);
	snprintf(link, sizeof(link), "%s/link.so", dir);
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	fd = open(file, O_WRONLY | O_CREAT, 0644);
	if (fd >= 0)
		close(fd);
	if (symlink("/etc/passwd", link) || mkfifo(fifo, 0600))
		printf("  cannot make the link or the FIFO\n");
	fd = file__open_in_root(getpid(), file, &st);
	CHECK(fd >= 0 && S_ISREG(st.st_mode), "a file", "%d", fd);
	if (fd >= 0)
		close(fd);
	CHECK_EQ(file__open_in_root(getpid(), link, &st), -ELOOP, "a link is not followed");
	CHECK_EQ(file__open_in_root(getpid(), fifo, &st), -EINVAL, "a FIFO: refused, at once");
	CHECK_EQ(file__open_in_root(getpid(), "/dev/null", &st), -EINVAL, "a device");
	CHECK_EQ(file__open_in_root(getpid(), dir, &st), -EINVAL, "a directory");
	CHECK_EQ(file__open_in_root(0x7ffffff0, file, &st), -ENOENT, "no such process");
	unlink(file);
	unlink(link);
	unlink(fifo);
	rmdir(dir);
}

/* A file a process serves (FUSE) is found from mountinfo alone, never opened. */
static void test_fuse_is_never_touched(void)
{
	static const char mi[] =
		"22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
		"30 22 0:40 / /home/u/mnt rw - fuse.sshfs u@h: rw\n"
		"31 30 8:1 /x /home/u/mnt/inner rw - ext4 /dev/sda1 rw\n"
		"32 22 0:41 / /my\\040dir rw - fuse /dev/fuse rw\n"
		"33 22 0:42 / /opt rw - fuse /dev/fuse rw\n"
		"34 22 8:1 / /opt rw - ext4 /dev/sda1 rw\n";

	CHECK(!proc__mountinfo_on_fuse(mi, "/usr/lib/libcuda.so.1"), "ext4", "fuse");
	CHECK(proc__mountinfo_on_fuse(mi, "/home/u/mnt/libcuda.so.1"), "under fuse", "not");
	CHECK(!proc__mountinfo_on_fuse(mi, "/home/u/mntx/libcuda.so.1"), "a longer name",
	      "fuse");
	CHECK(!proc__mountinfo_on_fuse(mi, "/home/u/mnt/inner/libcuda.so.1"),
	      "a mount on top, inside it", "fuse");
	CHECK(proc__mountinfo_on_fuse(mi, "/my dir/libc10.so"), "an escaped mount point", "not");
	CHECK(!proc__mountinfo_on_fuse(mi, "/opt/libcuda.so.1"), "the mount on top wins",
	      "fuse");
	CHECK(!proc__path_on_fuse(getpid(), "/tmp"), "this process", "fuse");
}

/*
 * "hook probed in FILE: N calls, none for a CUDA device": the probed
 * libc10 files, only while no CUDA figures came and other devices called.
 */
static void test_hook_unseen(void)
{
	struct libcuda libs[3] = {
		{ .name = "/lib/libcuda.so.1", .kind = LIB_CUDA, .n_probed = 26 },
		{ .name = "/opt/a/libc10.so", .kind = LIB_C10, .n_probed = 0 },
		{ .name = "/opt/b/libc10.so.2.6", .kind = LIB_C10, .n_probed = 1 },
	};
	struct libcuda_set set = { .libs = libs, .n = 3 };
	struct umt_torch_rec rec = { .type = UMT_REC_TORCH, .pid = 7 };
	struct torch_sample s;
	struct torch_feed f;
	const char *files[2];

	torch_feed__init(&f, NULL);
	CHECK_EQ(torch_hook__unseen(&f, &set, 0, files, 2), 0, "no call at all");
	CHECK_EQ(torch_hook__unseen(&f, &set, 1990, files, 2), 1, "CPU calls only");
	CHECK(!strcmp(files[0], libs[2].name), "the probed file", "%s", files[0]);
	CHECK_EQ(torch_hook__unseen(&f, &set, 1990, files, 0), 0, "no room");
	torch_feed__record(&f, &rec, &s);
	CHECK_EQ(torch_hook__unseen(&f, &set, 1990, files, 2), 0, "a CUDA device's figures");
	torch_feed__free(&f);
}

int main(void)
{
	RUN_SUBTEST(test_kinds);
	RUN_SUBTEST(test_scan_finds_own_loader);
	RUN_SUBTEST(test_found_file_is_held);
	RUN_SUBTEST(test_open_in_root);
	RUN_SUBTEST(test_fuse_is_never_touched);
	RUN_SUBTEST(test_hook_unseen);
	return CHECK_EXIT();
}
