// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * guard_config: the file, the command-line override, the scope and the
 * protected list. `test_guard_config --load FILE` loads one file and says
 * "ok" or why not (for tests/integration/test_guard_files.py).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "check.h"
#include "guardd/config.h"

#define GIB (1ULL << 30)

static char dir[] = "/tmp/umtrace-test-cfg-XXXXXX";

/* Write len bytes of text to dir/name with mode; its path. */
static const char *put(const char *name, const char *text, size_t len, mode_t mode)
{
	static char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len || fchmod(fd, mode))
		printf("  cannot write %s\n", path);
	if (fd >= 0)
		close(fd);
	return path;
}

struct file_case {
	const char *name;
	const char *text;
	size_t len;		/* 0: strlen(text) */
	const char *want;	/* the message after "PATH:", NULL: loads */
};

#define T(n, t, w) { n, t, 0, w }
#define B(n, t, w) { n, t, sizeof(t) - 1, w }

static const struct file_case file_cases[] = {
	T("empty", "", NULL),
	T("comments only", "# nothing set\n; nor here\n\n[guard]\n", NULL),
	T("top level", "floor = 1G\nlow=2G\n", NULL),
	T("indented and inline comment", "[guard]\n  floor = 1G ; one\n\tlow = 2G\n", NULL),
	T("CRLF", "[guard]\r\nfloor = 1G\r\nlow = 2G\r\n", NULL),
	T("BOM", "\xef\xbb\xbf[guard]\nfloor = 1G\n", NULL),
	T("no final newline", "floor = 1G", NULL),
	T("unknown key", "[guard]\nflorr = 1G\n", "2: unknown key 'florr'"),
	T("near key", "dry-run = true\n", "1: unknown key 'dry-run' (did you mean dry_run?)"),
	T("duplicate key", "floor = 1G\nlow = 2G\nfloor = 2G\n",
	  "3: duplicate key 'floor' (first on line 1)"),
	T("duplicate across sections", "floor = 1G\n[guard]\nfloor = 1G\n",
	  "3: duplicate key 'floor' (first on line 1)"),
	T("bad unit", "# c\nfloor = 2X\n",
	  "2: invalid floor '2X': expected a size (2G, 1536M, 4096) or a percentage of MemTotal (5%, 2.5%)"),
	T("bad percent", "low = 101%\n",
	  "1: invalid low '101%': a percentage of MemTotal must be above 0 and below 100"),
	T("hash is no inline comment", "drop = 2G # two\n",
	  "1: invalid drop '2G # two': expected a size (2G, 1536M, 4096) or a percentage of MemTotal (5%, 2.5%)"),
	T("empty value", "on_stop =\n", "1: invalid on_stop: empty value"),
	T("bad metric", "metric = used\n", "1: invalid metric 'used': expected available or free"),
	T("bad action", "action = kill\n", "1: invalid action 'kill': expected stop or freeze"),
	T("bad bool", "dry_run = maybe\n", "1: invalid dry_run 'maybe': expected true or false"),
	T("bad page_programs", "page_programs = never\n",
	  "1: invalid page_programs 'never': expected auto or always"),
	T("bad scope", "scope = pid:12,x\n", "1: invalid scope 'pid:12,x': 'x' is not a pid"),
	T("relative path", "postmortem_dir = var/pm\n",
	  "1: invalid postmortem_dir 'var/pm': expected an absolute path"),
	T("relative libcuda", "libcuda = libcuda.so.1\n",
	  "1: invalid libcuda 'libcuda.so.1': expected an absolute path"),
	T("not .prom", "metrics_file = /var/lib/m.txt\n",
	  "1: invalid metrics_file '/var/lib/m.txt': node_exporter reads only files named *.prom"),
	T("unknown section", "floor = 1G\n[other]\nlow = 2G\n",
	  "3: unknown section [other]: keys go in [guard] or before any section"),
	T("no equals", "[guard]\nfloor 2G\n", "2: expected 'key = value', '[guard]' or a comment"),
	T("unclosed section", "[guard\nfloor = 2G\n",
	  "1: expected 'key = value', '[guard]' or a comment"),
	T("no continuation lines", "on_stop = /bin/a\n  --flag\n",
	  "2: expected 'key = value', '[guard]' or a comment"),
	T("syntax error first", "floor 2G\nflorr = 1G\n",
	  "1: expected 'key = value', '[guard]' or a comment"),
	B("binary", "\x7f" "ELF\x02\x01\x01\0\0\0", "1: binary data (byte 0x7f), not a config file"),
	B("NUL on line 2", "floor = 1G\nlow\0 = 2G\n", "2: binary data (byte 0x00), not a config file"),
	T("lone CR", "floor = 1G\rlow = 2G\n", "1: binary data (byte 0x0d), not a config file"),
	T("empty protected name", "protect = a,,b\n",
	  "1: invalid protect 'a,,b': an empty entry"),
	T("protected path as a name", "protect = /usr/sbin/sshd\n",
	  "1: invalid protect '/usr/sbin/sshd': '/usr/sbin/sshd' is no process name (for a path, exe:/usr/sbin/sshd)"),
	T("relative exe", "protect = exe:sshd\n",
	  "1: invalid protect 'exe:sshd': exe: needs an absolute path"),
	T("bad uid", "protect = uid:-1\n",
	  "1: invalid protect 'uid:-1': '-1' is not a uid or a user"),
	T("root cgroup", "protect = cgroup:/sys/fs/cgroup\n",
	  "1: invalid protect 'cgroup:/sys/fs/cgroup': the root cgroup holds every process"),
	T("cgroup up", "protect = cgroup:a/../b\n",
	  "1: invalid protect 'cgroup:a/../b': '.' and '..' are not allowed in a cgroup path"),
};

