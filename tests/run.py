#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Run umtrace's tests: unit tests (no root), then integration tests that
load BPF for real (root, kernel BTF). Every test prints PASS, FAIL or SKIP
with a reason; the last line counts them. Exit status 1 if any failed.

usage: tests/run.py --out build/x86 [-k SUBSTRING] [--unit-only]

Every integration test runs in a child process, in a process group of its
own; past its limit the runner prints where it was waiting, kills the
whole group, marks it FAIL and goes on.
"""
import argparse
import faulthandler
import fcntl
import glob
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "integration"))

import harness  # noqa: E402  (tests/integration/harness.py)

# Each integration test runs in a process group of its own and is killed
# whole past its limit (a test may set its own: fn.TIMEOUT_S); a unit test
# binary past its own.
TEST_TIMEOUT_S = 300
UNIT_TIMEOUT_S = 300
GUARD_PIN_DIR = "/sys/fs/bpf/umtrace-guard"	# user/guard/pin.h
HOST_LOCK = "/run/lock/umtrace-tests.lock"


class Counts:
    def __init__(self):
        self.passed = self.failed = self.skipped = 0
        self.failures = []

    def add(self, status, name, detail=""):
        line = f"{status} {name}" + (f": {detail}" if detail else "")
        print(line, flush=True)
        if status == "PASS":
            self.passed += 1
        elif status == "SKIP":
            self.skipped += 1
        else:
            self.failed += 1
            self.failures.append(name)


def run_unit(out, counts, pattern):
    env = dict(os.environ)
    env["UMT_FAKE_LIBCUDA"] = os.path.join(out, "tests", "libcuda.so.1")
    env.setdefault("UMT_STUB_LIBCUDA", harness.find_stub_libcuda() or "")
    bins = sorted(glob.glob(os.path.join(out, "tests", "unit", "test_*")))
    if not bins:
        counts.add("FAIL", "unit", f"no unit test binaries under {out}/tests/unit")
    for b in bins:
        name = os.path.basename(b)
        if pattern and pattern not in name:
            continue
        try:
            p = subprocess.run([b], capture_output=True, text=True, env=env,
                               timeout=UNIT_TIMEOUT_S)
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            print("\n".join("    " + l for l in out.splitlines()[-10:]))
            counts.add("FAIL", f"unit/{name}", f"timed out after {UNIT_TIMEOUT_S}s")
            continue
        seen = 0
        for line in p.stdout.splitlines():
            parts = line.split(" ", 1)
            if parts[0] in ("PASS", "FAIL", "SKIP") and len(parts) == 2:
                sub, _, why = parts[1].partition(": ")
                counts.add(parts[0], f"unit/{name}/{sub}", why)
                seen += 1
            else:
                print("    " + line)
        if p.returncode != 0 and (seen == 0 or counts.failed == 0):
            counts.add("FAIL", f"unit/{name}", f"exit {p.returncode}: {p.stderr.strip()[-300:]}")


def run_tap(path, counts):
    """The fake libcuda's own self-test speaks TAP."""
    name = os.path.basename(path)
    if not os.path.exists(path):
        counts.add("FAIL", name, f"{path} not built")
        return
    try:
        p = subprocess.run([path], capture_output=True, text=True, timeout=UNIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        counts.add("FAIL", name, f"timed out after {UNIT_TIMEOUT_S}s")
        return
    for line in p.stdout.splitlines():
        if line.startswith("ok ") or line.startswith("not ok "):
            ok = line.startswith("ok ")
            desc = line.split(" - ", 1)[-1]
            counts.add("PASS" if ok else "FAIL", f"{name}/{desc}")
    if p.returncode != 0:
        counts.add("FAIL", name, f"exit {p.returncode}: {p.stderr.strip()[-300:]}")


def load_module(path):
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_timeout(fn):
    """A test's own limit (a TIMEOUT_S attribute on it), or the default."""
    return getattr(fn, "TIMEOUT_S", TEST_TIMEOUT_S)


def run_one(out, path, fname):
    """In the child: run one integration test, print its result line, and
    exit 0 (PASS or SKIP) or 1 (FAIL). SIGUSR1 dumps where it is waiting."""
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    env = harness.Env(out)
    mod = load_module(path)
    name = f"integration/{mod.__name__}/{fname}"
    t0 = time.monotonic()
    try:
        getattr(mod, fname)(env)
    except harness.Skip as e:
        print(f"SKIP {name}: {e}", flush=True)
        return 0
    except Exception as e:  # a failing assertion or a crash alike
        detail = f"{type(e).__name__}: {e}"
        tb = traceback.format_exc().strip().splitlines()
        print("\n".join("    " + l for l in tb[-6:]))
        print(f"FAIL {name}: {detail[:500]}", flush=True)
        return 1
    finally:
        env.cleanup()
    print(f"PASS {name}: {time.monotonic() - t0:.1f}s", flush=True)
    return 0


def clean_after_kill(pid):
    """What a test killed at its limit could not undo: its temporary files,
    a guard's pinned kernel side (it would stop later tests' jobs), and
    the cgroups it made (thawed first)."""
    for t in glob.glob(f"/tmp/umtrace-test-{pid}-*"):
        if os.path.isdir(t) and not os.path.islink(t):
            shutil.rmtree(t, ignore_errors=True)
        else:
            try:
                os.unlink(t)
            except OSError:
                pass
    shutil.rmtree(GUARD_PIN_DIR, ignore_errors=True)
    for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        for cg in glob.glob(os.path.join(root, f"umtrace-test-{pid}*")):
            try:
                with open(os.path.join(cg, "cgroup.freeze"), "w") as f:
                    f.write("0")
            except OSError:
                pass
            try:
                os.rmdir(cg)
            except OSError:
                pass


def relay(text, counts, name):
    """Print the child's output; count its result line."""
    result = None
    for line in text.splitlines():
        parts = line.split(" ", 1)
        if parts[0] in ("PASS", "FAIL", "SKIP") and len(parts) == 2 and \
                parts[1].split(":", 1)[0] == name:
            result = (parts[0], parts[1].partition(": ")[2])
        else:
            print(line)
    return result


def run_isolated(out, path, fname, name, limit, counts):
    """The test in a process group of its own, killed whole at its limit."""
    argv = [sys.executable, os.path.abspath(__file__), "--out", out,
            "--one", path, fname]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True)
    try:
        text, _ = p.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        # Where it waits: the test's Python stack, from faulthandler.
        try:
            os.kill(p.pid, signal.SIGUSR1)
        except ProcessLookupError:
            pass
        time.sleep(1)
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            text, _ = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            text = "(its output stayed open: a process left its group)"
        relay(text, counts, name)
        clean_after_kill(p.pid)
        counts.add("FAIL", name, f"timed out after {limit}s; killed its process group "
                   "(the stack above shows what it was waiting for)")
        return
    result = relay(text, counts, name)
    if result:
        counts.add(result[0], name, result[1])
    else:
        counts.add("FAIL", name, f"exit {p.returncode} without a result line")


