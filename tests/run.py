#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Run umtrace's tests: unit tests (no root), then integration tests that
load BPF for real (root, kernel BTF). Every test prints PASS, FAIL or SKIP
with a reason; the last line counts them. Exit status 1 if any failed.

usage: tests/run.py --out build/x86 [-k SUBSTRING] [--unit-only]
"""
import argparse
import glob
import importlib.util
import os
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "integration"))

import harness  # noqa: E402  (tests/integration/harness.py)


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
        p = subprocess.run([b], capture_output=True, text=True, env=env, timeout=300)
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
    p = subprocess.run([path], capture_output=True, text=True, timeout=300)
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


def run_integration(out, counts, pattern):
    env = harness.Env(out)
    why_not = env.cannot_run()
    for path in sorted(glob.glob(os.path.join(HERE, "integration", "test_*.py"))):
        mod = load_module(path)
        for fname in sorted(n for n in dir(mod) if n.startswith("test_")):
            name = f"integration/{mod.__name__}/{fname}"
            if pattern and pattern not in name:
                continue
            if why_not:
                counts.add("SKIP", name, why_not)
                continue
            t0 = time.monotonic()
            try:
                getattr(mod, fname)(env)
            except harness.Skip as e:
                counts.add("SKIP", name, str(e))
            except Exception as e:  # a failing assertion or a crash alike
                detail = f"{type(e).__name__}: {e}"
                tb = traceback.format_exc().strip().splitlines()
                print("\n".join("    " + l for l in tb[-6:]))
                counts.add("FAIL", name, detail[:500])
            else:
                counts.add("PASS", name, f"{time.monotonic() - t0:.1f}s")
            finally:
                env.cleanup()


def check_host_intact(counts):
    """The tests must leave the host as they found it: a workload that once
    renamed its report over -o /dev/null turned it into a plain file."""
    import stat
    st = os.stat("/dev/null")
    if stat.S_ISCHR(st.st_mode):
        counts.add("PASS", "host/dev_null_intact")
    else:
        counts.add("FAIL", "host/dev_null_intact", "/dev/null is no longer a character device")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="build output directory, e.g. build/x86")
    ap.add_argument("-k", dest="pattern", default="", help="run tests whose name contains this")
    ap.add_argument("--unit-only", action="store_true")
    args = ap.parse_args()

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
