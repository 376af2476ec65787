#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Soak: umtrace guard and umtrace trace --json side by side for a long
time, under memory churn (stress-ng --vm, or tests/workloads/pagehog in a
loop when stress-ng is missing) and a loop of fake-libcuda workloads.

It fails when
  - trace or guard crashes, or exits other than 0 at the end;
  - the guard stops anything (its floor is far below what the host has);
  - the VmRSS of either grows more than 10% from the first quarter of the
    run to the last (the largest sample of each, every SOAK_SAMPLE s);
  - the trace's GPU calls differ from the workloads' own counts, less
    what the trace says it lost.

usage: tests/soak/soak.py --out build/x86 [--seconds N] [--report FILE]
  SOAK_SECONDS (default 1800) and SOAK_SAMPLE (default 5) in the
  environment do the same as --seconds and --sample. Needs root.
Prints one line of figures, and with --report writes them as JSON.
"""
import argparse
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "integration"))
import harness  # noqa: E402  (tests/integration/harness.py: waits with deadlines)

GROWTH_LIMIT = 0.10
# What alloc_mix counts but umtrace does not probe.
UNPROBED = {"cuInit", "cuMemSetAccess"}
MIB = 1 << 20

# The workload mix, one per iteration in turn: every kind of call, frees
# inside calls and at exit, threads, a process that exits inside a call,
# the driver's page pool.
MIX = [
    (["-t", "4", "-n", "40", "-s", "256K", "-a", "alloc,hostalloc,async,pool", "-F"], {}),
    (["-t", "2", "-n", "10", "-s", "1M", "-a", "all", "-F"], {}),
    (["-t", "2", "-n", "20", "-s", "512K", "-a", "alloc,vmm,managed,register"], {}),
    (["-t", "3", "-n", "20", "-s", "256K", "-a", "alloc,hostalloc,vmm", "-k"], {}),
    (["-t", "2", "-n", "30", "-s", "1M", "-a", "alloc,async", "-F"], {"FAKECUDA_POOL": "1"}),
    (["-t", "1", "-n", "5", "-s", "2M", "-a", "alloc", "-x"], {}),
]


def log(msg):
    print(f"soak: {msg}", file=sys.stderr, flush=True)


def vm_rss_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return None


def meminfo(key):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} in /proc/meminfo")


def wait_for_line(p, needle, timeout=60):
    """Read p's stderr until a line holds needle; what was read. The
    deadline holds even when p says nothing at all."""
    try:
        return harness.wait_line(p.stderr, needle, timeout)[1]
    except AssertionError as e:
        raise RuntimeError(f"never said {needle!r}: {e}") from None


def drain(stream, sink):
    """Keep a pipe from filling up; the lines go to sink."""
    import threading

    def run():
        for line in stream:
            sink.append(line)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


# ---- the traced command: workloads in a loop ----

def workloads(out, until, truth_dir):
    """Run the mix until the monotonic deadline; each run writes its truth."""
    alloc_mix = os.path.join(out, "tests", "alloc_mix")
    i = 0
    failed = 0
    while time.monotonic() < until:
        args, extra = MIX[i % len(MIX)]
        truth = os.path.join(truth_dir, f"run-{i:06d}.json")
        p = subprocess.run([alloc_mix, *args, "-o", truth], env=dict(os.environ, **extra),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           timeout=300)
        if p.returncode:
            failed += 1
            log(f"workload {args} exited {p.returncode}: {p.stderr.strip()[-200:]}")
        i += 1
    return 1 if failed else 0


# ---- memory churn ----

def start_churn(out, seconds, tmp):
    """stress-ng --vm, or pagehog in a loop when stress-ng is not installed."""
    if shutil.which("stress-ng"):
        return subprocess.Popen(["stress-ng", "--vm", "1", "--vm-bytes", "256M",
                                 "--vm-method", "all", "--timeout", f"{seconds}s", "-q"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), \
            "stress-ng --vm 1 --vm-bytes 256M"
    hog = os.path.join(out, "tests", "pagehog")
    script = f"end=$(( $(date +%s) + {seconds} )); " \
             f"while [ $(date +%s) -lt $end ]; do {hog} -c 4 -t 256 -w 200; done"
    return subprocess.Popen(["sh", "-c", script], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL), "pagehog loop (no stress-ng)"


# ---- checks ----

def truth_calls(truth_dir):
    """Calls the workloads made, and how many processes made them."""
    calls, runs = 0, 0
    for path in sorted(glob.glob(os.path.join(truth_dir, "run-*.json"))):
        with open(path) as f:
            t = json.load(f)
        calls += sum(c["calls"] for api, c in t["calls"].items() if api not in UNPROBED)
        runs += 1
    return calls, runs


def trace_counts(path):
    calls, exits, totals, bad = 0, 0, None, 0
    with open(path) as f:
        for line in f:
            if not line.startswith("{"):
                continue
            try:
                o = json.loads(line)
            except ValueError:
                bad += 1
                continue
            ev = o.get("event")
            if ev in ("alloc", "free"):
                calls += 1
            elif ev == "exit":
                exits += 1
            elif ev == "totals":
                totals = o
    return calls, exits, totals, bad


def growth(samples):
    """Largest VmRSS of the first quarter and of the last one (KiB)."""
    vals = [v for _, v in samples if v is not None]
    if len(vals) < 8:
        return None, None
    q = len(vals) // 4
    return max(vals[:q]), max(vals[-q:])


def soak(args):
    out = os.path.abspath(args.out)
    umtrace = os.path.join(out, "umtrace")
    fake = os.path.join(out, "tests", "libcuda.so.1")
    for p in (umtrace, fake, os.path.join(out, "tests", "alloc_mix")):
        if not os.path.exists(p):
            raise SystemExit(f"soak: {p} not built")
    if os.geteuid() != 0:
        raise SystemExit("soak: needs root (BPF)")
    tmp = tempfile.mkdtemp(prefix="umtrace-soak-")
    truth_dir = os.path.join(tmp, "truth")
    os.makedirs(truth_dir)
    trace_out = os.path.join(tmp, "trace.json")
    procs = []
    failures = []
    fig = {"seconds": args.seconds, "dir": tmp}
    try:
        total = meminfo("MemTotal")
        # Far below anything this host gets to: the guard must stop nothing.
        guard = subprocess.Popen([umtrace, "guard", "--no-pin", "--state-file",
                                  os.path.join(tmp, "guard.state"), "--platform", "unified",
                                  "--libcuda", fake, "--floor", "64M", "--low", "128M",
                                  "--drop", str(total // 2)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        procs.append(guard)
        guard_err = [wait_for_line(guard, "guard: armed")]
        drain(guard.stderr, guard_err)

        until = time.monotonic() + args.seconds
        with open(trace_out, "w") as tf:
            trace = subprocess.Popen([umtrace, "trace", "--json", "--libcuda", fake, "--",
                                      sys.executable, os.path.abspath(__file__), "--workloads",
                                      "--out", out, "--until-in", str(args.seconds),
                                      "--truth-dir", truth_dir],
                                     stdout=tf, stderr=subprocess.PIPE, text=True)
        procs.append(trace)
        trace_err = [wait_for_line(trace, "probing")]
        drain(trace.stderr, trace_err)
        churn, fig["churn"] = start_churn(out, args.seconds, tmp)
        procs.append(churn)
        log(f"{args.seconds} s: trace pid {trace.pid}, guard pid {guard.pid}, {fig['churn']}")

        samples = {"trace": [], "guard": []}
        while trace.poll() is None and time.monotonic() < until + 300:
            for name, p in (("trace", trace), ("guard", guard)):
                samples[name].append((time.monotonic(), vm_rss_kib(p.pid)))
            if guard.poll() is not None:
                failures.append(f"guard died: exit {guard.returncode}")
                break
            time.sleep(args.sample)
        if trace.poll() is None:
            failures.append("trace did not end with its command")
            trace.send_signal(signal.SIGINT)
        trace.wait(timeout=120)
        if trace.returncode != 0:
            failures.append(f"trace exited {trace.returncode}: {''.join(trace_err)[-400:]}")
        if guard.poll() is None:
            guard.send_signal(signal.SIGINT)
            guard.wait(timeout=60)
            if guard.returncode != 0:
                failures.append(f"guard exited {guard.returncode}: {''.join(guard_err)[-400:]}")
        churn.wait(timeout=120)

        stops = [l for l in guard_err if "guard: stop " in l or "would-stop" in l]
        if stops:
            failures.append(f"guard stopped {len(stops)} processes: {stops[0].strip()}")
        made, runs = truth_calls(truth_dir)
        seen, exits, totals, bad = trace_counts(trace_out)
        dropped = totals["dropped"] if totals else None
        fig.update(runs=runs, calls_made=made, calls_seen=seen, dropped=dropped,
                   exits_seen=exits, bad_lines=bad)
        if totals is None:
            failures.append("no totals line from trace")
        elif bad:
            failures.append(f"{bad} unreadable lines in the trace")
        else:
            # Each process also sends one exit record, which may be the one lost.
            lost_exits = runs - exits
            if seen + dropped != made + lost_exits or lost_exits < 0:
                failures.append(f"calls: {seen} seen + {dropped} lost != {made} made "
                                f"(+{lost_exits} exit records lost)")
            if totals["unfreed"] and not dropped:
                failures.append(f"{totals['unfreed']} allocations left unfreed: {totals}")
        for name, s in samples.items():
            first, last = growth(s)
            vals = [v for _, v in s if v is not None]
            fig[f"{name}_rss_kib"] = {"start": vals[0] if vals else None,
                                      "first_quarter_max": first, "last_quarter_max": last,
                                      "end": vals[-1] if vals else None, "samples": len(vals)}
            if first is None:
                failures.append(f"{name}: too few RSS samples ({len(vals)})")
            elif last > first * (1 + GROWTH_LIMIT):
                failures.append(f"{name} RSS grew {first} -> {last} KiB "
                                f"(+{100.0 * (last - first) / first:.1f}%)")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
    fig["failures"] = failures
    t, g = fig.get("trace_rss_kib", {}), fig.get("guard_rss_kib", {})
    print(f"soak: {args.seconds} s, {fig.get('runs')} workload runs, "
          f"{fig.get('calls_seen')} calls seen + {fig.get('dropped')} lost of "
          f"{fig.get('calls_made')} made; RSS KiB trace {t.get('start')} -> "
          f"{t.get('first_quarter_max')} -> {t.get('last_quarter_max')}, guard "
          f"{g.get('start')} -> {g.get('first_quarter_max')} -> {g.get('last_quarter_max')}: "
          f"{'FAIL: ' + '; '.join(failures) if failures else 'PASS'}", flush=True)
    if args.report:
        with open(args.report, "w") as f:
            json.dump(fig, f, indent=1)
    if not failures and not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="build output directory, e.g. build/x86")
    ap.add_argument("--seconds", type=int, default=int(os.environ.get("SOAK_SECONDS", 1800)))
    ap.add_argument("--sample", type=float, default=float(os.environ.get("SOAK_SAMPLE", 5)))
    ap.add_argument("--report", help="write the figures here as JSON")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    # the traced command (internal)
    ap.add_argument("--workloads", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--until-in", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--truth-dir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.workloads:
        return workloads(os.path.abspath(args.out), time.monotonic() + args.until_in,
                         args.truth_dir)
    if args.seconds < 40:
        ap.error("--seconds: at least 40 (RSS needs samples in each quarter)")
    return soak(args)


if __name__ == "__main__":
    sys.exit(main())
