// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The symbolizer against this very process, a child that exec'ed, a child
 * in its own mount namespace (a container in miniature), and a perf map.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <link.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/auxv.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "model/callsites.h"
#include "check.h"
#include "stacks/symbolize.h"

#define TARGET __attribute__((noinline, noclone))

/* Big enough that +4 is still inside; noclone keeps the symbol's name. */
static TARGET int sym_test_alpha(volatile int *p)
{
	int i, sum = 0;

	for (i = 0; i < p[0]; i++)
		sum += p[i & 1] * i;
	return sum;
}

static TARGET int sym_test_beta(volatile int *p)
{
	int i, sum = 1;

	for (i = 0; i < p[1]; i++)
		sum ^= p[i & 1] + i;
	return sum;
}

/* A C function under a C++ name: demangling tested without a C++ compiler. */
static int sym_test_mangled(volatile int *p) __asm__("_ZN7umtrace4test6mangleEPVi");
static TARGET __attribute__((used)) int sym_test_mangled(volatile int *p)
{
	int i, sum = 2;

	for (i = 0; i < p[0]; i++)
		sum += p[i & 1] - i;
	return sum;
}
#define MANGLED_DEMANGLED "umtrace::test::mangle(int volatile*)"

static const char *fake_lib;
static char self_name[PATH_MAX];

static bool streq(const char *a, const char *b)
{
	return a && b && !strcmp(a, b);
}

static const char *str(const char *s)
{
	return s ? s : "(null)";
}

static uint64_t addr_of(const void *fn, uint64_t off)
{
	return (uint64_t)(uintptr_t)fn + off;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* Start of the first mapping, at file offset 0, of a file named base*. */
static uint64_t map_start(pid_t pid, const char *base)
{
	char path[64], line[512];
	uint64_t start = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long lo, off;
		char *file = strchr(line, '/'), *slash;

		if (!file || sscanf(line, "%llx-%*[0-9a-f] %*s %llx", &lo, &off) != 2)
			continue;
		file[strcspn(file, "\n")] = '\0';
		slash = strrchr(file, '/');
		if (off || strncmp(slash + 1, base, strlen(base)))
			continue;
		start = lo;
		break;
	}
	fclose(f);
	return start;
}

static void test_local_functions(void)
{
	struct symbolizer *s = symbolizer__new();
	uint64_t addrs[3] = {
		addr_of(sym_test_alpha, 4),
		addr_of(sym_test_beta, 4),
		addr_of(sym_test_alpha, 0),
	};
	struct sym_frame out[3];
	int i;

	if (!CHECK(s, "new", "errno %d", errno))
		return;
	CHECK_EQ(symbolizer__resolve(s, getpid(), addrs, 3, out), 0, "resolve");
	CHECK(streq(out[0].func, "sym_test_alpha"), "alpha", "got %s", str(out[0].func));
	CHECK_EQ(out[0].offset, 4, "alpha offset");
	CHECK(streq(out[1].func, "sym_test_beta"), "beta", "got %s", str(out[1].func));
	CHECK_EQ(out[1].offset, 4, "beta offset");
	CHECK(streq(out[2].func, "sym_test_alpha"), "alpha+0", "got %s", str(out[2].func));
	CHECK_EQ(out[2].offset, 0, "alpha+0 offset");
	for (i = 0; i < 3; i++) {
		CHECK_EQ(out[i].addr, addrs[i], "addr kept");
		CHECK(streq(out[i].module, self_name), "module", "got %s, want %s",
		      str(out[i].module), self_name);
	}
	symbolizer__free(s);
}

static void test_libc(void)
{
	struct symbolizer *s = symbolizer__new();
	uint64_t addrs[2] = { addr_of(getpid, 0), addr_of(qsort, 0) };
	struct sym_frame out[2];

	if (!CHECK(s, "new", "errno %d", errno))
		return;
	CHECK_EQ(symbolizer__resolve(s, getpid(), addrs, 2, out), 0, "resolve");
	CHECK(out[0].func && strstr(out[0].func, "getpid"), "getpid", "got %s",
	      str(out[0].func));
	CHECK(out[1].func && strstr(out[1].func, "qsort"), "qsort", "got %s",
	      str(out[1].func));
	CHECK(out[0].module && !strncmp(out[0].module, "libc.so", 7), "module",
	      "got %s", str(out[0].module));
	symbolizer__free(s);
}