def host_lock():
    """Integration tests share what no test can make its own: the guard's
    pins in /sys/fs/bpf/umtrace-guard and the host's free memory that
    their floors are set against. Two runs on one host (two clones) take
    turns, and the second says so, rather than fail each other."""
    path = HOST_LOCK if os.path.isdir(os.path.dirname(HOST_LOCK)) else "/tmp/umtrace-tests.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"tests/run.py: another run on this host holds {path}: waiting for it "
              "(integration tests share the guard's pins and the host's memory)", flush=True)
        fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def run_integration(out, counts, pattern):
    env = harness.Env(out)
    why_not = env.cannot_run()
    lock = None if why_not else host_lock()
    for path in sorted(glob.glob(os.path.join(HERE, "integration", "test_*.py"))):
        mod = load_module(path)
        for fname in sorted(n for n in dir(mod) if n.startswith("test_")):
            name = f"integration/{mod.__name__}/{fname}"
            if pattern and pattern not in name:
                continue
            if why_not:
                counts.add("SKIP", name, why_not)
                continue
            run_isolated(out, path, fname, name, test_timeout(getattr(mod, fname)), counts)
    if lock is not None:
        os.close(lock)


def check_host_intact(counts):
    """The tests must leave the host as they found it: a workload that once
    renamed its report over -o /dev/null turned it into a plain file."""
    import stat
    for dev in ("null", "full"):
        st = os.stat("/dev/" + dev)
        if stat.S_ISCHR(st.st_mode):
            counts.add("PASS", f"host/dev_{dev}_intact")
        else:
            counts.add("FAIL", f"host/dev_{dev}_intact",
                       f"/dev/{dev} is no longer a character device")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="build output directory, e.g. build/x86")
    ap.add_argument("-k", dest="pattern", default="", help="run tests whose name contains this")
    ap.add_argument("--unit-only", action="store_true")
    ap.add_argument("--one", nargs=2, metavar=("FILE", "TEST"),
                    help=argparse.SUPPRESS)	# the child of run_isolated
    args = ap.parse_args()
    if args.one:
        return run_one(args.out, *args.one)

    counts = Counts()
    run_unit(args.out, counts, args.pattern)
    if not args.pattern or "fakecuda" in args.pattern:
        run_tap(os.path.join(args.out, "tests", "fakecuda_selftest"), counts)
    if not args.unit_only:
        run_integration(args.out, counts, args.pattern)
    check_host_intact(counts)
    if counts.failures:
        print("failed: " + ", ".join(counts.failures))
    print(f"{counts.passed} passed, {counts.failed} failed, {counts.skipped} skipped")
    return 1 if counts.failed else 0


if __name__ == "__main__":
    sys.exit(main())
