// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * guardd/protect.c: who the guard never stops. The entries as parsed, the
 * decision from a process's identity (never from its name alone), the
 * walk that trusts an executable only where no user can write, and the
 * identity read from /proc.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "check.h"
#include "guardd/protect.h"

static char dir[] = "/tmp/umtrace-test-protect-XXXXXX";

static struct protect_set parsed(const char *list)
{
	struct protect_set ps;
	char err[256] = "";

	protect__init(&ps);
	CHECK(!protect__add(&ps, list, "protect", err, sizeof(err)), "parse", "%s: %s", list, err);
	return ps;
}

/* A process as a user of the host would make it. */
static struct proc_id someone(const char *comm, const char *exe_name, uint32_t uid)
{
	struct proc_id id = { .pid = 4000, .have_uid = true, .uid = uid, .have_exe = true,
			      .dev = 8, .ino = 1234, .exe_uid = 0, .exe_mode = S_IFREG | 0755 };

	snprintf(id.comm, sizeof(id.comm), "%s", comm);
	snprintf(id.exe_name, sizeof(id.exe_name), "%s", exe_name);
	snprintf(id.cgroup, sizeof(id.cgroup), "/user.slice/user-%u.slice/session-1.scope", uid);
	return id;
}

static void test_parse(void)
{
	struct protect_set ps = parsed(" sshd , exe:/usr/sbin/sshd,cgroup:/sys/fs/cgroup/a.slice/,"
				       "uid:0, averyveryverylongname, sshd, uid:prometheus");
	char buf[128], err[256] = "";

	CHECK_EQ(ps.n, 6, "a repeated entry is one");
	if (ps.n == 6) {
		CHECK(ps.v[0].kind == PROTECT_NAME && !strcmp(ps.v[0].arg, "sshd"), "name", "%s",
		      ps.v[0].arg);
		CHECK(ps.v[1].kind == PROTECT_EXE && !strcmp(ps.v[1].arg, "/usr/sbin/sshd"), "exe",
		      "%s", ps.v[1].arg);
		CHECK(ps.v[2].kind == PROTECT_CGROUP && !strcmp(ps.v[2].arg, "a.slice"), "cgroup",
		      "%s", ps.v[2].arg);
		CHECK(ps.v[3].kind == PROTECT_UID && ps.v[3].uid == 0, "uid", "%u", ps.v[3].uid);
		CHECK(!strcmp(ps.v[4].arg, "averyveryverylo"), "cut as comm is", "%s", ps.v[4].arg);
		CHECK(!strcmp(protect__describe(&ps.v[2], buf, sizeof(buf)), "cgroup:a.slice"),
		      "describe", "%s", buf);
		CHECK(ps.v[5].kind == PROTECT_UID && !strcmp(ps.v[5].arg, "prometheus"),
		      "a user, by name", "%s", ps.v[5].arg);
	}
	CHECK(protect__add(&ps, "ok, uid:1x", "--protect", err, sizeof(err)) == -EINVAL &&
	      !strcmp(err, "invalid --protect 'ok, uid:1x': '1x' is not a uid or a user") &&
	      ps.n == 6, "a bad list adds nothing", "%zu: %s", ps.n, err);
	CHECK(protect__add(&ps, "cgroup:", "--protect", err, sizeof(err)) == -EINVAL,
	      "cgroup: needs a path", "%s", err);
	protect__free(&ps);
}

static void test_builtins(void)
{
	struct protect_set ps;
	size_t i, exes = 0, users = 0;

	protect__init(&ps);
	CHECK(!protect__add_builtins(&ps), "add", "failed");
	CHECK(ps.n && ps.v[0].self && ps.v[0].kind == PROTECT_EXE, "umtrace's own file first",
	      "%s", ps.n ? ps.v[0].arg : "");
	for (i = 0; i < ps.n; i++) {
		exes += ps.v[i].kind == PROTECT_EXE && ps.v[i].builtin;
		users += ps.v[i].kind == PROTECT_UID && ps.v[i].builtin &&
			 !strcmp(ps.v[i].arg, "sshd");
	}
	CHECK(exes + users == ps.n && exes >= 2 && users == 1,
	      "executables, and sshd's privilege separation user; never a name",
	      "%zu + %zu of %zu", exes, users, ps.n);
	protect__free(&ps);
}

