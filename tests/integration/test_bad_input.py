# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Bad input, one row per case: adding a case is adding one line.

Every case must end within CASE_TIMEOUT seconds with its exit code (1: a
runtime error, 2: a usage error), print exactly one line on stderr, an
error starting 'umtrace: ' that holds the row's word (no warning beside
it: README says every error is one line), print nothing on stdout, never
crash (no signal, no rc 134/139, no sanitizer report) and leave its
directory {d} as it found it: no partial output file, no file destroyed.

A row is (argv, exit code, word). argv is what follows `umtrace`, its
items formatted with the fixtures below ({d}: the case's own empty
directory, {fake}: the fake libcuda, {cfg_...}, {rec_...}, {elf_...}:
files made once, {gone}: a pid no process has). It may start with a
wrapper: '@nobody' runs it as nobody, '@nobpf' as root without CAP_BPF,
CAP_PERFMON and CAP_SYS_ADMIN (setpriv, util-linux).

Decisions the table documents:
- A pid that exits while umtrace attaches ({exiting_pid}: `sleep 0.3`
  started just before) ends the session like any -p session whose
  processes are gone: exit 0 with the summary. Gone before umtrace looked,
  it is 'no process with pid' (exit 1). Which of the two happens is a race;
  either is right, a hang is not. Rows whose code is a tuple allow each.
- Config file mistakes are usage errors (2), as a bad flag is; an empty
  config file is valid (VALID below). A config file anyone but root may
  write, or one owned by another user, is refused: it names a command the
  guard runs as root.
- A recording that is empty, not a recording, of a future format version
  or cut inside its header is an error (1).