static void test_demangle(void)
{
	struct symbolizer *s = symbolizer__new();
	uint64_t addr = addr_of(sym_test_mangled, 1);
	struct sym_frame out;

	if (!CHECK(s, "new", "errno %d", errno))
		return;
	CHECK_EQ(symbolizer__resolve(s, getpid(), &addr, 1, &out), 0, "resolve");
	CHECK(streq(out.func, MANGLED_DEMANGLED), "demangled", "got %s", str(out.func));
	CHECK_EQ(out.offset, 1, "offset");
	symbolizer__free(s);
}

static void test_garbage(void)
{
	struct symbolizer *s = symbolizer__new();
	long page = sysconf(_SC_PAGESIZE);
	void *gone = mmap(NULL, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *heap = malloc(64);
	uint64_t addrs[] = {
		0, 1, 4095, 0xffffffff81000000ULL, UINT64_MAX,
		0x0000800000000000ULL, (uint64_t)(uintptr_t)gone,
		(uint64_t)(uintptr_t)heap, (uint64_t)(uintptr_t)&page,
	};
	size_t i, n = sizeof(addrs) / sizeof(addrs[0]);
	struct sym_frame out[sizeof(addrs) / sizeof(addrs[0])];

	if (!CHECK(s, "new", "errno %d", errno) ||
	    !CHECK(gone != MAP_FAILED && heap, "setup", "errno %d", errno))
		goto out;
	munmap(gone, page);
	CHECK_EQ(symbolizer__resolve(s, getpid(), addrs, n, out), 0, "resolve");
	for (i = 0; i < n; i++) {
		CHECK(!out[i].func, "no func", "0x%" PRIx64 " named %s", addrs[i], out[i].func);
		CHECK_EQ(out[i].addr, addrs[i], "addr kept");
		CHECK_EQ(out[i].offset, 0, "no offset");
	}
	/* Twice: the second pass is answered from what the first left. */
	CHECK_EQ(symbolizer__resolve(s, getpid(), addrs, n, out), 0, "resolve again");
out:
	free(heap);
	symbolizer__free(s);
}

/* The vdso has no file: its image is read from process memory. */
static void test_vdso(void)
{
	enum { SPAN = 8192, STEP = 16 };
	struct symbolizer *s = symbolizer__new();
	uint64_t base = getauxval(AT_SYSINFO_EHDR), addrs[SPAN / STEP];
	struct sym_frame out[SPAN / STEP];
	bool named = false;
	size_t i;

	if (!CHECK(s && base, "setup", "errno %d, vdso at %" PRIx64, errno, base))
		goto out;
	for (i = 0; i < SPAN / STEP; i++)
		addrs[i] = base + i * STEP;
	CHECK_EQ(symbolizer__resolve(s, getpid(), addrs, SPAN / STEP, out), 0, "resolve");
	CHECK(streq(out[0].module, "[vdso]"), "module", "got %s", str(out[0].module));
	for (i = 0; i < SPAN / STEP; i++)
		named |= out[i].func && strstr(out[i].func, "clock_gettime");
	CHECK(named, "clock_gettime", "no address in the vdso's first %d bytes named it",
	      SPAN);
out:
	symbolizer__free(s);
}

/* A pid that no longer exists: every frame unknown, addr still filled. */
static void test_gone_pid(void)
{
	struct symbolizer *s = symbolizer__new();
	uint64_t addr = addr_of(sym_test_alpha, 4);
	struct sym_frame out = { .func = "x", .module = "y" };
	pid_t pid = fork();

	if (pid == 0)
		_exit(0);
	if (!CHECK(s && pid > 0, "setup", "errno %d", errno))
		goto out;
	waitpid(pid, NULL, 0);
	CHECK_EQ(symbolizer__resolve(s, pid, &addr, 1, &out), -ESRCH, "gone");
	CHECK(!out.func && !out.module, "unknown", "func %s module %s",
	      str(out.func), str(out.module));
	CHECK_EQ(out.addr, addr, "addr kept");
out:
	symbolizer__free(s);
}

/* A child that exec'ed sleep: its own modules, libc shared through the cache. */
static void test_child_forget(void)
{
	struct symbolizer *s = symbolizer__new();
	struct sym_frame self, out[2];
	uint64_t addrs[2], self_getpid = addr_of(getpid, 0);
	uint64_t self_libc = map_start(getpid(), "libc.so"), child_libc = 0, exe = 0;
	struct sym_stats before, after;
	int fds[2] = { -1, -1 }, i;
	pid_t pid = -1;
	char c;

	if (!CHECK(s && self_libc && !pipe2(fds, O_CLOEXEC), "setup", "errno %d", errno))
		goto out;
	pid = fork();
	if (pid == 0) {
		execl("/bin/sleep", "sleep", "30", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	fds[1] = -1;
	/* EOF: exec'ed. Then wait for ld.so to map libc. */
	if (!CHECK(pid > 0 && read(fds[0], &c, 1) == 0, "exec", "errno %d", errno))
		goto out;
	for (i = 0; i < 200 && !(child_libc && exe); i++, sleep_ms(10)) {
		child_libc = map_start(pid, "libc.so");
		exe = map_start(pid, "sleep");
	}
	if (!CHECK(child_libc && exe, "child maps", "libc %" PRIx64 " exe %" PRIx64,
		   child_libc, exe))
		goto out;

	CHECK_EQ(symbolizer__resolve(s, getpid(), &self_getpid, 1, &self), 0, "self");
	symbolizer__stats(s, &before);
	addrs[0] = exe + 0x40;
	addrs[1] = self_getpid - self_libc + child_libc;
	CHECK_EQ(symbolizer__resolve(s, pid, addrs, 2, out), 0, "child");
	symbolizer__stats(s, &after);
	CHECK(streq(out[0].module, "sleep"), "exe module", "got %s", str(out[0].module));
	CHECK(self.func && out[1].func == self.func, "libc func", "got %s, want %s",
	      str(out[1].func), str(self.func));
	CHECK(streq(out[1].module, self.module), "libc module", "got %s", str(out[1].module));
	CHECK(after.hits > before.hits, "per-file cache", "hits %" PRIu64 " -> %" PRIu64,
	      before.hits, after.hits);

	symbolizer__forget(s, pid);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	pid = -1;
	CHECK_EQ(symbolizer__resolve(s, getpid(), &self_getpid, 1, &self), 0, "self still");
	CHECK(self.func != NULL, "names outlive forget", "self lost its name");
out:
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	symbolizer__free(s);
}

/*
 * A forked child that waits to be killed, looked at once: it maps the
 * same test binary at the same place. Its pid, or -1.
 */
static pid_t paused_child_looked_at(struct symbolizer *s)
{
	uint64_t addr = addr_of(sym_test_alpha, 4);
	struct sym_frame out;
	pid_t pid = fork();

	if (pid == 0) {
		pause();
		_exit(0);
	}
	if (!CHECK(s && pid > 0, "setup", "errno %d", errno))
		return -1;
	CHECK_EQ(symbolizer__resolve(s, pid, &addr, 1, &out), 0, "alive");
	CHECK(streq(out.func, "sym_test_alpha"), "alive name", "got %s", str(out.func));
	return pid;
}

static void reap(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* A child gone after forget: nothing left of it. */
static void test_forget_then_gone(void)
{
	struct symbolizer *s = symbolizer__new();
	uint64_t addr = addr_of(sym_test_alpha, 4);
	struct sym_frame out;
	pid_t pid = paused_child_looked_at(s);

	if (pid < 0)
		goto out;
	symbolizer__forget(s, pid);
	reap(pid);
	CHECK_EQ(symbolizer__resolve(s, 0x7fffffff, &addr, 1, &out), -ESRCH, "no such pid");
	CHECK(!out.func, "unknown", "got %s", str(out.func));
out:
	symbolizer__free(s);
}

/*
 * A process looked at once, then gone before its next stack is read (a
 * short job, a consumer behind): a module not opened yet (libc here) is
 * still opened from the root held since the first look.
 */
static void test_first_look_then_gone(void)
{
	struct symbolizer *s = symbolizer__new();
	uint64_t libc = addr_of(getpid, 0);	/* qsort is libasan's under ASan */
	struct sym_frame out;
	char proc[32];
	pid_t pid = paused_child_looked_at(s);

	if (pid < 0)
		goto out;
	reap(pid);
	snprintf(proc, sizeof(proc), "/proc/%d", (int)pid);
	CHECK(access(proc, F_OK) && errno == ENOENT, "reaped", "%s still there", proc);
	CHECK_EQ(symbolizer__resolve(s, pid, &libc, 1, &out), 0, "gone");
	CHECK(out.func && strstr(out.func, "getpid"), "libc opened after exit", "got %s",
	      str(out.func));
	CHECK(out.module && !strncmp(out.module, "libc.so", 7), "libc module", "got %s",
	      str(out.module));
	symbolizer__forget(s, pid);
out:
	symbolizer__free(s);
}

/* A library dlopen'ed after the first look is found by re-reading maps. */
static void test_dlopen_refresh(void)
{
	struct symbolizer *s = symbolizer__new();
	uint64_t addr = addr_of(sym_test_alpha, 4);
	struct sym_stats st;
	struct sym_frame out;
	void *h = NULL, *fn;

	if (!CHECK(s, "new", "errno %d", errno))
		return;
	CHECK_EQ(symbolizer__resolve(s, getpid(), &addr, 1, &out), 0, "first");
	h = dlopen("libthread_db.so.1", RTLD_LAZY | RTLD_LOCAL);
	fn = h ? dlsym(h, "td_init") : NULL;
	if (!CHECK(fn, "dlopen", "%s", dlerror()))
		goto out;
	sleep_ms(110);		/* past the re-read rate limit */
	addr = addr_of(fn, 0);
	CHECK_EQ(symbolizer__resolve(s, getpid(), &addr, 1, &out), 0, "after dlopen");
	CHECK(streq(out.func, "td_init"), "func", "got %s", str(out.func));
	CHECK(streq(out.module, "libthread_db.so.1"), "module", "got %s", str(out.module));
	symbolizer__stats(s, &st);
	CHECK_EQ(st.reports, 2, "maps read twice");
out:
	if (h)
		dlclose(h);
	symbolizer__free(s);
}

static void test_fake_libcuda(void)
{
	static const char *const names[] = { "cuMemAlloc_v2", "cuMemFree_v2", "cuMemCreate" };
	struct symbolizer *s = symbolizer__new();
	struct sym_frame out[3];
	uint64_t addrs[3];
	void *h = dlopen(fake_lib, RTLD_NOW | RTLD_LOCAL);
	int i;

	if (!CHECK(s && h, "setup", "%s", dlerror()))
		goto out;
	for (i = 0; i < 3; i++) {
		void *fn = dlsym(h, names[i]);

		if (!CHECK(fn, names[i], "not exported"))
			goto out;
		addrs[i] = addr_of(fn, 0);
	}
	CHECK_EQ(symbolizer__resolve(s, getpid(), addrs, 3, out), 0, "resolve");
	for (i = 0; i < 3; i++) {
		CHECK(streq(out[i].func, names[i]), names[i], "got %s", str(out[i].func));
		CHECK(streq(out[i].module, "libcuda.so.1"), "module", "got %s",
		      str(out[i].module));
	}
out:
	if (h)
		dlclose(h);
	symbolizer__free(s);
}

/*
 * A frame no symbol covers is named by its place in its file, not by the
 * address it was mapped at: the ELF header of the fake, 0x10 in.
 */
static void test_unnamed_frame_offset(void)
{
	struct symbolizer *s = symbolizer__new();
	void *h = dlopen(fake_lib, RTLD_NOW | RTLD_LOCAL);
	struct sym_frame out;
	uint64_t base, addr;
	char name[256];

	if (!CHECK(s && h, "setup", "%s", dlerror()))
		goto out;
	base = map_start(getpid(), "libcuda.so.1");
	if (!CHECK(base, "map", "libcuda.so.1 is not in our maps"))
		goto out;
	addr = base + 0x10;
	CHECK_EQ(symbolizer__resolve(s, getpid(), &addr, 1, &out), 0, "resolve");
	CHECK(!out.func, "func", "got %s", str(out.func));
	CHECK(streq(out.module, "libcuda.so.1"), "module", "got %s", str(out.module));
	CHECK_EQ(out.offset, 0x10, "offset");
	callsites__frame_name(&out, name, sizeof(name));
	CHECK(streq(name, "libcuda.so.1+0x10"), "name", "got %s", name);
out:
	if (h)
		dlclose(h);
	symbolizer__free(s);
}

static int write_str(int fd, const char *buf)
{
	size_t len = strlen(buf);

	return write(fd, buf, len) == (ssize_t)len ? 0 : -1;
}

/* Python -X perf: "START SIZE NAME" lines for code outside any file. */
static void test_perf_map(void)
{
	struct symbolizer *s = symbolizer__new();
	long page = sysconf(_SC_PAGESIZE);
	char *jit = mmap(NULL, 2 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t base = (uint64_t)(uintptr_t)jit, addrs[3];
	char path[64], buf[256];
	struct sym_frame out[3];
	int fd = -1;

	snprintf(path, sizeof(path), "/tmp/perf-%d.map", getpid());
	if (!CHECK(s && jit != MAP_FAILED, "setup", "errno %d", errno))
		goto out;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (!CHECK(fd >= 0, "create map", "%s: errno %d", path, errno))
		goto out;
	/* The last line is still being written: not taken yet. */
	snprintf(buf, sizeof(buf), "%" PRIx64 " 80 py::train_step:/app/train.py\n"
		 "%" PRIx64 " 40 py::later:/app/train.py", base, base + 0x100);
	CHECK(!write_str(fd, buf), "write", "errno %d", errno);
	addrs[0] = base + 0x10;
	addrs[1] = base + 0x90;
	addrs[2] = base + 0x110;
	CHECK_EQ(symbolizer__resolve(s, getpid(), addrs, 3, out), 0, "resolve");
	CHECK(streq(out[0].func, "py::train_step:/app/train.py"), "entry", "got %s",
	      str(out[0].func));
	CHECK_EQ(out[0].offset, 0x10, "offset");
	CHECK(streq(out[0].module, "[perf-map]"), "module", "got %s", str(out[0].module));
	CHECK(!out[1].func, "past the end", "got %s", str(out[1].func));
	CHECK(!out[2].func, "partial line", "got %s", str(out[2].func));

	CHECK(!write_str(fd, "\n"), "append", "errno %d", errno);
	sleep_ms(110);
	CHECK_EQ(symbolizer__resolve(s, getpid(), addrs, 3, out), 0, "resolve again");
	CHECK(streq(out[0].func, "py::train_step:/app/train.py"), "kept", "got %s",
	      str(out[0].func));
	CHECK(streq(out[2].func, "py::later:/app/train.py"), "appended", "got %s",
	      str(out[2].func));
	CHECK_EQ(out[2].offset, 0x10, "appended offset");
out:
	if (fd >= 0)
		close(fd);
	unlink(path);
	if (jit != MAP_FAILED)
		munmap(jit, 2 * page);
	symbolizer__free(s);
}

static void test_eviction(void)
{
	struct symbolizer *s = symbolizer__new_cap(4);
	struct sym_stats st;
	struct sym_frame out[8];
	uint64_t addrs[8];
	int i;

	if (!CHECK(s, "new", "errno %d", errno))
		return;
	for (i = 0; i < 8; i++)
		addrs[i] = addr_of(sym_test_alpha, i);
	CHECK_EQ(symbolizer__resolve(s, getpid(), addrs, 8, out), 0, "resolve");
	symbolizer__stats(s, &st);
	CHECK_EQ(st.misses, 8, "misses");
	CHECK_EQ(st.evictions, 4, "evictions");
	/* The newest four stay; the oldest went and is looked up again. */
	CHECK_EQ(symbolizer__resolve(s, getpid(), &addrs[7], 1, out), 0, "newest");
	CHECK_EQ(symbolizer__resolve(s, getpid(), &addrs[0], 1, out), 0, "oldest");
	symbolizer__stats(s, &st);
	CHECK_EQ(st.hits, 1, "hits");
	CHECK_EQ(st.misses, 9, "misses after");
	CHECK(streq(out[0].func, "sym_test_alpha"), "name after eviction", "got %s",
	      str(out[0].func));
	CHECK(!symbolizer__new_cap(0) && errno == EINVAL, "cap 0", "accepted");
	symbolizer__free(s);
}

/*
 * A child in its own user and mount namespaces dlopens a library from a
 * tmpfs only it can see, as a process in a container does: the path in
 * its maps names nothing in ours, only /proc/PID/root reaches the file.
 */
static struct {
	char dir[64], lib[96];
	pid_t pid;
	uint64_t addr;
	const char *why;
} ns;

static int copy_file(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY | O_CLOEXEC), out, err = -1;
	ssize_t n;

	if (in < 0)
		return -1;
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	if (out < 0)
		goto out_in;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, n) != n)
			goto out_out;
	err = n < 0 ? -1 : 0;
out_out:
	close(out);
out_in:
	close(in);
	return err;
}

static int put(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), err;

	if (fd < 0)
		return -1;
	err = write_str(fd, text);
	close(fd);
	return err;
}

/* Be root in the new user namespace, or no file can be created in it. */
static int map_ids(uid_t uid, gid_t gid)
{
	char buf[64];

	snprintf(buf, sizeof(buf), "0 %u 1", (unsigned int)uid);
	if (put("/proc/self/uid_map", buf) || put("/proc/self/setgroups", "deny"))
		return -1;
	snprintf(buf, sizeof(buf), "0 %u 1", (unsigned int)gid);
	return put("/proc/self/gid_map", buf);
}

static void ns_child(int fd)
{
	uid_t uid = getuid();
	gid_t gid = getgid();
	struct link_map *lm = NULL;
	uint64_t addr = 0;
	void *h;

	/* Where the system keeps it; the copy loads apart from it. */
	h = dlopen("libthread_db.so.1", RTLD_LAZY | RTLD_LOCAL);
	if (!h || dlinfo(h, RTLD_DI_LINKMAP, &lm) || !lm)
		goto out;
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) || map_ids(uid, gid) ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount("tmpfs", ns.dir, "tmpfs", 0, NULL) ||
	    copy_file(lm->l_name, ns.lib))
		goto out;
	h = dlopen(ns.lib, RTLD_LAZY | RTLD_LOCAL);
	if (h)
		addr = addr_of(dlsym(h, "td_init"), 0);