static void test_file_cases(void)
{
	char err[512], want[512];
	struct guard_config cfg;
	const char *path;
	size_t i;
	int ret;

	for (i = 0; i < sizeof(file_cases) / sizeof(file_cases[0]); i++) {
		const struct file_case *c = &file_cases[i];

		path = put("case.conf", c->text, c->len ? c->len : strlen(c->text), 0644);
		guard_config__init(&cfg);
		err[0] = '\0';
		ret = guard_config__load(&cfg, path, err, sizeof(err));
		if (!c->want) {
			CHECK(!ret, c->name, "ret %d: %s", ret, err);
		} else {
			snprintf(want, sizeof(want), "%s:%s", path, c->want);
			CHECK(ret < 0 && !strcmp(err, want), c->name, "ret %d\n    got  '%s'\n    want '%s'",
			      ret, err, want);
		}
		guard_config__free(&cfg);
	}
}

static void test_long_line(void)
{
	char text[400], err[512], want[512];
	struct guard_config cfg;
	const char *path;

	memset(text, 'x', sizeof(text));
	memcpy(text, "on_stop = ", 10);
	path = put("long.conf", text, sizeof(text), 0644);
	guard_config__init(&cfg);
	snprintf(want, sizeof(want), "%s:1: line too long (at most ", path);
	CHECK(guard_config__load(&cfg, path, err, sizeof(err)) == -EINVAL &&
	      !strncmp(err, want, strlen(want)), "long", "got '%s'", err);
	guard_config__free(&cfg);
}