"""
import os
import shutil
import struct
import subprocess
import tempfile
import time
import zlib

from harness import Skip, wait_line

CASE_TIMEOUT = 15

# Keeps a guard row off the host's /run/umtrace and /sys/fs/bpf.
G = ["--no-pin", "--state-file", "{d}/guard.state", "--platform", "unified"]

CASES = [
    # argv (after `umtrace`), exit code, a word the one stderr line holds
    (["bogus"], 2, "unknown command"),
    (["--bogus"], 2, "unknown command"),
    (["help", "bogus"], 2, "unknown command"),
    # unknown options, each command
    (["trace", "--bogus"], 2, "unknown option '--bogus'"),
    (["trace", "-Z"], 2, "unknown option '-Z'"),
    (["report", "--bogus"], 2, "unknown option"),
    (["report", "-Z"], 2, "unknown option"),
    (["top", "--bogus"], 2, "unknown option"),
    (["top", "-Z"], 2, "unknown option"),
    (["record", "-o", "{d}/x.umt", "--bogus"], 2, "unknown option"),
    (["record", "-Z"], 2, "unknown option"),
    (["guard", "--bogus"], 2, "unknown option"),
    (["guard", "-Z"], 2, "unknown option"),
    (["status", "--bogus"], 2, "unknown option"),
    (["status", "-Z"], 2, "unknown option"),
    (["resume", "--bogus"], 2, "unknown option"),
    (["resume", "-Z"], 2, "unknown option"),
    # missing values
    (["trace", "--ringbuf-size"], 2, "needs a value"),
    (["trace", "-p"], 2, "needs a value"),
    (["trace", "--libcuda"], 2, "needs a value"),
    (["top", "-p"], 2, "needs a value"),
    (["top", "-i"], 2, "needs a value"),
    (["report", "-d"], 2, "needs a value"),
    (["record", "-o"], 2, "needs a value"),
    (["record", "-o", "{d}/x.umt", "-i"], 2, "needs a value"),
    (["guard", "--floor"], 2, "needs a value"),
    (["guard", "--config"], 2, "needs a value"),
    (["status", "--state-file"], 2, "needs a value"),
    (["resume", "--state-file"], 2, "needs a value"),
    (["trace", "--libcuda", ""], 2, "--libcuda"),
    (["record", "-o", ""], 2, "-o"),
    # sizes, durations, numbers: junk, negative, out of range
    (["trace", "--ringbuf-size", "abc"], 2, "--ringbuf-size"),
    (["trace", "--ringbuf-size", "-5M"], 2, "--ringbuf-size"),
    (["trace", "--ringbuf-size", "99999999999999999999G"], 2, "--ringbuf-size"),
    (["trace", "--ringbuf-size", "16E"], 2, "--ringbuf-size"),
    (["trace", "--ringbuf-size", "2G"], 2, "--ringbuf-size"),
    (["trace", "--ringbuf-size", "1K"], 2, "--ringbuf-size"),
    (["trace", "--ringbuf-size", "4K "], 2, "--ringbuf-size"),
    (["trace", "--ringbuf-size", "%"], 2, "--ringbuf-size"),
    (["guard", "--floor", "101%"], 2, "--floor"),
    (["guard", "--floor", "100%"], 2, "--floor"),
    (["guard", "--floor", "%"], 2, "--floor"),
    (["guard", "--floor", "-5M"], 2, "--floor"),
    (["guard", "--floor", "0"], 2, "--floor"),
    (["guard", "--floor", "99999999999999999999G"], 2, "--floor"),
    (["guard", "--floor", "1e3M"], 2, "--floor"),
    (["guard", "--low", "abc"], 2, "--low"),
    (["guard", "--drop", "-1G"], 2, "--drop"),
    (["guard", "--auto-resume", "5Q"], 2, "--auto-resume"),
    (["guard", "--flight-seconds", "1e99"], 2, "--flight-seconds"),
    (["report", "--duration", "1e99"], 2, "--duration"),
    (["report", "--duration", "0"], 2, "--duration"),
    (["report", "--duration", "-1s"], 2, "--duration"),
    (["report", "--duration", "nan"], 2, "--duration"),
    (["record", "-o", "{d}/x.umt", "--duration", "1e99"], 2, "--duration"),
    (["record", "-o", "{d}/x.umt", "-i", "10ms"], 2, "--interval"),
    (["top", "-i", "1e99"], 2, "--interval"),
    (["top", "-i", "inf"], 2, "--interval"),
    (["trace", "--rescan", "1e99"], 2, "--rescan"),
    (["trace", "--rescan", "0x10"], 2, "--rescan"),
    (["trace", "--rescan", "10ms"], 2, "--rescan"),
    (["trace", "-p", "abc"], 2, "invalid pid"),
    (["trace", "-p", "-5"], 2, "invalid pid"),
    (["trace", "-p", "0"], 2, "invalid pid"),
    (["trace", "-p", "1,,x"], 2, "invalid pid"),
    (["trace", "-p", "99999999999999999999"], 2, "invalid pid"),
    (["resume", "abc"], 2, "not a process id"),
    # other values
    (["trace", "--platform", "gb10"], 2, "--platform"),
    (["trace", "--device-nodes", "1-"], 2, "--device-nodes"),
    (["trace", "--device-nodes", "4096"], 2, "--device-nodes"),
    (["trace", "--device-nodes", "1023"], 2, "no NUMA node 1023"),
    (["report", "--stack", "lbr"], 2, "--stack"),
    (["top", "--sort", "size"], 2, "--sort"),
    (["guard", "--metric", "used"], 2, "--metric"),
    (["guard", "--action", "kill"], 2, "--action"),
    (["guard", "--scope", "pid:abc"], 2, "--scope"),
    (["guard", "--scope", "comm:("], 2, "--scope"),
    # arguments that do not go together
    (["trace", "-p", "1", "--", "true"], 2, "either -p PID or a COMMAND"),
    (["record"], 2, "-o FILE is required"),
    (["record", "-o", "{d}/x.umt", "extra"], 2, "unexpected argument"),
    (["top", "extra"], 2, "unexpected argument"),
    (["guard", "extra"], 2, "unexpected argument"),
    (["guard", "-p", "1"], 2, "--scope pid"),
    (["report", "{d}/a.umt", "{d}/b.umt"], 2, "unexpected argument"),
    (["resume"], 2, "--all"),
    # processes
    (["trace", "-p", "{gone}", "--libcuda", "{fake}"], 1, "no process with pid"),
    (["top", "--once", "-p", "{gone}", "--libcuda", "{fake}"], 1, "no process with pid"),
    (["record", "-o", "{d}/x.umt", "-p", "{gone}", "--libcuda", "{fake}"], 1,
     "no process with pid"),
    (["trace", "-p", "{exiting_pid}", "--libcuda", "{fake}"], (0, 1), "no process with pid"),
    (["resume", "--state-file", "{d}/none", "{gone}"], 1, "no process"),
    (["status", "--state-file", "{d}/none"], 1, "no guard state"),
    # --libcuda files
    (["trace", "--libcuda", "/nonexistent/libcuda.so.1"], 1, "No such file"),
    (["trace", "--libcuda", "/tmp"], 1, "not a regular file"),
    (["trace", "--libcuda", "{fifo}"], 1, "not a regular file"),
    (["trace", "--libcuda", "/etc/passwd"], 1, "not an ELF file"),
    (["trace", "--libcuda", "/bin/true"], 1, "defines none of the CUDA"),
    (["trace", "--libcuda", "{elf32}"], 1, "32-bit"),
    (["trace", "--libcuda", "{elf_arm64}"], 1, "another architecture"),
    (["trace", "--libcuda", "{elf_cut}"], 1, "defines none of the CUDA"),
    (["trace", "--libcuda", "{fake}", "--libcuda", "/bin/true"], 1, "defines none"),
    (["top", "--once", "--libcuda", "/bin/true"], 1, "defines none of the CUDA"),
    (["report", "-d", "1s", "--libcuda", "/etc/passwd"], 1, "not an ELF file"),
    (["record", "-o", "{d}/x.umt", "--libcuda", "/bin/true"], 1, "defines none"),
    # --libc10 files (PyTorch's allocator hook)
    (["top", "--once", "--libcuda", "{fake}", "--libc10", ""], 2, "--libc10"),
    (["top", "--once", "--libcuda", "{fake}", "--libc10"], 2, "needs a value"),
    (["trace", "--libcuda", "{fake}", "--libc10", "{fake}"], 2, "does not read PyTorch"),
    (["report", "-d", "1s", "--libc10", "{fake}", "--no-libc10"], 2, "not both"),
    (["top", "--once", "--libcuda", "{fake}", "--libc10", "/nonexistent/libc10.so"], 1,
     "No such file"),
    (["top", "--once", "--libcuda", "{fake}", "--libc10", "/tmp"], 1, "not a regular file"),
    (["report", "-d", "1s", "--libcuda", "{fake}", "--libc10", "/etc/passwd"], 1,
     "not an ELF file"),
    (["record", "-o", "{d}/x.umt", "--libcuda", "{fake}", "--libc10", "{fake}"], 1,
     "no form of c10::reportMemoryUsageToProfiler"),
    (["guard", *G, "--libcuda", "{fake}", "--libc10", "{elf32}"], 1, "32-bit"),
    (["guard", *G, "--torch", "--no-torch", "--torch=1"], 2, "--torch"),
    (["record", "--force", "-o", "{d_existing}", "--libcuda", "/bin/true"], 1, "defines none"),
    (["guard", *G, "--libcuda", "/bin/true"], 1, "defines none of the CUDA"),
    # guard --config
    (["guard", *G, "--config", "{cfg_unknown_key}"], 2, "unknown key"),
    (["guard", *G, "--config", "{cfg_duplicate_key}"], 2, "duplicate key"),
    (["guard", *G, "--config", "{cfg_bad_unit}"], 2, "invalid floor"),
    (["guard", *G, "--config", "{cfg_bad_section}"], 2, "unknown section"),
    (["guard", *G, "--config", "{cfg_no_equals}"], 2, "expected 'key = value'"),
    (["guard", *G, "--config", "{cfg_binary}"], 2, "binary data"),
    (["guard", *G, "--config", "{cfg_world_writable}"], 2, "writable by group or others"),
    (["guard", *G, "--config", "{cfg_group_writable}"], 2, "writable by group or others"),
    (["guard", *G, "--config", "{cfg_foreign_owner}"], 2, "not by root"),
    (["guard", *G, "--config", "/nonexistent.ini"], 2, "No such file"),
    (["guard", *G, "--config", "/tmp"], 2, "not a regular file"),
    (["guard", *G, "--config", "{fifo}"], 2, "not a regular file"),
    # recordings
    (["report", "{rec_empty}"], 1, "empty file"),
    (["report", "{rec_wrong_magic}"], 1, "not a umtrace recording"),
    (["report", "/etc/passwd"], 1, "not a umtrace recording"),
    (["report", "{rec_future_version}"], 1, "format version"),
    (["report", "{rec_truncated_header}"], 1, "cut short"),
    (["report", "{rec_bad_checksum}"], 1, "damaged"),
    (["report", "/nonexistent.umt"], 1, "No such file"),
    (["report", "/tmp"], 1, "not a regular file"),
    (["report", "{fifo}"], 1, "not a regular file"),
    (["status", "--state-file", "{rec_wrong_magic}"], 1, "not a umtrace guard state"),
    (["status", "--state-file", "{fifo}"], 1, "{fifo}"),
    (["resume", "--state-file", "{fifo}", "{gone}"], 1, "no process"),
    # privileges
    (["@nobody", "trace", "--libcuda", "{fake}"], 1, "permission denied"),
    (["@nobody", "top", "--once", "--libcuda", "{fake}"], 1, "permission denied"),
    (["@nobody", "record", "-o", "{d}/x.umt", "--libcuda", "{fake}"], 1, "permission denied"),
    (["@nobody", "guard", *G, "--libcuda", "{fake}"], 1, "permission denied"),
    (["@nobpf", "trace", "--libcuda", "{fake}"], 1, "permission denied"),
    (["@nobpf", "report", "-d", "1s", "--libcuda", "{fake}"], 1, "permission denied"),
    (["@nobpf", "guard", *G, "--libcuda", "{fake}"], 1, "permission denied"),
    # output paths
    (["record", "-o", "/proc/nope", "--libcuda", "{fake}"], 1, "cannot create /proc/nope"),
    (["record", "-o", "/nonexistent/dir/x", "--libcuda", "{fake}"], 1, "No such file"),
    (["record", "-o", "{d}", "--libcuda", "{fake}"], 1, "{d}"),
    (["record", "-o", "{d_existing}", "--libcuda", "{fake}"], 1, "file exists"),
]

# Valid although odd: exit 0.
VALID = [
    (["guard", "--config", "{cfg_empty}", "--help"], "usage: umtrace guard"),
    (["guard", "--config", "{cfg_comments_only}", "--help"], "usage: umtrace guard"),
]

WRAPPERS = {
    "@nobody": ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                "--inh-caps=-all"],
    "@nobpf": ["setpriv", "--bounding-set", "-bpf,-perfmon,-sys_admin", "--inh-caps=-all",
               "--"],
}

SANITIZER_MARKS = ("Sanitizer", "runtime error:")


def rec_header(version=1, size=172):
    """A recording's header (user/rec/recfile.h), its CRC right."""
    h = bytearray(172)
    h[0:8] = b"\x89UMTREC\n"
    struct.pack_into("<IIII", h, 8, version, size, 4096, 0)
    struct.pack_into("<I", h, 168, zlib.crc32(bytes(h[:168])))
    return bytes(h)


