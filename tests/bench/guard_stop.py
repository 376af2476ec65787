#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""guard_stop.py OUT: how close to the floor, and how fast, the guard stops
a hog, against earlyoom with the same threshold.

Hogs, each run at the fastest rate this machine reaches:
  gpu   64 MiB cuMemAlloc_v2 calls through the fake libcuda (unified mode)
  page  anonymous pages faulted in 4 MiB at a time (tests/workloads/pagehog)

Per run the floor is set BENCH_HEADROOM_MIB below what is available, so the
real host is never at risk. Each hog starts once the guard's helper has
detached its page programs (over twice its margin from the floor): the hog
crosses the arming on its way (page_programs_at_start in the JSON says
where it did not). Figures:
  overshoot  how far MemAvailable went below the floor (negative: the stop
             came that much before it), from 1 ms samples and after the stop
  latency    from the kernel's decision (ts= in the guard's stop line,
             CLOCK_MONOTONIC) to SIGSTOP delivered to the hog (signal_deliver,
             seen by bpftrace) and, as a poller sees it, to state T
earlyoom is given -M FLOOR in KiB and --prefer the hog; it polls and sends
SIGTERM, so its figure is how far MemAvailable fell before the hog died.

Prints a table; writes OUT/bench/guard_stop.json. Needs root.
Environment: BENCH_RUNS=5, BENCH_HEADROOM_MIB=1536.
"""
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

MIB = 1 << 20
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
HEADROOM = int(os.environ.get("BENCH_HEADROOM_MIB", "1536")) * MIB


def available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no MemAvailable")


def state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


def hog_argv(out, kind):
    if kind == "gpu":
        return [os.path.join(out, "tests", "alloc_mix"), "-n", "64", "-s", "64M", "-a",
                "alloc", "-k", "-o", "/dev/null", "-w", "3000"]
    return [os.path.join(out, "tests", "pagehog"), "-c", "4", "-t", "4096", "-w", "3000"]


def start_guard(out, floor, tmp):
    argv = [os.path.join(out, "umtrace"), "guard", "--libcuda",
            os.path.join(out, "tests", "libcuda.so.1"), "--platform", "unified",
            "--no-pin", "--state-file", os.path.join(tmp, "state"), "--floor", str(floor),
            "--low", str(floor + 64 * MIB), "--scope", "comm:^(alloc_mix|pagehog)$"]
    g = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    for line in g.stderr:
        if "guard: armed" in line:
            return g
    raise RuntimeError("the guard did not arm")


def settle(out, tmp, g, timeout=30):
    """Until the guard's helper has detached its page programs (or said they
    stay attached): each hog then starts far from the floor as the guard
    sees it, and crosses the arming on its way. Returns that state."""
    deadline = time.monotonic() + timeout
    st = {}
    while time.monotonic() < deadline and g.poll() is None:
        r = subprocess.run([os.path.join(out, "umtrace"), "status", "--json", "--state-file",
                            os.path.join(tmp, "state")], capture_output=True, text=True,
                           timeout=10)
        try:
            st = json.loads(r.stdout)
        except ValueError:
            st = {}
        if st.get("page_programs") in ("detached", "always"):
            break
        time.sleep(0.05)
    return st.get("page_programs")


class Deliveries:
    """SIGSTOP deliveries by pid, from bpftrace's signal_deliver (ns, monotonic)."""

    PROG = ('tracepoint:signal:signal_deliver /args->sig == 19/ '
            '{ printf("%d %llu\\n", pid, nsecs); } BEGIN { printf("ready\\n"); }')

    def __init__(self):
        self.p = None
        if not shutil.which("bpftrace"):
            return
        if not os.path.exists("/sys/kernel/tracing/events"):
            subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"],
                           capture_output=True)
        self.p = subprocess.Popen(["bpftrace", "-e", self.PROG], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL)
        self.seen, self.buf = {}, b""
        deadline = time.monotonic() + 30
        while b"ready\n" not in self.buf and time.monotonic() < deadline:
            self.buf += os.read(self.p.stdout.fileno(), 4096)
        if b"ready\n" not in self.buf:
            self.close()
            return
        self.buf = self.buf.split(b"ready\n", 1)[1]
        os.set_blocking(self.p.stdout.fileno(), False)

    def first(self, pid):
        if not self.p:
            return None
        try:
            while True:
                chunk = os.read(self.p.stdout.fileno(), 65536)
                if not chunk:
                    break
                self.buf += chunk
        except BlockingIOError:
            pass
        *lines, self.buf = self.buf.split(b"\n")
        for line in lines:
            spid, ns = line.split()
            self.seen.setdefault(int(spid), int(ns))
        return self.seen.get(pid)

    def close(self):
        if self.p:
            self.p.kill()
            self.p.wait(timeout=30)
            self.p = None