static void test_good_file(void)
{
	static const char text[] =
		"# umtrace guard\n"
		"[guard]\n"
		"floor = 2G\n"
		"low = 5%\n"
		"drop = 1536M\n"
		"metric = free\n"
		"action = freeze\n"
		"scope = cgroup:/sys/fs/cgroup/jobs.slice/\n"
		"protect = sshd, Xorg,  my-daemon\n"
		"protect = slurmstepd\n"
		"dry_run = Yes\n"
		"page_programs = always\n"
		"auto_resume = 10%\n"
		"on_stop = /usr/local/bin/notify --host a;b\n"
		"postmortem_dir = /var/lib/umtrace/postmortem\n"
		"metrics_file = /var/lib/node_exporter/textfile/umtrace.prom\n"
		"libcuda = /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
		"libcuda = /opt/a/libcuda.so.1\n";
	struct guard_config cfg;
	struct guard_policy p;
	const struct protect_entry *v;
	char err[512] = "";

	guard_config__init(&cfg);
	CHECK(!guard_config__load(&cfg, put("good.conf", text, strlen(text), 0600), err,
				  sizeof(err)), "load", "%s", err);
	CHECK(cfg.floor && !strcmp(cfg.floor, "2G"), "floor", "%s", cfg.floor);
	CHECK(cfg.low && !strcmp(cfg.low, "5%"), "low", "%s", cfg.low);
	CHECK(cfg.drop && !strcmp(cfg.drop, "1536M"), "drop", "%s", cfg.drop);
	CHECK_EQ(cfg.metric, GUARD_METRIC_FREE, "metric");
	CHECK_EQ(cfg.action, GUARD_ACT_FREEZE, "action");
	CHECK(cfg.scope.kind == UMT_SCOPE_CGROUP && !strcmp(cfg.scope.cgroup, "jobs.slice"),
	      "scope", "kind %d", cfg.scope.kind);
	/* No name is built in: the built-ins are executables (guardd/protect.c). */
	v = cfg.protect.v;
	CHECK_EQ(cfg.protect.n, 4, "protect");
	CHECK(cfg.protect.n == 4 && !strcmp(v[0].arg, "sshd") && !strcmp(v[1].arg, "Xorg") &&
	      !strcmp(v[2].arg, "my-daemon") && !strcmp(v[3].arg, "slurmstepd") &&
	      v[3].kind == PROTECT_NAME, "protect", "wrong names");
	CHECK(cfg.dry_run, "dry_run", "not set");
	CHECK(cfg.pages_always, "page_programs", "not always");
	CHECK(cfg.auto_resume && !strcmp(cfg.auto_resume, "10%"), "auto_resume", "%s",
	      cfg.auto_resume);
	CHECK(cfg.on_stop && !strcmp(cfg.on_stop, "/usr/local/bin/notify --host a;b"), "on_stop",
	      "%s", cfg.on_stop);
	CHECK(cfg.postmortem_dir && !strcmp(cfg.postmortem_dir, "/var/lib/umtrace/postmortem"),
	      "postmortem_dir", "%s", cfg.postmortem_dir);
	CHECK(cfg.metrics_file &&
	      !strcmp(cfg.metrics_file, "/var/lib/node_exporter/textfile/umtrace.prom"),
	      "metrics_file", "%s", cfg.metrics_file);
	CHECK(cfg.n_libcuda == 2 && !strcmp(cfg.libcuda[1], "/opt/a/libcuda.so.1"), "libcuda",
	      "%zu", cfg.n_libcuda);

	CHECK(!guard_config__policy(&cfg, 64 * GIB, &p, err, sizeof(err)), "policy", "%s", err);
	CHECK(p.floor == 2 * GIB && p.low == 64 * GIB / 20 && p.drop == 1536ULL << 20 &&
	      p.auto_resume_above == 64 * GIB / 10 && p.metric == GUARD_METRIC_FREE, "policy",
	      "wrong values");
	/* The same file on a host where 5% is under the 2G floor. */
	CHECK(guard_config__policy(&cfg, 32 * GIB, &p, err, sizeof(err)) == -EINVAL &&
	      !strcmp(err, "floor 2G must be below low 5% (1.6G)"), "policy 32G", "got '%s'", err);

	guard_config__free(&cfg);
}

