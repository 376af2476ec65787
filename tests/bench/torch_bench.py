#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""torch_bench.py OUT: what PyTorch's allocator hook costs once probed (the
torch pass of `make bench`; suite.py runs it, or run it alone). Needs root.

tests/bench/hookloop calls the fake libc10's c10::reportMemoryUsageToProfiler
(which has the real one's shape: an out-of-line call first, so its first
instruction saves a register, as a uprobe's emulation wants), in two loops:

  tight   the hook alone, BENCH_TORCH_CALLS times: wall ns per call
  paced   100,000 tensor allocations a second (each freed: 2 hook calls),
          on the test caching allocator, for BENCH_TORCH_SECONDS: the CPU
          time the job used

under three configurations, alternated run by run (BENCH_RUNS each):

  none    nothing probes the hook
  empty   an empty uprobe program on it (tests/bench/empty_tp --uprobe):
          the floor of any uprobe there
  umtrace `umtrace top --libc10 LIB` (the hook's program, bpf/torch.bpf.c)

then, with kernel.bpf_stats_enabled=1, the mean ns per run of the empty
uprobe and of torch_hook over a tight loop each (the statistics' clock reads
are in both: torch_hook less empty_uprobe is the program body).

Environment: BENCH_RUNS (5), BENCH_TORCH_CALLS (200000),
BENCH_TORCH_SECONDS (3), BENCH_TORCH_RATE (100000).
"""
import json
import os
import select
import signal
import statistics
import subprocess
import sys
import time

HOOK = "_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE"
CONFIGS = ["none", "empty", "umtrace"]
STEP_TENSORS = 10000		# a training step's tensor allocations, for the figure in words
BODY_TARGET_NS = 100


def env_int(name, default):
    v = os.environ.get(name)
    return int(v) if v else default


class Probe:
    """A configuration's prober, started and attached, then stopped."""

    def __init__(self, out, cfg):
        self.out, self.cfg, self.p = out, cfg, None
        lib = os.path.realpath(os.path.join(out, "tests", "libc10.so"))
        if cfg == "empty":
            self.argv, self.ready = [os.path.join(out, "bench", "empty_tp"), "--uprobe",
                                     f"{lib}:{HOOK}"], "attached"
        elif cfg == "umtrace":
            self.argv = [os.path.join(out, "umtrace"), "top", "-b", "-i", "1h", "--libcuda",
                         os.path.join(out, "tests", "libcuda.so.1"), "--libc10", lib]
            self.ready = "probing PyTorch's allocator hook"
        else:
            self.argv = None

    def __enter__(self):
        if not self.argv:
            return self
        self.p = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL if self.cfg == "umtrace"
                                  else subprocess.PIPE, stderr=subprocess.PIPE)
        fd = (self.p.stdout if self.cfg == "empty" else self.p.stderr).fileno()
        deadline = time.monotonic() + 30
        seen = b""
        # os.read, not readline: a buffered line would hide from select().
        while self.ready.encode() not in seen:
            left = deadline - time.monotonic()
            if left <= 0 or self.p.poll() is not None:
                self.stop()
                raise RuntimeError(f"{self.cfg} did not attach: {seen[-300:]!r}")
            r, _, _ = select.select([fd], [], [], left)
            if r:
                seen += os.read(fd, 4096)
        return self

    def stop(self):
        if self.p and self.p.poll() is None:
            self.p.send_signal(signal.SIGINT)
            try:
                self.p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(timeout=30)

    def __exit__(self, *exc):
        self.stop()


def hookloop(out, args):
    r = subprocess.run([os.path.join(out, "bench", "hookloop"), *args], capture_output=True,
                       text=True, timeout=600)
    if r.returncode:
        raise RuntimeError(f"hookloop {' '.join(args)}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def prog_ns(names):
    """{name: (run_time_ns, run_cnt)} of the loaded programs named so."""
    r = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True)
    got = {}
    for p in json.loads(r.stdout or "[]"):
        n = p.get("name", "")
        if n in names:
            t, c = got.get(n, (0, 0))
            got[n] = (t + (p.get("run_time_ns") or 0), c + (p.get("run_cnt") or 0))
    return got


def median(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None


def run(out, note=print):
    runs = env_int("BENCH_RUNS", 5)
    calls = env_int("BENCH_TORCH_CALLS", 200000)
    secs = env_int("BENCH_TORCH_SECONDS", 3)
    rate = env_int("BENCH_TORCH_RATE", 100000)
    res = {"settings": {"runs": runs, "calls": calls, "seconds": secs, "rate": rate},
           "tight_ns": {c: [] for c in CONFIGS}, "paced_cpu_s": {c: [] for c in CONFIGS},
           "paced_wall_s": {c: [] for c in CONFIGS}, "stats_ns": {}}
    for i in range(runs):
        for cfg in CONFIGS:
            with Probe(out, cfg):
                res["tight_ns"][cfg].append(hookloop(out, ["-n", str(calls)])["ns_per_call"])
                paced = hookloop(out, ["-r", str(rate), "-t", str(secs)])
                res["paced_cpu_s"][cfg].append(paced["cpu_s"])
                res["paced_wall_s"][cfg].append(paced["wall_s"])
        note(f"torch: run {i + 1}/{runs}: ns per call " +
             ", ".join(f"{c} {res['tight_ns'][c][-1]:.0f}" for c in CONFIGS))
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        old = f.read().strip()
    try:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write("1")
        for cfg, prog in (("empty", "empty_uprobe"), ("umtrace", "torch_hook")):
            vals = []
            for _ in range(runs):
                with Probe(out, cfg):
                    before = prog_ns([prog]).get(prog, (0, 0))
                    hookloop(out, ["-n", str(calls)])
                    after = prog_ns([prog]).get(prog, (0, 0))
                if after[1] > before[1]:
                    vals.append((after[0] - before[0]) / (after[1] - before[1]))
            res["stats_ns"][prog] = vals
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(old)
    return summarize(res)


def summarize(res):
    t = {c: median(v) for c, v in res["tight_ns"].items()}
    cpu = {c: median(v) for c, v in res["paced_cpu_s"].items()}
    wall = {c: median(v) for c, v in res["paced_wall_s"].items()}
    st = {p: median(v) for p, v in res["stats_ns"].items()}
    secs, rate = res["settings"]["seconds"], res["settings"]["rate"]
    s = {}
    if t["none"] is not None and t["umtrace"] is not None:
        s["hook_ns"] = t["umtrace"] - t["none"]
        s["step_ms"] = 2 * STEP_TENSORS * s["hook_ns"] / 1e6
    if t["none"] is not None and t["empty"] is not None:
        s["uprobe_ns"] = t["empty"] - t["none"]
    if st.get("torch_hook") is not None and st.get("empty_uprobe") is not None:
        s["body_ns"] = st["torch_hook"] - st["empty_uprobe"]
    if cpu["none"] and cpu["umtrace"] is not None:
        s["paced_cpu_ratio"] = cpu["umtrace"] / cpu["none"]
        s["paced_us_per_alloc"] = (cpu["umtrace"] - cpu["none"]) * 1e6 / (rate * secs)
        # The loop falls behind when the hook costs more than its pace leaves.
        s["paced_wall_ratio"] = wall["umtrace"] / wall["none"]
        s["paced_rate"] = rate * secs / wall["umtrace"]
        s["paced_core_share"] = cpu["umtrace"] / wall["umtrace"]
        s["paced_core_share_none"] = cpu["none"] / wall["none"]
    res["median"] = {"tight_ns": t, "paced_cpu_s": cpu, "paced_wall_s": wall, "stats_ns": st}
    res["derived"] = s
    return res


def fmt(v, f="{:.1f}"):
    return "-" if v is None else f.format(v)


def print_table(res, p=print):
    m, d = res["median"], res["derived"]
    st = res["settings"]
    p(f"\nPyTorch's allocator hook (c10::reportMemoryUsageToProfiler, fake libc10; "
      f"median of {st['runs']} runs each, alternated)")
    p(f"{'config':<10} {'ns/call':>10} {'paced CPU s':>12} {'paced wall s':>13}   "
      "program ns (bpf_stats on)")
    progs = {"empty": "empty_uprobe", "umtrace": "torch_hook"}
    for c in CONFIGS:
        prog = progs.get(c)
        p(f"{c:<10} {fmt(m['tight_ns'][c]):>10} {fmt(m['paced_cpu_s'][c], '{:.3f}'):>12} "
          f"{fmt(m['paced_wall_s'][c], '{:.3f}'):>13}   "
          + (f"{prog} {fmt(m['stats_ns'].get(prog))}" if prog else ""))
    p(f"  tight loop: {st['calls']:,} calls; paced: {st['rate']:,} allocations/s (and their "
      f"frees: 2 hook calls each) for {st['seconds']} s")
    p(f"  a hook call costs {fmt(d.get('hook_ns'))} ns more probed by umtrace "
      f"(an empty uprobe: {fmt(d.get('uprobe_ns'))}); the program body "
      f"{fmt(d.get('body_ns'))} ns (torch_hook less empty_uprobe, both under bpf_stats)")
    if "paced_cpu_ratio" in d:
        p(f"  {st['rate']:,} allocations/s: {100 * d['paced_core_share_none']:.1f}% of a core "
          f"untraced, {100 * d['paced_core_share']:.1f}% probed ({d['paced_us_per_alloc']:.2f} "
          f"us more per allocation and its free); the loop took x{d['paced_wall_ratio']:.2f} "
          f"its time ({d['paced_rate']:,.0f} allocations/s reached)")
    if "step_ms" in d:
        p(f"  a training step of {STEP_TENSORS:,} tensor allocations (and frees) pays "
          f"{d['step_ms']:.1f} ms")


def target(res):
    body = res["derived"].get("body_ns")
    if body is None:
        return ("N/A", f"torch hook body <= {BODY_TARGET_NS} ns", "not measured")
    return ("PASS" if body <= BODY_TARGET_NS else "MISS",
            f"torch hook body <= {BODY_TARGET_NS} ns",
            f"{body:.1f} ns (torch_hook {res['median']['stats_ns']['torch_hook']:.1f} less "
            f"empty_uprobe {res['median']['stats_ns']['empty_uprobe']:.1f})")


def main():
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    if os.geteuid():
        print("torch_bench.py: needs root", file=sys.stderr)
        return 1
    out = sys.argv[1]
    res = run(out, lambda m: print(m, file=sys.stderr))
    print_table(res)
    v, name, detail = target(res)
    print(f"  {v:<5} {name:<36} {detail}")
    path = os.path.join(out, "bench", "torch.json")
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
