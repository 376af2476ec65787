# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Least privilege: once attached, a long-running umtrace keeps only the
capabilities its loop needs (user/attach/session.c, session__drop_caps), in every
thread, with no way back (no_new_privs, bounding set), and still traces;
the guard opens no network socket; the files umtrace writes have their
documented modes and never follow a symlink planted in /tmp."""
import os
import queue
import shutil
import signal
import subprocess
import threading
import time

from harness import Skip, TraceResult, readline
from harness import bring_memory_in
from test_guard import Guard

MIB = 1 << 20

CAP_DAC_READ_SEARCH = 2
CAP_KILL = 5
CAP_IPC_LOCK = 14
CAP_SYS_PTRACE = 19
CAP_SYS_ADMIN = 21
CAP_PERFMON = 38
CAP_BPF = 39

TRACING = {CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH}
GUARD = TRACING | {CAP_KILL, CAP_IPC_LOCK}


def mask(caps):
    m = 0
    for c in caps:
        m |= 1 << c
    return m


def status_of(path):
    fields = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def runner_permitted():
    return int(status_of("/proc/self/status")["CapPrm"], 16)


def expected(caps):
    """What umtrace can keep of caps: only what it was given."""
    return mask(caps) & runner_permitted()


def threads_caps(pid):
    """{tid: status fields} of every thread of pid."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            out[int(tid)] = status_of(f"/proc/{pid}/task/{tid}/status")
        except FileNotFoundError:
            pass
    return out


