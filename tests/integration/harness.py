# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Shared pieces of the integration tests: where the binaries are, running
`umtrace trace` around a workload, and parsing what it prints."""
import glob
import json
import os
import select
import shutil
import signal
import subprocess
import time


class Skip(Exception):
    """A test that cannot run here; the message says why."""


def find_stub_libcuda():
    for p in sorted(glob.glob("/usr/local/cuda*/lib64/stubs/libcuda.so")) + \
            sorted(glob.glob("/usr/local/cuda*/targets/*/lib/stubs/libcuda.so")):
        if os.path.isfile(p):
            return p
    return None


def meminfo(key="MemAvailable"):
    """A /proc/meminfo figure in bytes."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {key} in /proc/meminfo")


def late_memory():
    """Bytes in MemFree that no zone counts yet: memory a kernel booted with
    deferred_init=lazy (as these VMs are) has not initialised. Until it has,
    the guard cannot use the kernel's counters."""
    page = os.sysconf("SC_PAGE_SIZE")
    with open("/proc/zoneinfo") as f:
        zones = sum(int(l.split()[2]) for l in f if l.split()[:2] == ["pages", "free"])
    return meminfo("MemFree") - zones * page


def bring_memory_in(timeout=300):
    """A kernel that initialises its memory late counts the part not yet
    initialised in MemFree but in no zone's counter, so the guard cannot
    use the counters until it is: fault most of it in once (all but 2 GiB
    of MemAvailable), as a host's first jobs would. None where nothing was
    late; else (bytes late before, bytes faulted, seconds, bytes late after)."""
    late = late_memory()
    size = meminfo() - 2 * (1 << 30)
    if late <= 256 << 20 or size < 1 << 30:
        return None
    page = os.sysconf("SC_PAGE_SIZE")
    t0 = time.monotonic()
    p = subprocess.run(["python3", "-c", f"import mmap; m = mmap.mmap(-1, {size}); "
                        f"[m.__setitem__(i, 1) for i in range(0, {size}, {page})]"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=timeout)
    assert p.returncode == 0, p.stderr
    return late, size, time.monotonic() - t0, late_memory()


def readline(stream, timeout=30, what="a line"):
    """One line from a child's pipe ("" at its end), or an AssertionError
    that names what was awaited once timeout seconds have passed. It reads
    the pipe a byte at a time, so a later communicate() still gets all
    that follows the line."""
    fd = stream.fileno()
    deadline = time.monotonic() + timeout
    buf = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"no {what} within {timeout}s (read so far: {buf[-300:]!r})")
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        b = os.read(fd, 1)
        if b:
            buf += b
        if not b or b == b"\n":
            return buf.decode(errors="replace")


def interrupt(p, timeout=30):
    """SIGINT to a daemon the test started (its clean exit), SIGKILL if it
    has not gone after timeout seconds: it never outlives its test."""
    if p is None or p.poll() is not None:
        return
    p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()


def wait_line(stream, needle, timeout=30, what=None):
    """Read lines until one holds needle; returns (that line, every line
    read, joined). The pipe's end or the deadline is an AssertionError."""
    what = what or f"line with {needle!r}"
    deadline = time.monotonic() + timeout
    seen = ""
    while True:
        line = readline(stream, max(0.0, deadline - time.monotonic()), what)
        seen += line
        if needle in line:
            return line, seen
        if not line:
            raise AssertionError(f"the stream ended before a {what}: {seen[-600:]!r}")


class TraceResult:
    def __init__(self, rc, stdout, stderr, truth=None):
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        self.truth = truth
        self.calls, self.summary, self.totals, self.other = [], [], None, []
        for line in stdout.splitlines():
            if not line.startswith("{"):
                continue
            obj = json.loads(line)
            ev = obj.get("event")
            if ev in ("alloc", "free"):
                self.calls.append(obj)
            elif ev == "summary":
                self.summary.append(obj)
            elif ev == "totals":
                self.totals = obj
            else:
                self.other.append(obj)

    def calls_of(self, api, pid=None):
        return [c for c in self.calls if c["api"] == api and (pid is None or c["pid"] == pid)]

    def __repr__(self):
        return f"rc={self.rc} calls={len(self.calls)} stderr={self.stderr[-400:]!r}"