def run_guard(out, kind, tmp, deliveries):
    floor = available() - HEADROOM
    g = start_guard(out, floor, tmp)
    pages = settle(out, tmp, g)
    hog = subprocess.Popen(hog_argv(out, kind))
    t_start = time.monotonic()
    low, t_stop = available(), None
    while time.monotonic() - t_start < 30:
        if state(hog.pid) == "T":
            t_stop = time.monotonic_ns()
            break
        if hog.poll() is not None:
            break
        low = min(low, available())
    rate = (HEADROOM - (available() - floor)) / max(time.monotonic() - t_start, 1e-3)
    time.sleep(0.3)
    after = available()
    hog.kill()
    hog.wait(timeout=30)
    g.send_signal(signal.SIGINT)
    err = g.communicate(timeout=30)[1]
    m = re.search(r"guard: stop pid=%d ts=(\d+)\.(\d+)" % hog.pid, err)
    if not t_stop or not m:
        return {"stopped": False}
    decided = int(m.group(1)) * 1000000000 + int(m.group(2))
    time.sleep(0.1)
    delivered = deliveries.first(hog.pid)
    return {"stopped": True, "overshoot_mib": (floor - min(low, after)) / MIB,
            "latency_ms": (t_stop - decided) / 1e6, "rate_mib_s": rate / MIB,
            "deliver_ms": (delivered - decided) / 1e6 if delivered else None,
            "reason": re.search(r"reason=(\w+)", err[m.start():]).group(1),
            "page_programs_at_start": pages,
            "line": err[m.start():].split("\n", 1)[0]}


def run_earlyoom(out, kind):
    floor = available() - HEADROOM
    eo = subprocess.Popen(["earlyoom", "-M", str(floor // 1024), "-s", "100", "-r", "0",
                           "-p", "--prefer", "^(alloc_mix|pagehog)$"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(1)
    hog = subprocess.Popen(hog_argv(out, kind))
    low = available()
    while hog.poll() is None:
        low = min(low, available())
    eo.send_signal(signal.SIGTERM)
    eo.communicate(timeout=30)
    killed = hog.returncode in (-signal.SIGTERM, -signal.SIGKILL)
    return {"stopped": killed, "overshoot_mib": (floor - low) / MIB}


def summary(vals):
    if not vals:
        return "-"
    return f"{statistics.median(vals):8.1f} [{min(vals):.1f}, {max(vals):.1f}]"


def p99(vals):
    s = sorted(vals)
    return s[min(len(s) - 1, int(0.99 * len(s)))] if s else None


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: guard_stop.py OUT")
    out = os.path.abspath(sys.argv[1])
    if os.geteuid():
        sys.exit("guard_stop.py: needs root")
    have_eo = shutil.which("earlyoom") is not None
    results = {}
    deliveries = Deliveries()
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(RUNS):
            for kind in ("gpu", "page"):
                results.setdefault(f"guard/{kind}", []).append(
                    run_guard(out, kind, tmp, deliveries))
                if have_eo:
                    results.setdefault(f"earlyoom/{kind}", []).append(run_earlyoom(out, kind))
    deliveries.close()
    print(f"{'tool/hog':<14} {'runs':>4} {'stopped':>7}  {'overshoot MiB median [min, max]':<32}"
          f" {'to SIGSTOP delivered, ms':<26} {'p99':>6}  {'to state T seen, ms':<26}"
          f" {'p99':>6}  {'MiB/s':>6}")
    table = {}
    for key, runs in results.items():
        ok = [r for r in runs if r["stopped"]]
        over = [r["overshoot_mib"] for r in ok]
        lat = [r["latency_ms"] for r in ok if "latency_ms" in r]
        dlv = [r["deliver_ms"] for r in ok if r.get("deliver_ms") is not None]
        rate = [r["rate_mib_s"] for r in ok if "rate_mib_s" in r]
        table[key] = {"runs": runs, "overshoot_mib_max": max(over) if over else None,
                      "deliver_ms_p99": p99(dlv), "state_t_ms_p99": p99(lat)}
        nan = float("nan")
        print(f"{key:<14} {len(runs):>4} {len(ok):>7}  {summary(over):<32} {summary(dlv):<26}"
              f" {p99(dlv) if dlv else nan:6.2f}  {summary(lat):<26}"
              f" {p99(lat) if lat else nan:6.2f}  "
              f"{statistics.median(rate) if rate else nan:6.0f}")
    starts = [r.get("page_programs_at_start") for k, runs in results.items()
              if k.startswith("guard/") for r in runs if r["stopped"]]
    print(f"guard runs whose hog started with the page programs detached: "
          f"{starts.count('detached')} of {len(starts)}")
    if not have_eo:
        print("earlyoom: not installed (apt-get install earlyoom), not compared")
    os.makedirs(os.path.join(out, "bench"), exist_ok=True)
    with open(os.path.join(out, "bench", "guard_stop.json"), "w") as f:
        json.dump(table, f, indent=1)


if __name__ == "__main__":
    main()