def elf_header(elf_class, machine):
    """An ELF header and nothing else: enough to be told apart."""
    ident = b"\x7fELF" + bytes([elf_class, 1, 1, 0]) + bytes(8)
    if elf_class == 1:
        return ident + struct.pack("<HHIIIIIHHHHHH", 3, machine, 1, 0, 0, 0, 0, 52,
                                   0, 0, 0, 0, 0)
    return ident + struct.pack("<HHIQQQIHHHHHH", 3, machine, 1, 0, 0, 0, 0, 64,
                               0, 0, 0, 0, 0)


def elf32(path):
    """A real 32-bit library defining cuMemAlloc_v2 where gcc -m32 links one,
    else a hand-made 52-byte Elf32_Ehdr."""
    src = path + ".c"
    with open(src, "w") as f:
        f.write("int cuMemAlloc_v2(void) { return 0; }\n")
    p = subprocess.run(["gcc", "-m32", "-shared", "-nostdlib", "-fPIC", "-o", path, src],
                       capture_output=True)
    os.unlink(src)
    if p.returncode == 0 and os.path.getsize(path) > 52:
        return
    with open(path, "wb") as f:
        f.write(elf_header(1, 3))


def free_pid(start=999999):
    """A pid no process has, 999999 if free (the README's example)."""
    pid_max = int(open("/proc/sys/kernel/pid_max").read())
    for pid in list(range(min(start, pid_max - 1), 1, -1)):
        if not os.path.exists(f"/proc/{pid}"):
            return pid
    raise Skip("no free pid")