static void test_cli_override(void)
{
	static const char text[] =
		"floor = 2G\nmetric = free\nscope = pid:10\nlibcuda = /a/libcuda.so.1\n"
		"libcuda = /b/libcuda.so.1\nprotect = Xorg\nauto_resume = 10G\n";
	struct guard_config cfg;
	char err[512] = "";

	guard_config__init(&cfg);
	CHECK(!guard_config__load(&cfg, put("cli.conf", text, strlen(text), 0644), err,
				  sizeof(err)), "load", "%s", err);
	CHECK(!guard_config__set(&cfg, "floor", "3G", err, sizeof(err)) &&
	      !strcmp(cfg.floor, "3G"), "floor replaced", "%s", err);
	CHECK(!guard_config__set(&cfg, "metric", "available", err, sizeof(err)) &&
	      cfg.metric == GUARD_METRIC_AVAILABLE, "metric replaced", "%s", err);
	CHECK(!guard_config__set(&cfg, "scope", "comm:^python", err, sizeof(err)) &&
	      cfg.scope.kind == UMT_SCOPE_COMM, "scope replaced", "%s", err);
	CHECK(!guard_config__set(&cfg, "dry-run", NULL, err, sizeof(err)) && cfg.dry_run,
	      "bare flag", "%s", err);
	CHECK(!guard_config__set(&cfg, "libcuda", "rel/libcuda.so.1", err, sizeof(err)) &&
	      cfg.n_libcuda == 1 && !strcmp(cfg.libcuda[0], "rel/libcuda.so.1"),
	      "first --libcuda replaces the list", "%zu %s", cfg.n_libcuda, err);
	CHECK(!guard_config__set(&cfg, "libcuda", "/c/libcuda.so.1", err, sizeof(err)) &&
	      cfg.n_libcuda == 2, "second adds", "%zu", cfg.n_libcuda);
	CHECK(!guard_config__set(&cfg, "protect", "slurmd, uid:0", err, sizeof(err)) &&
	      cfg.protect.n == 3, "protect adds", "%zu", cfg.protect.n);
	CHECK(!guard_config__set(&cfg, "auto-resume", "off", err, sizeof(err)) &&
	      !cfg.auto_resume, "auto-resume off", "%s", err);
	CHECK(!guard_config__set(&cfg, "metrics-file", "m.prom", err, sizeof(err)) &&
	      !strcmp(cfg.metrics_file, "m.prom"), "relative on the command line", "%s", err);

	CHECK(guard_config__set(&cfg, "metric", "bogus", err, sizeof(err)) == -EINVAL &&
	      !strcmp(err, "invalid --metric 'bogus': expected available or free"), "bad metric",
	      "got '%s'", err);
	CHECK(cfg.metric == GUARD_METRIC_AVAILABLE, "kept", "changed");
	CHECK(guard_config__set(&cfg, "low", "2.5.5%", err, sizeof(err)) == -EINVAL &&
	      !strncmp(err, "invalid --low '2.5.5%': expected", 32), "bad low", "got '%s'", err);
	CHECK(guard_config__set(&cfg, "floor", "", err, sizeof(err)) == -EINVAL &&
	      !strcmp(err, "invalid --floor: empty value"), "empty", "got '%s'", err);
	CHECK(!strcmp(cfg.floor, "3G"), "floor kept", "%s", cfg.floor);
	CHECK(guard_config__set(&cfg, "bogus", "1", err, sizeof(err)) == -EINVAL &&
	      !strcmp(err, "unknown option --bogus"), "unknown", "got '%s'", err);
	CHECK(guard_config__set(&cfg, "scope", "cgroup:../x", err, sizeof(err)) == -EINVAL &&
	      !strcmp(err, "invalid --scope 'cgroup:../x': '.' and '..' are not allowed in a cgroup path"),
	      "scope", "got '%s'", err);
	CHECK(cfg.scope.kind == UMT_SCOPE_COMM, "scope kept", "kind %d", cfg.scope.kind);
	guard_config__free(&cfg);
}