out:
	if (write(fd, &addr, sizeof(addr)) != sizeof(addr) || !addr)
		_exit(1);
	pause();
	_exit(0);
}

static bool ns_start(void)
{
	int fds[2];

	ns.why = "cannot create a temporary directory";
	strcpy(ns.dir, "/tmp/umt-sym-XXXXXX");
	if (!mkdtemp(ns.dir))
		return false;
	snprintf(ns.lib, sizeof(ns.lib), "%s/libumtcopy.so", ns.dir);
	ns.why = "pipe or fork failed";
	if (pipe2(fds, O_CLOEXEC))
		goto err_rmdir;
	ns.pid = fork();
	if (ns.pid == 0)
		ns_child(fds[1]);
	close(fds[1]);
	if (ns.pid < 0 || read(fds[0], &ns.addr, sizeof(ns.addr)) != sizeof(ns.addr) ||
	    !ns.addr) {
		ns.why = "no user and mount namespaces here (unshare failed)";
		close(fds[0]);
		goto err_kill;
	}
	close(fds[0]);
	return true;

err_kill:
	if (ns.pid > 0) {
		kill(ns.pid, SIGKILL);
		waitpid(ns.pid, NULL, 0);
	}
err_rmdir:
	rmdir(ns.dir);
	return false;
}

