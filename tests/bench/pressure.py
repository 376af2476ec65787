#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""pressure.py OUT: the guard on a host thrashing its page cache.

A ballast of anonymous memory first leaves BENCH_FREE_MIB free; a reader
then cycles through files larger than that (BENCH_FILES_MIB in all), so
that kswapd and direct reclaim run all the time and every page of
file-backed code, the guard's own included unless it is locked, may be
evicted. Meanwhile a page hog (anonymous pages, 4 MiB at a time) and
then a GPU hog (64 MiB cuMemAlloc_v2 calls through the fake libcuda)
approach the guard's floor from far above it, with its page programs
detached: once with the guard's memory locked, once without
(UMTRACE_NO_MLOCK=1).

Figures per run: the helper's looks (how many, the lateness 99% of them
came within, the latest; from the guard's exit line), the major faults
the daemon and its helper took while it ran (/proc/PID/stat), the
arming's attach (its time and where it was made, from -v), and how far
past the floor each hog was stopped (negative: before it), measured as
the tests measure a stop (test_guard.stopped_past).

Prints a table; writes OUT/bench/pressure.json. Needs root, and
BENCH_FILES_MIB of disk in BENCH_DIR (default /var/tmp).
Environment: BENCH_FREE_MIB=8192, BENCH_FILES_MIB=12288, BENCH_FLOOR_MIB=2048.
"""
import json
import mmap
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import meminfo  # noqa: E402
from test_guard import stopped_past, wait_stopped  # noqa: E402

MIB = 1 << 20
FREE = int(os.environ.get("BENCH_FREE_MIB", "8192")) * MIB
FILES = int(os.environ.get("BENCH_FILES_MIB", "12288")) * MIB
FLOOR = int(os.environ.get("BENCH_FLOOR_MIB", "2048")) * MIB
DIR = os.path.join(os.environ.get("BENCH_DIR", "/var/tmp"), f"umtrace-pressure-{os.getpid()}")
FILE_MIB = 512

LOOKS_RE = re.compile(r"(\d+) looks, none more than ([\d.]+) ms past its time; .* "
                      r"99% of the looks within (\d+) ms")
ATTACH_RE = re.compile(r"page programs attached in (\d+) us: (-?[\d.]+[BKMGTPE]) above")


def majflt(pid):
    """Major faults of every thread of pid so far."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[9])
    except OSError:
        return 0