/* --warn-eta, --warn-signal: durations and the signals a trainer catches. */
static void test_warn(void)
{
	static const char text[] = "warn_eta = 30m\nwarn_signal = SIGUSR2\non_warn = logger x\n";
	struct guard_config cfg;
	char err[512] = "";

	guard_config__init(&cfg);
	CHECK(!cfg.warn_eta_ms && !cfg.warn_signal && !cfg.on_warn, "off by default", "%llu",
	      (unsigned long long)cfg.warn_eta_ms);
	CHECK(!guard_config__load(&cfg, put("warn.conf", text, strlen(text), 0644), err,
				  sizeof(err)), "load", "%s", err);
	CHECK(cfg.warn_eta_ms == 1800000 && cfg.warn_signal == SIGUSR2 &&
	      !strcmp(cfg.on_warn, "logger x"), "the file", "%llu %d",
	      (unsigned long long)cfg.warn_eta_ms, cfg.warn_signal);
	CHECK(!guard_config__set(&cfg, "warn-eta", "2h", err, sizeof(err)) &&
	      cfg.warn_eta_ms == 7200000, "2h", "%s", err);
	CHECK(!guard_config__set(&cfg, "warn-signal", "usr1", err, sizeof(err)) &&
	      cfg.warn_signal == SIGUSR1 && !strcmp(guard_config__signal_name(SIGUSR1), "USR1"),
	      "usr1", "%s", err);
	CHECK(guard_config__set(&cfg, "warn-signal", "KILL", err, sizeof(err)) == -EINVAL &&
	      !strcmp(err, "invalid --warn-signal 'KILL': expected USR1, USR2, HUP, INT, TERM or off"),
	      "no KILL", "got '%s'", err);
	CHECK(guard_config__set(&cfg, "warn-signal", "STOP", err, sizeof(err)) == -EINVAL &&
	      cfg.warn_signal == SIGUSR1, "no STOP, kept", "%d", cfg.warn_signal);
	CHECK(guard_config__set(&cfg, "warn-eta", "0.5s", err, sizeof(err)) == -EINVAL &&
	      !strncmp(err, "invalid --warn-eta '0.5s': expected a duration", 45) &&
	      cfg.warn_eta_ms == 7200000, "too short, kept", "got '%s'", err);
	CHECK(guard_config__set(&cfg, "warn-eta", "8d", err, sizeof(err)) == -EINVAL,
	      "no unit d", "got '%s'", err);
	CHECK(guard_config__set(&cfg, "warn-eta", "200h", err, sizeof(err)) == -EINVAL,
	      "over 7 days", "got '%s'", err);
	CHECK(!guard_config__set(&cfg, "warn-eta", "off", err, sizeof(err)) && !cfg.warn_eta_ms &&
	      !guard_config__set(&cfg, "warn-signal", "off", err, sizeof(err)) &&
	      !cfg.warn_signal, "off", "%s", err);
	guard_config__free(&cfg);
}

static void test_file_checks(void)
{
	struct guard_config cfg;
	char err[512], want[512];
	const char *path;
	int ret;

	guard_config__init(&cfg);
	path = put("gw.conf", "floor = 1G\n", 11, 0664);
	snprintf(want, sizeof(want),
		 "%s: writable by group or others, and umtrace runs its on_stop and on_warn as root (chmod go-w %s)",
		 path, path);
	ret = guard_config__load(&cfg, path, err, sizeof(err));
	CHECK(ret == -EPERM && !strcmp(err, want), "group-writable", "ret %d '%s'", ret, err);
	CHECK(!cfg.floor, "nothing read", "%s", cfg.floor);

	snprintf(want, sizeof(want), "%s/missing.conf", dir);
	ret = guard_config__load(&cfg, want, err, sizeof(err));
	strcat(want, ": No such file or directory");
	CHECK(ret == -ENOENT && !strcmp(err, want), "missing", "ret %d '%s'", ret, err);

	snprintf(want, sizeof(want), "%s: not a regular file", dir);
	ret = guard_config__load(&cfg, dir, err, sizeof(err));
	CHECK(ret == -EINVAL && !strcmp(err, want), "directory", "ret %d '%s'", ret, err);

	/* A real binary, as someone might pass by mistake. */
	ret = guard_config__load(&cfg, "/proc/self/exe", err, sizeof(err));
	CHECK(ret == -EINVAL && !strcmp(err, "/proc/self/exe:1: binary data (byte 0x7f), not a config file"),
	      "executable", "ret %d '%s'", ret, err);
	guard_config__free(&cfg);
}