/* A name is what any process may take: it protects only with its executable. */
static void test_name_is_not_identity(void)
{
	struct protect_set ps = parsed("sshd");
	struct proc_id id;

	ps.v[0].found = true;
	id = someone("sshd", "sshd", 0);
	CHECK(protect__match(&ps, &id, 0), "sshd from root's sshd", "not protected");
	id = someone("sshd", "sshd", 1000);
	CHECK(!protect__match(&ps, &id, 0), "root's sshd run by a user (LD_PRELOAD)",
	      "protected");
	id = someone("sshd", "sshd", 0);
	id.exe_uid = 1000;
	CHECK(!protect__match(&ps, &id, 0), "a user's copy named sshd", "protected");
	id = someone("sshd", "sshd", 0);
	id.exe_mode = S_IFREG | 0777;
	CHECK(!protect__match(&ps, &id, 0), "root's file anyone may write", "protected");
	id = someone("sshd", "python3.11", 0);
	CHECK(!protect__match(&ps, &id, 0), "root's python renamed sshd (prctl, a symlink)",
	      "protected");
	id = someone("sshd", "sshd", 0);
	id.have_uid = false;
	CHECK(!protect__match(&ps, &id, 0), "no uid to look at", "protected");
	id = someone("sshd", "sshd", 0);
	id.have_exe = false;
	CHECK(!protect__match(&ps, &id, 0), "no executable to look at", "protected");
	id = someone("sshd2", "sshd2", 0);
	CHECK(!protect__match(&ps, &id, 0), "another name", "protected");
	ps.v[0].found = false;
	id = someone("sshd", "sshd", 0);
	CHECK(!protect__match(&ps, &id, 0), "an entry not resolved", "protected");
	protect__free(&ps);
}

static void test_identity(void)
{
	struct protect_set ps = parsed("exe:/usr/sbin/sshd, uid:990, cgroup:system.slice/ssh.service");
	struct proc_id id;

	ps.v[0].found = ps.v[1].found = ps.v[2].found = true;
	ps.v[0].dev = 8;
	ps.v[0].ino = 1234;
	ps.v[2].level = 2;

	id = someone("hog", "hog", 0);
	CHECK(protect__match(&ps, &id, 0), "exe: by device and inode", "not protected");
	id.ino = 1235;
	CHECK(!protect__match(&ps, &id, 0), "another file", "protected");
	id = someone("anything", "x", 1000);
	CHECK(!protect__match(&ps, &id, 0), "the file run by a user", "protected");
	id = someone("hog", "hog", 990);
	id.ino = 1;
	CHECK(protect__match(&ps, &id, 0), "uid:", "not protected");
	id = someone("hog", "hog", 1000);
	id.ino = 1;
	snprintf(id.cgroup, sizeof(id.cgroup), "/system.slice/ssh.service/x");
	CHECK(protect__match(&ps, &id, 0), "below the cgroup", "not protected");
	snprintf(id.cgroup, sizeof(id.cgroup), "/system.slice/ssh.servicex");
	CHECK(!protect__match(&ps, &id, 0), "a cgroup of a longer name", "protected");
	id = someone("hog", "hog", 1000);
	id.ino = 1;
	id.pid = 1;
	CHECK(protect__match(&ps, &id, 0), "pid 1", "not protected");
	id.pid = 77;
	id.kthread = true;
	CHECK(protect__match(&ps, &id, 0), "a kernel thread", "not protected");
	id.kthread = false;
	CHECK(protect__match(&ps, &id, 77), "the guard itself", "not protected");
	CHECK(!protect__match(&ps, &id, 78), "anyone else", "protected");
	protect__free(&ps);
}

static const char *at(const char *name)
{
	return check_path(dir, name);
}