def make_files():
    os.makedirs(DIR, exist_ok=True)
    chunk = os.urandom(MIB)
    for i in range(FILES // (FILE_MIB * MIB)):
        with open(os.path.join(DIR, f"f{i}"), "wb") as f:
            for _ in range(FILE_MIB):
                f.write(chunk)


def reader(stop):
    """Read the files round and round: the page cache never holds them."""
    names = sorted(os.listdir(DIR))
    while not stop.is_set():
        for n in names:
            with open(os.path.join(DIR, n), "rb", buffering=0) as f:
                while f.read(MIB) and not stop.is_set():
                    pass


def ballast():
    """Anonymous memory, held, until FREE is left available: the files
    just written are in the page cache, and MemAvailable counts them."""
    size = max(meminfo("MemAvailable") - FREE, MIB)
    m = mmap.mmap(-1, size)
    for i in range(0, size, 4096):
        m[i] = 1
    return m


def stopped_past_mib(pid, floor, timeout=180):
    """As the tests measure a stop (test_guard.stopped_past), in MiB; None
    if the hog was not stopped in time."""
    lists = wait_stopped(pid, timeout)
    if lists is None:
        return None
    return stopped_past(pid, floor, lists) / MIB


def run(out, locked):
    env = dict(os.environ)
    if not locked:
        env["UMTRACE_NO_MLOCK"] = "1"
    hogs = {
        "page": [os.path.join(out, "tests", "pagehog"), "-c", "4", "-t", "65536", "-w",
                 "60000"],
        "gpu": [os.path.join(out, "tests", "alloc_mix"), "-n", "1024", "-s", "64M", "-a",
                "alloc", "-k", "-w", "60000", "-o", "/dev/null"],
    }
    state_file = f"/tmp/umtrace-pressure-{os.getpid()}.state"
    guard = subprocess.Popen([os.path.join(out, "umtrace"), "guard", "-v", "--no-pin",
                              "--state-file", state_file, "--libcuda",
                              os.path.join(out, "tests", "libcuda.so.1"),
                              "--platform", "unified", "--floor", str(FLOOR),
                              "--low", str(FLOOR + 64 * MIB), "--drop", str(FLOOR),
                              "--scope", "comm:^(pagehog|alloc_mix)$"],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True)
    # Over the guard's whole life, as its histogram is.
    sleeper = subprocess.Popen([sys.executable, "-c", SLEEPER], stdout=subprocess.PIPE,
                               text=True)
    lines = []
    threading.Thread(target=lambda: lines.extend(guard.stderr), daemon=True).start()
    try:
        result = measure(guard, lines, hogs, locked)
    finally:
        if guard.poll() is None:
            guard.kill()
            guard.wait(timeout=60)
        sleeper.terminate()
        said = sleeper.communicate(timeout=60)[0].split()
    if len(said) == 2:
        result.update(baseline_p99_ms=float(said[0]), baseline_latest_ms=float(said[1]))
    return result


# The baseline: any process locked and SCHED_FIFO, sleeping 10 ms at a
# time as the helper does, on the same host under the same load. What it
# sees late is the host's (a kernel without preemption finishing reclaim,
# a hypervisor's steal), not the guard's.
SLEEPER = r"""
import ctypes, os, signal, sys, time
ctypes.CDLL(None, use_errno=True).mlockall(1 | 2)
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
late = []
signal.signal(signal.SIGTERM, lambda *a: (print(sorted(late)[int(len(late) * 0.99)] if late
                                                 else -1, max(late, default=-1)), sys.exit(0)))
while True:
    due = time.monotonic() + 0.01
    time.sleep(0.01)
    late.append((time.monotonic() - due) * 1000)
"""


def measure(guard, lines, hogs, locked):
    deadline = time.monotonic() + 300
    while not any("page programs detached" in l for l in lines):
        assert guard.poll() is None, "".join(lines[-20:])
        if time.monotonic() > deadline:
            return {"locked": locked, "never_detached": True}
        time.sleep(0.05)
    helper = subprocess.run(["pgrep", "-P", str(guard.pid), "-x", "umtrace-arm"],
                            capture_output=True, text=True).stdout.split()
    pids = [guard.pid] + [int(h) for h in helper]
    faults0 = sum(majflt(p) for p in pids)
    result = {"locked": locked}
    for kind, argv in hogs.items():
        detached = sum("page programs detached" in l for l in lines)
        hog = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            result[f"{kind}_past_mib"] = stopped_past_mib(hog.pid, FLOOR)
        finally:
            hog.kill()
            hog.wait(timeout=60)
        # Its memory back: the next hog starts with the page programs detached again.
        deadline = time.monotonic() + 60
        while sum("page programs detached" in l for l in lines) == detached:
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
    result["major_faults"] = sum(majflt(p) for p in pids) - faults0
    guard.send_signal(signal.SIGINT)
    guard.wait(timeout=60)
    text = "".join(lines)
    m = LOOKS_RE.search(text)
    if m:
        result.update(looks=int(m.group(1)), latest_ms=float(m.group(2)),
                      p99_ms=int(m.group(3)))
    result["attach_us"] = [int(a) for a, _ in ATTACH_RE.findall(text)]
    return result


def within(ms):
    """The guard's buckets: 99% within 1, 2, 4, ... ms."""
    b = 1
    while b <= ms:
        b *= 2
    return b


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "build/x86"
    stop = threading.Event()
    make_files()
    held = ballast()
    read = threading.Thread(target=reader, args=(stop,), daemon=True)
    read.start()
    results = []
    try:
        for locked in (True, False, True, False):
            r = run(out, locked)
            results.append(r)
            if r.get("never_detached"):
                print(f"{'locked  ' if locked else 'unlocked'}: the page programs never "
                      "detached (late looks keep the margin wide): no hog run", flush=True)
                continue
            past = {k: "not stopped" if r[f"{k}_past_mib"] is None else
                    f"{r[f'{k}_past_mib']:+.1f} MiB" for k in ("page", "gpu")}
            print(f"{'locked  ' if locked else 'unlocked'}: {r.get('looks')} looks, 99% within "
                  f"{r.get('p99_ms')} ms, the latest {r.get('latest_ms')} ms (a FIFO sleeper: "
                  f"{within(r.get('baseline_p99_ms', -1))}, {r.get('baseline_latest_ms', -1):.1f}); "
                  f"{r['major_faults']} major faults; attach {r['attach_us']} us; "
                  f"page hog {past['page']}, GPU hog {past['gpu']} past the floor", flush=True)
    finally:
        stop.set()
        read.join(timeout=30)
        held.close()
        shutil.rmtree(DIR, ignore_errors=True)
    os.makedirs(os.path.join(out, "bench"), exist_ok=True)
    with open(os.path.join(out, "bench", "pressure.json"), "w") as f:
        json.dump({"free_mib": FREE // MIB, "files_mib": FILES // MIB,
                   "floor_mib": FLOOR // MIB, "runs": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