class Fixtures(dict):
    """Files made once for every case, and what a row asks for by name."""

    def __init__(self, env, root):
        super().__init__()
        self.env, self.root, self.procs = env, root, []
        fix = os.path.join(root, "fix")
        os.mkdir(fix)
        files = {
            "cfg_unknown_key": (b"flor = 2G\n", 0o644),
            "cfg_duplicate_key": (b"floor = 2G\nlow = 3G\nfloor = 3G\n", 0o644),
            "cfg_bad_unit": (b"[guard]\nfloor = 2Q\n", 0o644),
            "cfg_bad_section": (b"[tracer]\nfloor = 2G\n", 0o644),
            "cfg_no_equals": (b"floor 2G\n", 0o644),
            "cfg_binary": (bytes(range(256)) * 4, 0o644),
            "cfg_world_writable": (b"floor = 2G\n", 0o666),
            "cfg_group_writable": (b"floor = 2G\n", 0o664),
            "cfg_foreign_owner": (b"floor = 2G\n", 0o644),
            "cfg_empty": (b"", 0o644),
            "cfg_comments_only": (b"# nothing\n; at all\n\n", 0o644),
            "rec_empty": (b"", 0o644),
            "rec_wrong_magic": (b"\x89PNG\r\n\x1a\n" + bytes(400), 0o644),
            "rec_future_version": (rec_header(version=99), 0o644),
            "rec_truncated_header": (rec_header()[:100], 0o644),
            "rec_bad_checksum": (rec_header()[:168] + b"\0\0\0\0", 0o644),
            "elf_arm64": (elf_header(2, 183), 0o644),
        }
        for name, (data, mode) in files.items():
            path = os.path.join(fix, name)
            with open(path, "wb") as f:
                f.write(data)
            os.chmod(path, mode)
            self[name] = path
        os.chown(self["cfg_foreign_owner"], 65534, 65534)
        self["elf32"] = os.path.join(fix, "elf32.so")
        elf32(self["elf32"])
        # A library cut short: its section headers point past the end.
        self["elf_cut"] = os.path.join(fix, "libcuda-cut.so.1")
        with open(env.fake, "rb") as src, open(self["elf_cut"], "wb") as dst:
            dst.write(src.read(8192))
        self["fifo"] = os.path.join(fix, "fifo")
        os.mkfifo(self["fifo"], 0o600)
        self["fake"] = env.fake
        self["gone"] = str(free_pid())

    def for_case(self, d):
        self["d"] = d
        for k in ("exiting_pid", "d_existing"):
            self.pop(k, None)
        return self

    def __missing__(self, key):
        if key == "exiting_pid":
            p = subprocess.Popen(["sleep", "0.3"])
            self.procs.append(p)
            self[key] = str(p.pid)
        elif key == "d_existing":
            path = os.path.join(self["d"], "existing.umt")
            with open(path, "wb") as f:
                f.write(b"a recording worth keeping\n")
            self[key] = path
        else:
            raise KeyError(key)
        return self[key]

    def reap(self):
        for p in self.procs:
            p.wait(timeout=30)
        self.procs = []