static void scope_bad(const char *spec, const char *want)
{
	struct guard_scope sc = { .kind = UMT_SCOPE_ALL };
	char err[256] = "";
	int ret = guard_scope__parse(&sc, spec, NULL, err, sizeof(err));

	CHECK(ret == -EINVAL && !strncmp(err, want, strlen(want)), spec, "ret %d '%s'", ret, err);
	CHECK(sc.kind == UMT_SCOPE_ALL && !sc.spec, spec, "changed on failure");
	guard_scope__free(&sc);
}

static void test_scope(void)
{
	struct guard_scope sc = { .kind = UMT_SCOPE_ALL };
	char err[256] = "", many[512] = "pid:";
	int i;

	CHECK(guard_scope__match(&sc, 5, "x", NULL), "default all", "no match");
	CHECK(!guard_scope__parse(&sc, "all", NULL, err, sizeof(err)) && sc.kind == UMT_SCOPE_ALL &&
	      guard_scope__match(&sc, 5, NULL, NULL), "all", "%s", err);

	CHECK(!guard_scope__parse(&sc, "pid:1,22,333", NULL, err, sizeof(err)), "pids", "%s", err);
	CHECK(sc.n_pids == 3 && guard_scope__match(&sc, 22, "x", "/a") &&
	      !guard_scope__match(&sc, 4, "x", "/a"), "pids", "match");
	CHECK(!strcmp(sc.spec, "pid:1,22,333"), "spec", "%s", sc.spec);

	CHECK(!guard_scope__parse(&sc, "cgroup:/sys/fs/cgroup/jobs.slice/", NULL, err, sizeof(err)) &&
	      !strcmp(sc.cgroup, "jobs.slice"), "absolute", "%s %s", err, sc.cgroup);
	CHECK(guard_scope__match(&sc, 5, "x", "/jobs.slice"), "itself", "no");
	CHECK(guard_scope__match(&sc, 5, "x", "/jobs.slice/job1.scope"), "below", "no");
	CHECK(guard_scope__match(&sc, 5, "x", "jobs.slice/job1.scope"), "no slash", "no");
	CHECK(!guard_scope__match(&sc, 5, "x", "/jobs.slicex"), "prefix only", "matched");
	CHECK(!guard_scope__match(&sc, 5, "x", "/user.slice"), "elsewhere", "matched");
	CHECK(!guard_scope__match(&sc, 5, "x", "/"), "root", "matched");
	CHECK(!guard_scope__match(&sc, 5, "x", NULL), "unknown", "matched");
	CHECK(!guard_scope__parse(&sc, "cgroup:jobs.slice//a/", NULL, err, sizeof(err)) &&
	      !strcmp(sc.cgroup, "jobs.slice/a"), "relative", "%s %s", err, sc.cgroup);
	CHECK(!guard_scope__parse(&sc, "cgroup:/sys/fs/cgroup", NULL, err, sizeof(err)) &&
	      !strcmp(sc.cgroup, "") && guard_scope__match(&sc, 5, "x", "/") &&
	      guard_scope__match(&sc, 5, "x", "/a/b"), "the root", "%s", err);

	CHECK(!guard_scope__parse(&sc, "comm:^python", NULL, err, sizeof(err)), "comm", "%s", err);
	CHECK(guard_scope__match(&sc, 5, "python3", NULL), "python3", "no");
	CHECK(!guard_scope__match(&sc, 5, "ipython", NULL), "anchored", "matched");
	CHECK(!guard_scope__match(&sc, 5, NULL, NULL), "no comm", "matched");
	CHECK(!guard_scope__parse(&sc, "comm:train|infer", NULL, err, sizeof(err)) &&
	      guard_scope__match(&sc, 5, "my_infer", NULL), "extended", "%s", err);

	/* A failed parse leaves the old scope alone. */
	CHECK(guard_scope__parse(&sc, "pid:x", NULL, err, sizeof(err)) == -EINVAL &&
	      sc.kind == UMT_SCOPE_COMM && guard_scope__match(&sc, 5, "infer", NULL), "kept",
	      "kind %d", sc.kind);
	guard_scope__free(&sc);

	scope_bad("bogus", "invalid scope 'bogus': expected gpu, all, pid:LIST, cgroup:PATH or comm:REGEX");
	scope_bad("", "invalid scope '': expected gpu, all");
	scope_bad("pid:", "invalid scope 'pid:': '' is not a pid");
	scope_bad("pid:1,,2", "invalid scope 'pid:1,,2': '' is not a pid");
	scope_bad("pid:0", "invalid scope 'pid:0': '0' is not a pid");
	scope_bad("pid:-3", "invalid scope 'pid:-3': '-3' is not a pid");
	scope_bad("pid:99999999999", "invalid scope 'pid:99999999999': '99999999999' is not a pid");
	scope_bad("cgroup:", "invalid scope 'cgroup:': cgroup: needs a path");
	scope_bad("cgroup:/user.slice",
		  "invalid scope 'cgroup:/user.slice': a cgroup path must be under /sys/fs/cgroup or relative to it");
	scope_bad("cgroup:/sys/fs/cgroupx/a", "invalid scope 'cgroup:/sys/fs/cgroupx/a': a cgroup path must be under");
	scope_bad("cgroup:a/../../b", "invalid scope 'cgroup:a/../../b': '.' and '..' are not allowed");
	scope_bad("cgroup:./a", "invalid scope 'cgroup:./a': '.' and '..' are not allowed");
	scope_bad("comm:", "invalid scope 'comm:': comm: needs a regular expression");
	scope_bad("comm:(", "invalid scope 'comm:(': ");
	/* what regcomp() would spell out: 131 MB at this depth, GBs at one more */
	scope_bad("comm:(((c|){16}){16}){16}",
		  "invalid scope 'comm:(((c|){16}){16}){16}': repeats nested too deep or too long");
	scope_bad("comm:c++", "invalid scope 'comm:c++': a quantifier on a quantifier");
	CHECK(!guard_scope__parse(&sc, "comm:^([a-z]+_[0-9]{1,4}|(py|tr){2})$", NULL, err,
				  sizeof(err)), "a name's regex still fits", "%s", err);
	guard_scope__free(&sc);
	for (i = 1; i <= GUARD_SCOPE_MAX_PIDS + 1; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "%s%d", i > 1 ? "," : "", i);
	scope_bad(many, "invalid scope 'pid:1,2,3");
}