static void test_container_root(void)
{
	struct symbolizer *s = symbolizer__new();
	struct sym_frame out;

	CHECK(access(ns.lib, F_OK) && errno == ENOENT, "not in our namespace",
	      "%s is visible here", ns.lib);
	if (!CHECK(s, "new", "errno %d", errno))
		goto out;
	CHECK_EQ(symbolizer__resolve(s, ns.pid, &ns.addr, 1, &out), 0, "resolve");
	CHECK(streq(out.func, "td_init"), "func", "got %s", str(out.func));
	CHECK(streq(out.module, "libumtcopy.so"), "module", "got %s", str(out.module));
	symbolizer__forget(s, ns.pid);
out:
	symbolizer__free(s);
	kill(ns.pid, SIGKILL);
	waitpid(ns.pid, NULL, 0);
	rmdir(ns.dir);
}

/* Not a pass/fail criterion: the figure for the record. */
static void test_timing(void)
{
	enum { FRAMES = 10, ROUNDS = 200000 };
	struct symbolizer *s = symbolizer__new();
	const void *fns[FRAMES] = {
		sym_test_alpha, sym_test_beta, sym_test_mangled, getpid, qsort,
		malloc, free, fork, memcmp, strtoull,
	};
	struct sym_frame out[FRAMES];
	uint64_t addrs[FRAMES];
	struct timespec a, b;
	double ns_per;
	int i;

	if (!CHECK(s, "new", "errno %d", errno))
		return;
	for (i = 0; i < FRAMES; i++)
		addrs[i] = addr_of(fns[i], 8);
	CHECK_EQ(symbolizer__resolve(s, getpid(), addrs, FRAMES, out), 0, "warm");
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (i = 0; i < ROUNDS; i++)
		symbolizer__resolve(s, getpid(), addrs, FRAMES, out);
	clock_gettime(CLOCK_MONOTONIC, &b);
	ns_per = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / ROUNDS;
	printf("  timing: %.0f ns per %d-frame stack of a cached pid\n", ns_per, FRAMES);
	symbolizer__free(s);
}