def assert_dropped(pid, want, timeout=10):
    """Every thread of pid ends up holding exactly want, for good."""
    deadline = time.monotonic() + timeout
    while True:
        caps = threads_caps(pid)
        if all(int(st["CapPrm"], 16) == want for st in caps.values()) or \
                time.monotonic() > deadline:
            break
        time.sleep(0.05)
    for tid, st in caps.items():
        got = {k: int(st[k], 16) for k in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")}
        assert got == {"CapInh": 0, "CapPrm": want, "CapEff": want, "CapBnd": want,
                       "CapAmb": 0}, \
            f"thread {tid} of {pid} ({st['Name']}): {({k: hex(v) for k, v in got.items()})}" \
            f", expected {want:#x}"
        assert st["NoNewPrivs"] == "1", f"thread {tid}: NoNewPrivs {st['NoNewPrivs']}"


class Lines:
    """A pipe read by a thread, so that waiting for a line never blocks on it."""

    def __init__(self, pipe):
        self.seen, self.q = [], queue.Queue()
        self.t = threading.Thread(target=self._read, args=(pipe,), daemon=True)
        self.t.start()

    def _read(self, pipe):
        for line in pipe:
            self.q.put(line)
        self.q.put(None)

    def wait_for(self, pred, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.q.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            self.seen.append(line)
            if pred(line):
                return line
        raise AssertionError(f"not seen in {timeout}s; stderr so far: "
                             f"{''.join(self.seen)[-800:]!r}")

    def rest(self):
        self.t.join(timeout=30)
        while not self.q.empty():
            line = self.q.get()
            if line is not None:
                self.seen.append(line)
        return "".join(self.seen)


def start(tenv, argv, **kw):
    """umtrace in the background, both pipes drained: a system-wide trace
    of a busy host would otherwise fill its stdout and stop."""
    p = tenv.popen(argv, **kw)
    return p, Lines(p.stdout), Lines(p.stderr)


def stop(p, out, err):
    p.send_signal(signal.SIGINT)
    p.wait(timeout=30)
    return TraceResult(p.returncode, out.rest(), err.rest())


def kernel_has_uprobe_multi():
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    return (major, minor) >= (6, 6)


def test_trace_drops_capabilities(env):
    """trace --libcuda FAKE keeps CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE and
    CAP_DAC_READ_SEARCH, nothing else, and a call made after the drop is
    traced."""
    p, out, err = start(env, [env.umtrace, "trace", "--json", "--libcuda", env.fake])
    err.wait_for(lambda l: "probing" in l)
    assert_dropped(p.pid, expected(TRACING))
    w = env.popen([env.alloc_mix, "-n", "3", "-s", "1M", "-a", "alloc"])
    assert w.wait(timeout=60) == 0, w.stderr.read()
    time.sleep(0.3)
    res = stop(p, out, err)
    assert res.rc == 0, res.stderr[-600:]
    assert "warning" not in res.stderr, res.stderr[-600:]
    assert len(res.calls_of("cuMemAlloc_v2", w.pid)) == 3, res


def _rescan_after_drop(env, extra_env, want):
    """A libcuda that appears after the drop is found by the rescan and
    probed, and its calls are traced."""
    a, b = env.tmpfile("priv-lib-a"), env.tmpfile("priv-lib-b")
    for d in (a, b):
        os.makedirs(d, exist_ok=True)
        shutil.copy(env.fake, os.path.join(d, "libcuda.so.1"))
    penv = dict(os.environ, LD_LIBRARY_PATH=a, **extra_env)
    p, out, err = start(env, [env.umtrace, "trace", "--json", "--rescan", "100ms"], env=penv)
    err.wait_for(lambda l: "probing" in l and a in l)
    assert_dropped(p.pid, want)
    # Maps B's copy (a new inode), waits, then calls.
    code = ("import ctypes, sys\n"
            f"lib = ctypes.CDLL({os.path.join(b, 'libcuda.so.1')!r})\n"
            "assert lib.cuInit(0) == 0\n"
            "print('mapped', flush=True)\n"
            "sys.stdin.readline()\n"
            "ptr = ctypes.c_uint64()\n"
            "assert lib.cuMemAlloc_v2(ctypes.byref(ptr), 1 << 20) == 0\n"
            "assert lib.cuMemFree_v2(ptr) == 0\n")
    w = env.popen(["python3", "-c", code], stdin=subprocess.PIPE)
    assert readline(w.stdout, 30, "'mapped'").strip() == "mapped"
    err.wait_for(lambda l: "probing" in l and f"/proc/{w.pid}/root{b}" in l
                 or "cannot attach" in l and b in l)
    assert "cannot attach" not in err.seen[-1], err.seen[-1]
    w.stdin.write("\n")
    w.stdin.flush()
    assert w.wait(timeout=30) == 0, w.stderr.read()
    time.sleep(0.3)
    res = stop(p, out, err)
    assert res.rc == 0, res.stderr[-600:]
    got = [c["api"] for c in res.calls if c["pid"] == w.pid]
    assert got == ["cuMemAlloc_v2", "cuMemFree_v2"], (got, res)


def test_rescan_attaches_after_drop_multi_uprobe(env):
    """Multi-uprobe links need no CAP_SYS_ADMIN: it is dropped."""
    if not kernel_has_uprobe_multi():
        raise Skip("kernel before 6.6: no multi-uprobe links")
    _rescan_after_drop(env, {}, expected(TRACING))


def test_rescan_attaches_after_drop_perf_uprobe(env):
    """A perf-event uprobe takes CAP_SYS_ADMIN (kernels with the fix to
    c9e0924e5c2b): kept while the rescan may need it."""
    _rescan_after_drop(env, {"UMTRACE_NO_UPROBE_MULTI": "1"},
                       expected(TRACING | {CAP_SYS_ADMIN}))


def test_record_drops_capabilities_in_every_thread(env):
    """record's threads (the recording's fsync thread) hold no more than
    its main thread."""
    p, _, err = start(env, [env.umtrace, "record", "-o", env.tmpfile("priv.umt"),
                            "--libcuda", env.fake])
    err.wait_for(lambda l: "probing" in l)
    assert_dropped(p.pid, expected(TRACING))
    p.send_signal(signal.SIGINT)
    p.wait(timeout=30)
    said = err.rest()
    assert p.returncode == 0, said[-600:]
    assert "warning" not in said, said[-600:]


def start_guard(env, extra=()):
    # Far below what is available: nothing is ever stopped.
    return Guard(env, 256 * MIB, extra=["--no-pin", *extra])


def test_guard_drops_capabilities(env):
    """The guard keeps the tracing set, CAP_KILL (other users' jobs) and
    CAP_IPC_LOCK (its memory locked as it grows), and so does its page
    programs' helper, once it has set its priority and locked its memory
    (there is one where the kernel's counters are used)."""
    bring_memory_in()
    g = start_guard(env)
    assert_dropped(g.p.pid, expected(GUARD))
    r = subprocess.run(["pgrep", "-P", str(g.p.pid), "-x", "umtrace-arm"],
                       capture_output=True, text=True, timeout=30)
    helpers = r.stdout.split()
    assert len(helpers) == 1, f"helpers: {helpers}"
    assert_dropped(int(helpers[0]), expected(GUARD))
    err = g.stop()
    assert "warning" not in err, err[-600:]


def socket_inodes(pid):
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    return inodes


def test_guard_has_no_network_socket(env):
    """No socket of any kind among the guard's file descriptors, and none
    of the host's TCP, UDP or raw sockets is its own."""
    g = start_guard(env)
    time.sleep(1.5)		# a few ticks: state and metrics written
    mine = socket_inodes(g.p.pid)
    net = set()
    for name in ("tcp", "tcp6", "udp", "udp6", "raw", "raw6"):
        try:
            with open(f"/proc/{g.p.pid}/net/{name}") as f:
                next(f)
                net |= {line.split()[9] for line in f if len(line.split()) > 9}
        except FileNotFoundError:
            pass
    g.stop()
    assert not mine, f"the guard holds sockets {mine}"
    assert not (mine & net)


def plant(env, name, victim):
    path = env.tmpfile(name)
    if os.path.lexists(path):
        os.unlink(path)
    os.symlink(victim, path)
    return path


def make_victim(env):
    victim = env.tmpfile("victim")
    with open(victim, "w") as f:
        f.write("not umtrace's\n")
    os.chmod(victim, 0o644)
    return victim


def assert_untouched(victim):
    with open(victim) as f:
        assert f.read() == "not umtrace's\n", f"{victim} was written through a symlink"
    assert os.stat(victim).st_mode & 0o777 == 0o644


def assert_regular(path, mode):
    st = os.lstat(path)
    assert not os.path.islink(path), f"{path} is still a symlink"
    assert oct(st.st_mode & 0o777) == oct(mode), f"{path}: mode {oct(st.st_mode & 0o777)}"


def leftovers(path):
    d, base = os.path.split(path)
    return [n for n in os.listdir(d) if n.startswith(base + ".") or n.startswith("." + base)]


def test_record_output_mode_and_symlink(env):
    """record -o: a new file is 0600; a symlink planted at the path is
    refused (exit 1, one line) or, with --force, replaced by a regular file;
    its target is never written."""
    victim = make_victim(env)
    fresh = env.tmpfile("priv-fresh.umt")
    if os.path.lexists(fresh):
        os.unlink(fresh)
    p = subprocess.run([env.umtrace, "record", "-o", fresh, "-d", "1s", "--libcuda", env.fake],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert_regular(fresh, 0o600)

    link = plant(env, "priv-link.umt", victim)
    p = subprocess.run([env.umtrace, "record", "-o", link, "-d", "1s", "--libcuda", env.fake],
                       capture_output=True, text=True, timeout=60)
    lines = p.stderr.splitlines()
    assert p.returncode == 1 and len(lines) == 1 and "exists" in lines[0], (p.returncode, lines)
    assert os.path.islink(link)
    assert_untouched(victim)

    p = subprocess.run([env.umtrace, "record", "--force", "-o", link, "-d", "1s",
                        "--libcuda", env.fake], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert_regular(link, 0o600)
    assert_untouched(victim)
    assert not leftovers(link), leftovers(link)


def test_guard_files_mode_and_symlink(env):
    """guard --state-file (0600) and --metrics-file (0644, node_exporter
    reads it) replace a symlink planted at their paths, never write through
    it."""
    victim = make_victim(env)
    state = plant(env, "guard.state", victim)	# the path Guard() uses
    metrics = plant(env, "priv-guard.prom", victim)
    g = start_guard(env, extra=["--metrics-file", metrics])
    deadline = time.monotonic() + 10
    while os.path.islink(metrics) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert_regular(state, 0o600)
    assert_regular(metrics, 0o644)
    assert_untouched(victim)
    g.stop()
    assert_regular(state, 0o600)
    assert_regular(metrics, 0o644)
    assert_untouched(victim)
    assert not leftovers(state) and not leftovers(metrics), \
        leftovers(state) + leftovers(metrics)


def test_flamegraph_output_symlink(env):
    """flamegraph -o: refused on a planted symlink; --force replaces it with
    a regular file, never group- or world-writable."""
    p = subprocess.run([env.umtrace, "help", "flamegraph"], capture_output=True, text=True)
    if p.returncode != 0:
        raise Skip("this umtrace has no flamegraph command")
    rec = env.tmpfile("priv-fg.umt")
    if os.path.lexists(rec):
        os.unlink(rec)
    p = subprocess.run([env.umtrace, "record", "-o", rec, "-d", "1s", "--libcuda", env.fake],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    victim = make_victim(env)
    link = plant(env, "priv-fg.folded", victim)
    p = subprocess.run([env.umtrace, "flamegraph", rec, "-o", link], capture_output=True,
                       text=True, timeout=60)
    lines = p.stderr.splitlines()
    assert p.returncode == 1 and len(lines) == 1, (p.returncode, lines)
    assert os.path.islink(link)
    assert_untouched(victim)
    p = subprocess.run([env.umtrace, "flamegraph", "--force", rec, "-o", link],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert not os.path.islink(link) and os.path.isfile(link)
    assert os.stat(link).st_mode & 0o022 == 0, oct(os.stat(link).st_mode)
    assert_untouched(victim)