/* exe: is trusted where only root can change what runs: file and directories. */
static void test_resolve(void)
{
	struct protect_set ps = parsed("exe:/bin/tool, exe:/link, exe:/abs, exe:/bin/../bin/tool");
	struct stat st;
	char err[512] = "";
	int fd, ret;

	/* The walk starts at ps.root: here a directory of root's, 0700. */
	ps.root = dir;
	mkdir(at("bin"), 0755);
	fd = open(at("bin/tool"), O_WRONLY | O_CREAT, 0755);
	if (fd >= 0)
		close(fd);
	if (symlink("bin/tool", at("link")) || symlink("/bin/tool", at("abs")))
		printf("  cannot make links\n");
	ret = protect__resolve(&ps, true, err, sizeof(err));
	CHECK(ret == 4, "trusted", "%d: %s", ret, err);
	stat(at("bin/tool"), &st);
	CHECK(ps.v[0].found && ps.v[0].ino == st.st_ino && ps.v[1].ino == st.st_ino &&
	      ps.v[2].ino == st.st_ino && ps.v[3].ino == st.st_ino,
	      "links resolve as the kernel would, in the root", "%lu %lu %lu",
	      (unsigned long)ps.v[0].ino, (unsigned long)ps.v[1].ino, (unsigned long)ps.v[2].ino);
	CHECK_EQ(protect__resolve(&ps, true, err, sizeof(err)), 0, "nothing changed");

	chmod(at("bin/tool"), 0775);
	CHECK(protect__resolve(&ps, true, err, sizeof(err)) == -EPERM &&
	      !strcmp(err, "protect exe:/bin/tool: tool is writable by group or others"),
	      "a file the group may write", "%s", err);
	chmod(at("bin/tool"), 0755);
	chmod(at("bin"), 0777);
	CHECK(protect__resolve(&ps, true, err, sizeof(err)) == -EPERM &&
	      !strcmp(err, "protect exe:/bin/tool: bin is writable by group or others"),
	      "a directory anyone may write", "%s", err);
	chmod(at("bin"), 0755);
	if (chown(at("bin/tool"), 1000, 1000))
		printf("  cannot chown\n");
	CHECK(protect__resolve(&ps, true, err, sizeof(err)) == -EPERM &&
	      !strcmp(err, "protect exe:/bin/tool: tool is not owned by root"),
	      "a user's file", "%s", err);
	/* Afterwards (not strict) the entries are only no longer matched. */
	ret = protect__resolve(&ps, false, err, sizeof(err));
	CHECK(ret == 4 && !ps.v[0].found && !ps.v[1].found, "lost, not fatal", "%d", ret);
	if (chown(at("bin/tool"), 0, 0))
		printf("  cannot chown\n");
	unlink(at("bin/tool"));
	CHECK(protect__resolve(&ps, true, err, sizeof(err)) == -ENOENT, "missing", "%s", err);
	unlink(at("link"));
	if (symlink("link", at("link")))
		printf("  cannot make a link\n");
	ret = protect__resolve(&ps, true, err, sizeof(err));
	CHECK(ret == -ENOENT || ret == -ELOOP, "a loop ends", "%d: %s", ret, err);
	unlink(at("link"));
	unlink(at("abs"));
	rmdir(at("bin"));
	protect__free(&ps);
}

/* uid:USER is the host's user: ps.root's /etc/passwd, read as a file. */
static void test_resolve_user(void)
{
	struct protect_set ps = parsed("uid:gpuops");
	static const char passwd[] = "root:x:0:0::/root:/bin/sh\n"
				     "gpuopsx:x:1:1::/:/bin/false\n"
				     "gpuops:x:990:990::/:/bin/false\n";
	char err[512] = "";
	FILE *f;

	ps.root = dir;
	mkdir(at("etc"), 0755);
	f = fopen(at("etc/passwd"), "w");
	if (f) {
		fputs(passwd, f);
		fclose(f);
	}
	CHECK(protect__resolve(&ps, true, err, sizeof(err)) == 1 && ps.v[0].found &&
	      ps.v[0].uid == 990, "found", "%u: %s", ps.v[0].uid, err);
	protect__free(&ps);
	ps = parsed("uid:nosuch");
	ps.root = dir;
	CHECK(protect__resolve(&ps, true, err, sizeof(err)) == -ENOENT &&
	      !strcmp(err, "protect uid:nosuch: no user nosuch in /etc/passwd"), "missing", "%s",
	      err);
	protect__free(&ps);
	unlink(at("etc/passwd"));
	rmdir(at("etc"));
}

static void test_read_self(void)
{
	struct protect_set ps;
	struct proc_id id;
	char comm[32];
	FILE *f = fopen("/proc/self/comm", "r");

	if (!f || !fgets(comm, sizeof(comm), f))
		comm[0] = '\0';
	if (f)
		fclose(f);
	comm[strcspn(comm, "\n")] = '\0';
	CHECK(!protect__read(getpid(), &id), "read", "failed");
	CHECK(!strcmp(id.comm, comm), "comm", "%s", id.comm);
	CHECK(id.have_uid && id.uid == getuid(), "real uid", "%u", id.uid);
	CHECK(id.have_exe && !strcmp(id.exe_name, "test_guard_protect"), "exe", "%s", id.exe_name);
	CHECK(!id.kthread, "no kernel thread", "is one");
	CHECK(protect__read(0x7ffffff0, &id) == -ENOENT, "gone", "found");
	/* umtrace's own file protects root's umtrace processes: here, this one. */
	protect__init(&ps);
	protect__add_builtins(&ps);
	protect__resolve(&ps, false, NULL, 0);
	protect__read(getpid(), &id);
	CHECK(protect__match(&ps, &id, 0) == (id.uid == 0), "its own file, run by root",
	      "uid %u", id.uid);
	protect__free(&ps);
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	RUN_SUBTEST(test_parse);
	RUN_SUBTEST(test_builtins);
	RUN_SUBTEST(test_name_is_not_identity);
	RUN_SUBTEST(test_identity);
	if (geteuid())
		SKIP_SUBTEST(test_resolve, "needs root (files owned by root, and by others)");
	else
		RUN_SUBTEST(test_resolve);
	RUN_SUBTEST(test_resolve_user);
	RUN_SUBTEST(test_read_self);
	rmdir(dir);
	return CHECK_EXIT();
}