int main(void)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n > 0) {
		exe[n] = '\0';
		snprintf(self_name, sizeof(self_name), "%s", basename(exe));
	}
	fake_lib = getenv("UMT_FAKE_LIBCUDA");
	setvbuf(stdout, NULL, _IOLBF, 0);
	RUN_SUBTEST(test_local_functions);
	RUN_SUBTEST(test_libc);
	RUN_SUBTEST(test_demangle);
	RUN_SUBTEST(test_garbage);
	RUN_SUBTEST(test_vdso);
	RUN_SUBTEST(test_gone_pid);
	RUN_SUBTEST(test_first_look_then_gone);
	RUN_SUBTEST(test_child_forget);
	RUN_SUBTEST(test_forget_then_gone);
	RUN_SUBTEST(test_dlopen_refresh);
	if (fake_lib && !access(fake_lib, R_OK)) {
		RUN_SUBTEST(test_fake_libcuda);
		RUN_SUBTEST(test_unnamed_frame_offset);
	} else {
		SKIP_SUBTEST(test_fake_libcuda, "UMT_FAKE_LIBCUDA not set or not built");
		SKIP_SUBTEST(test_unnamed_frame_offset, "UMT_FAKE_LIBCUDA not set or not built");
	}
	RUN_SUBTEST(test_perf_map);
	RUN_SUBTEST(test_eviction);
	if (ns_start())
		RUN_SUBTEST(test_container_root);
	else
		SKIP_SUBTEST(test_container_root, ns.why);
	RUN_SUBTEST(test_timing);
	return CHECK_EXIT();
}