def snapshot(d):
    """What is in d, names and contents, symlinks as their targets."""
    out = {}
    for name in sorted(os.listdir(d)):
        path = os.path.join(d, name)
        if os.path.islink(path):
            out[name] = ("link", os.readlink(path))
        elif os.path.isfile(path):
            with open(path, "rb") as f:
                out[name] = ("file", zlib.crc32(f.read()))
        else:
            out[name] = ("other", None)
    return out


def command_line(env, fx, argv):
    """The full command line for a row, or a reason it cannot run here."""
    prefix = []
    if argv and argv[0].startswith("@"):
        prefix = WRAPPERS[argv[0]]
        if not shutil.which(prefix[0]):
            return None, f"{prefix[0]} not installed"
        argv = argv[1:]
    return prefix + [env.umtrace] + [a.format_map(fx) for a in argv], None


def check_case(env, fx, d, argv, code, word):
    """'' if the row holds, else what went wrong."""
    cmd, why_not = command_line(env, fx, argv)
    if why_not:
        return None, why_not
    word = word.format_map(fx)
    before = snapshot(d)
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=CASE_TIMEOUT,
                           stdin=subprocess.DEVNULL, cwd=d)
    except subprocess.TimeoutExpired:
        return f"hung (more than {CASE_TIMEOUT}s)", None
    finally:
        fx.reap()
    took = time.monotonic() - t0
    codes = code if isinstance(code, tuple) else (code,)
    lines = p.stderr.splitlines()
    if p.returncode < 0 or p.returncode in (134, 139) or \
            any(m in p.stderr for m in SANITIZER_MARKS):
        return f"crashed: rc {p.returncode}: {p.stderr[-600:]!r}", None
    if p.returncode not in codes:
        return f"exit {p.returncode}, expected {code}: {p.stderr.strip()[-400:]!r}", None
    if snapshot(d) != before:
        return f"left {d} changed: {before} -> {snapshot(d)}", None
    if p.returncode == 0:
        # Only where a row allows 0: the session ended normally.
        return "", None
    if len(lines) != 1 or not lines[0].startswith("umtrace: ") or word not in lines[0]:
        return f"stderr {lines!r}, expected one 'umtrace: ' line with {word!r}", None
    if p.stdout:
        return f"wrote to stdout: {p.stdout[:200]!r}", None
    if took > CASE_TIMEOUT / 2:
        return f"took {took:.1f}s", None
    return "", None