class Env:
    def __init__(self, out):
        self.out = os.path.abspath(out)
        self.root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.umtrace = os.path.join(self.out, "umtrace")
        self.tests = os.path.join(self.out, "tests")
        self.fake = os.path.join(self.tests, "libcuda.so.1")
        self.alloc_mix = os.path.join(self.tests, "alloc_mix")
        self.demo = os.path.join(self.tests, "demo")
        self.page_size = os.sysconf("SC_PAGE_SIZE")
        self._procs = []
        self._tmp = []

    def cannot_run(self):
        if os.geteuid() != 0:
            return "needs root to load BPF programs"
        if not os.path.exists("/sys/kernel/btf/vmlinux"):
            return "kernel has no BTF (/sys/kernel/btf/vmlinux)"
        for p in (self.umtrace, self.fake, self.alloc_mix):
            if not os.path.exists(p):
                return f"{p} not built (run make)"
        return None

    def tmpfile(self, name):
        path = os.path.join("/tmp", f"umtrace-test-{os.getpid()}-{name}")
        self._tmp.append(path)
        return path

    def popen(self, argv, **kw):
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, **kw)
        self._procs.append(p)
        return p

    def trace(self, workload, extra=(), timeout=120, env=None, truth=True):
        """Run `umtrace trace --json --libcuda FAKE [extra] -- workload -o TRUTH`."""
        argv = [self.umtrace, "trace", "--json", "--libcuda", self.fake, *extra, "--"]
        truth_path = None
        if truth:
            truth_path = self.tmpfile("truth.json")
            if os.path.exists(truth_path):
                os.unlink(truth_path)
            workload = [*workload, "-o", truth_path]
        penv = dict(os.environ, **(env or {}))
        p = self.popen(argv + list(workload), env=penv)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate(timeout=30)
            raise AssertionError(f"umtrace trace did not finish in {timeout}s: {err[-400:]}")
        data = None
        if truth_path and os.path.exists(truth_path):
            with open(truth_path) as f:
                data = json.load(f)
        return TraceResult(p.returncode, out, err, data)

    def start_trace(self, extra=()):
        """Start `umtrace trace --json` in the background; wait until attached."""
        argv = [self.umtrace, "trace", "--json", "--libcuda", self.fake, *extra]
        p = self.popen(argv)
        # It says which library it probes once the probes are attached.
        wait_line(p.stderr, "probing", 30, "'probing' line: umtrace did not attach")
        return p

    def stop_trace(self, p, timeout=30):
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=timeout)
        return TraceResult(p.returncode, out, err)

    def cleanup(self):
        # umtrace first, with SIGINT: a guard killed outright leaves its
        # kernel side armed and pinned (by design), which would go on
        # stopping the next tests' jobs at this test's floor.
        live = [p for p in self._procs if p.poll() is None]
        ours = [p for p in live if p.args and p.args[0] == self.umtrace]
        for p in ours:
            p.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 10
        for p in live:
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()) if p in ours else 0)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=30)
        self._procs = []
        for t in self._tmp:
            if os.path.isdir(t) and not os.path.islink(t):
                shutil.rmtree(t)
            elif os.path.lexists(t):
                os.unlink(t)
        self._tmp = []


def maps_say(pid, text, timeout=30):
    """Wait until pid's maps name text (a library mapped, or its deletion)."""
    deadline = time.monotonic() + timeout
    while True:
        with open(f"/proc/{pid}/maps") as f:
            if text in f.read():
                return
        assert time.monotonic() < deadline, f"{text!r} never in pid {pid}'s maps"
        time.sleep(0.02)