/* Many entries: refused past the cap, and then the list is as it was. */
static void test_protect_cap(void)
{
	struct guard_config cfg;
	char list[1024] = "", err[256] = "";
	int i;

	guard_config__init(&cfg);
	for (i = 0; i < PROTECT_MAX; i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%sd%d", i ? "," : "", i);
	CHECK(!guard_config__set(&cfg, "protect", list, err, sizeof(err)), "up to the cap",
	      "%s", err);
	CHECK(guard_config__set(&cfg, "protect", "x,y", err, sizeof(err)) == -EINVAL &&
	      strstr(err, "at most 64 entries"), "past the cap", "%s", err);
	CHECK_EQ(cfg.protect.n, PROTECT_MAX, "unchanged after a refusal");
	guard_config__free(&cfg);
}

static void cleanup(void)
{
	static const char *const names[] = { "case.conf", "long.conf", "good.conf", "cli.conf",
					      "gw.conf", "warn.conf" };
	char path[256];
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
}

static int load_one(const char *path)
{
	struct guard_config cfg;
	char err[512];
	int ret;

	guard_config__init(&cfg);
	ret = guard_config__load(&cfg, path, err, sizeof(err));
	if (ret)
		printf("%s\n", err);
	else
		printf("ok\n");
	guard_config__free(&cfg);
	return ret ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--load"))
		return load_one(argv[2]);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	RUN_SUBTEST(test_file_cases);
	RUN_SUBTEST(test_long_line);
	RUN_SUBTEST(test_good_file);
	RUN_SUBTEST(test_cli_override);
	RUN_SUBTEST(test_warn);
	RUN_SUBTEST(test_file_checks);
	RUN_SUBTEST(test_scope);
	RUN_SUBTEST(test_protect_cap);
	cleanup();
	return CHECK_EXIT();
}