def present_commands(env):
    """Commands added since this table was written get their rows too."""
    extra = []
    for c in ("flamegraph", "timeline"):
        p = subprocess.run([env.umtrace, "help", c], capture_output=True, text=True,
                           timeout=CASE_TIMEOUT)
        if p.returncode == 0:
            extra.append(c)
    return extra


def test_bad_input_table(env):
    root = tempfile.mkdtemp(prefix="umtrace-bad-input-")
    env._tmp.append(root)
    os.chmod(root, 0o755)	# the @nobody rows reach their {d}
    fx = Fixtures(env, root)
    rows = list(CASES)
    for c in present_commands(env):
        rows += [([c, "--bogus"], 2, "unknown option"), ([c, "-Z"], 2, "unknown option")]
    failures, skipped = [], []
    for i, (argv, code, word) in enumerate(rows):
        d = os.path.join(root, f"case{i}")
        os.mkdir(d)
        if argv[0] == "@nobody":
            os.chmod(d, 0o1777)	# so that nobody gets as far as the privilege check
        bad, why_not = check_case(env, fx.for_case(d), d, argv, code, word)
        if why_not:
            skipped.append(f"{argv}: {why_not}")
        elif bad:
            failures.append(f"{' '.join(argv)}: {bad}")
    for argv, want in VALID:
        cmd, _ = command_line(env, fx.for_case(root), argv)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=CASE_TIMEOUT)
        if p.returncode != 0 or not p.stdout.startswith(want) or p.stderr:
            failures.append(f"{' '.join(argv)}: valid, but exit {p.returncode}: "
                            f"{p.stderr.strip()[-300:]!r}")
    for s in skipped:
        print(f"    skipped {s}")
    for f in failures:
        print(f"    failed {f}")
    print(f"    {len(rows) + len(VALID)} cases, {len(failures)} failed, {len(skipped)} skipped")
    assert not failures, f"{len(failures)} of {len(rows) + len(VALID)} cases:\n" + \
        "\n".join(failures)


def test_guard_without_bpffs(env):
    """No bpffs at /sys/fs/bpf and none mountable (no CAP_SYS_ADMIN, in a
    mount namespace of its own where /sys/fs/bpf is a read-only tmpfs): the
    guard still arms, says in one warning that its kernel side ends with
    it, and exits 0 on SIGINT."""
    for tool in ("unshare", "setpriv"):
        if not shutil.which(tool):
            raise Skip(f"{tool} (util-linux) not installed: cannot hide bpffs")
    hide = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            "mount -t tmpfs -o ro,mode=0700 umtrace-test /sys/fs/bpf && "
            'exec setpriv --bounding-set -sys_admin --inh-caps=-all -- "$@"', "sh"]
    p = subprocess.run(hide + ["true"], capture_output=True, text=True, timeout=30)
    if p.returncode:
        raise Skip(f"cannot hide bpffs in a mount namespace here: {p.stderr.strip()[-200:]}")
    state = env.tmpfile("nobpffs.state")
    p = env.popen(hide + [env.umtrace, "guard", "--libcuda", env.fake, "--platform", "unified",
                          "--state-file", state])
    _, said = wait_line(p.stderr, "guard: armed", 30)
    warnings = [l for l in said.splitlines() if "warning" in l]
    assert len(warnings) == 1 and "cannot pin" in warnings[0], said
    p.send_signal(2)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err[-600:]
