#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""torch_bench.py OUT: what PyTorch's allocator hook costs once probed (the
torch pass of `make bench`; suite.py runs it, or run it alone). Needs root.

tests/bench/hookloop calls the fake libc10's c10::reportMemoryUsageToProfiler
(which has the real one's shape: an out-of-line call first, so its first
instruction saves a register, as a uprobe's emulation wants), in two loops:

  tight   the hook alone, BENCH_TORCH_CALLS times: wall ns per call
  paced   100,000 tensor allocations a second (each freed: 2 hook calls),
          on the test caching allocator, for BENCH_TORCH_SECONDS, from
          300 ms after its warm-up (its segments): the CPU time the job used

under these configurations, alternated run by run (BENCH_RUNS each):

  none      nothing probes the hook
  empty     an empty uprobe program on it (tests/bench/empty_tp --uprobe):
            the floor of any uprobe there
  every     `umtrace top --libc10 LIB --libc10-every-call` (the hook's
            program, bpf/torch.bpf.c, on every call)
  top       `umtrace top --libc10 LIB`: the hook attached in windows
  top-perf  the same with UMTRACE_NO_UPROBE_MULTI=1: one perf-event uprobe
            per form, the attach path of kernels before 6.6
  guard     `umtrace guard --floor 1% --no-pin --libc10 LIB` (never stops
            anything here), the hook in windows

then, with kernel.bpf_stats_enabled=1, the mean ns per run of the empty
uprobe and of torch_hook over a tight loop each (the statistics' clock reads
are in both: torch_hook less empty_uprobe is the program body). Each
windowed configuration runs with -v, and says at its end how many windows
it opened and what attaching and detaching the hook took on average.

Environment: BENCH_RUNS (5), BENCH_TORCH_CALLS (200000),
BENCH_TORCH_SECONDS (10: several of the windows' periods), BENCH_TORCH_RATE
(100000).
"""
import json
import os
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HOOK = "_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE"
CONFIGS = ["none", "empty", "every", "top", "top-perf", "guard"]
WINDOWED = ("top", "top-perf", "guard")
STEP_TENSORS = 10000		# a training step's tensor allocations, for the figure in words
BODY_TARGET_NS = 100
PACED_TARGET = 0.02		# of a core, the windowed hook's cost at the paced rate
WINDOW_LINE = re.compile(r"hook: (\d+) windows \((\d+) for its segments' moves, (\d+) closed "
                         r"with their \d+ calls taken\); attaching took (\d+) us, detaching "
                         r"(\d+) us")


def env_int(name, default):
    v = os.environ.get(name)
    return int(v) if v else default


class Probe:
    """A configuration's prober, started and attached, then stopped."""

    def __init__(self, out, cfg, tmp=None):
        self.out, self.cfg, self.p, self.env = out, cfg, None, None
        self.windows = None	# (opened, cued, spent, attach us, detach us) of a windowed one
        lib = os.path.realpath(os.path.join(out, "tests", "libc10.so"))
        libs = ["--libcuda", os.path.join(out, "tests", "libcuda.so.1"), "--libc10", lib]
        umt = os.path.join(out, "umtrace")
        self.ready = "probing PyTorch's allocator hook"
        if cfg == "empty":
            self.argv, self.ready = [os.path.join(out, "bench", "empty_tp"), "--uprobe",
                                     f"{lib}:{HOOK}"], "attached"
        elif cfg == "every":
            self.argv = [umt, "top", "-b", "-i", "1h", *libs, "--libc10-every-call"]
        elif cfg in ("top", "top-perf"):
            self.argv = [umt, "top", "-b", "-i", "1h", "-v", *libs]
            if cfg == "top-perf":
                self.env = dict(os.environ, UMTRACE_NO_UPROBE_MULTI="1")
        elif cfg == "guard":
            self.argv = [umt, "guard", "--floor", "1%", "--no-pin", "-v", "--state-file",
                         os.path.join(tmp, "guard.state"), *libs]
        else:
            self.argv = None

    def __enter__(self):
        if not self.argv:
            return self
        self.p = subprocess.Popen(self.argv, stdout=subprocess.PIPE if self.cfg == "empty"
                                  else subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  env=self.env)
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
        if not self.p or self.p.poll() is not None:
            return
        self.p.send_signal(signal.SIGINT)
        try:
            _, err = self.p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            _, err = self.p.communicate(timeout=30)
        m = WINDOW_LINE.search((err or b"").decode(errors="replace"))
        if m:
            self.windows = tuple(int(x) for x in m.groups())

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
    secs = env_int("BENCH_TORCH_SECONDS", 10)
    rate = env_int("BENCH_TORCH_RATE", 100000)
    res = {"settings": {"runs": runs, "calls": calls, "seconds": secs, "rate": rate},
           "tight_ns": {c: [] for c in CONFIGS}, "paced_cpu_s": {c: [] for c in CONFIGS},
           "paced_wall_s": {c: [] for c in CONFIGS}, "stats_ns": {},
           "windows": {c: [] for c in WINDOWED}}
    tmp = tempfile.mkdtemp(prefix="umtrace-torch-bench-")
    try:
        paced_runs(out, res, tmp, note)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    stats_runs(out, res)
    return summarize(res)


def paced_runs(out, res, tmp, note):
    st = res["settings"]
    calls, rate, secs = st["calls"], st["rate"], st["seconds"]
    for i in range(st["runs"]):
        for cfg in CONFIGS:
            with Probe(out, cfg, tmp) as probe:
                res["tight_ns"][cfg].append(hookloop(out, ["-n", str(calls)])["ns_per_call"])
                # Past its warm-up: the window its segments opened has closed.
                paced = hookloop(out, ["-r", str(rate), "-t", str(secs), "-d", "300"])
                res["paced_cpu_s"][cfg].append(paced["cpu_s"])
                res["paced_wall_s"][cfg].append(paced["wall_s"])
            if cfg in WINDOWED:
                res["windows"][cfg].append(probe.windows)
        note(f"torch: run {i + 1}/{st['runs']}: ns per call " +
             ", ".join(f"{c} {res['tight_ns'][c][-1]:.0f}" for c in CONFIGS))


def stats_runs(out, res):
    runs, calls = res["settings"]["runs"], res["settings"]["calls"]
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        old = f.read().strip()
    try:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write("1")
        for cfg, prog in (("empty", "empty_uprobe"), ("every", "torch_hook")):
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


def summarize(res):
    t = {c: median(v) for c, v in res["tight_ns"].items()}
    cpu = {c: median(v) for c, v in res["paced_cpu_s"].items()}
    wall = {c: median(v) for c, v in res["paced_wall_s"].items()}
    st = {p: median(v) for p, v in res["stats_ns"].items()}
    secs, rate = res["settings"]["seconds"], res["settings"]["rate"]
    s = {"paced": {}, "windows": {}}
    if t["none"] is not None and t["every"] is not None:
        s["hook_ns"] = t["every"] - t["none"]
        s["step_ms"] = 2 * STEP_TENSORS * s["hook_ns"] / 1e6
    if t["none"] is not None and t["empty"] is not None:
        s["uprobe_ns"] = t["empty"] - t["none"]
    if st.get("torch_hook") is not None and st.get("empty_uprobe") is not None:
        s["body_ns"] = st["torch_hook"] - st["empty_uprobe"]
    for c in CONFIGS:
        if c == "none" or not cpu["none"] or cpu[c] is None:
            continue
        # The loop falls behind when the hook costs more than its pace leaves.
        s["paced"][c] = {"core_share": cpu[c] / wall[c],
                         "cost_share": (cpu[c] - cpu["none"]) / wall[c],
                         "us_per_alloc": (cpu[c] - cpu["none"]) * 1e6 / (rate * secs),
                         "wall_ratio": wall[c] / wall["none"],
                         "rate": rate * secs / wall[c]}
    s["paced_core_share_none"] = cpu["none"] / wall["none"] if cpu["none"] else None
    for c, runs in res["windows"].items():
        runs = [r for r in runs if r]
        if runs:
            s["windows"][c] = {"opened": median([r[0] for r in runs]),
                               "cued": median([r[1] for r in runs]),
                               "spent": median([r[2] for r in runs]),
                               "attach_us": median([r[3] for r in runs]),
                               "detach_us": median([r[4] for r in runs])}
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
    p(f"{'config':<10} {'ns/call':>10} {'paced CPU s':>12} {'paced wall s':>13} "
      f"{'cost':>7}   windows: opened (cued, spent), attach us, detach us")
    for c in CONFIGS:
        pc = d["paced"].get(c)
        w = d["windows"].get(c)
        p(f"{c:<10} {fmt(m['tight_ns'][c]):>10} {fmt(m['paced_cpu_s'][c], '{:.3f}'):>12} "
          f"{fmt(m['paced_wall_s'][c], '{:.3f}'):>13} "
          f"{fmt(pc and 100 * pc['cost_share'], '{:.2f}%'):>7}   "
          + (f"{w['opened']:.0f} ({w['cued']:.0f} cued, {w['spent']:.0f} spent), "
             f"{w['attach_us']:.0f}, "
             f"{w['detach_us']:.0f}" if w else ""))
    p(f"  tight loop: {st['calls']:,} calls; paced: {st['rate']:,} allocations/s (and their "
      f"frees: 2 hook calls each) for {st['seconds']} s; cost: the paced job's CPU time "
      "more than untraced, as a share of a core")
    p(f"  a hook call costs {fmt(d.get('hook_ns'))} ns more probed on every call "
      f"(an empty uprobe: {fmt(d.get('uprobe_ns'))}); the program body "
      f"{fmt(d.get('body_ns'))} ns (torch_hook less empty_uprobe, both under bpf_stats "
      f"{fmt(m['stats_ns'].get('torch_hook'))} and {fmt(m['stats_ns'].get('empty_uprobe'))})")
    if d.get("paced_core_share_none") is not None:
        p(f"  {st['rate']:,} allocations/s: {100 * d['paced_core_share_none']:.1f}% of a core "
          "untraced; " + "; ".join(
              f"{c} {100 * v['core_share']:.1f}% ({v['us_per_alloc']:.3f} us more per "
              f"allocation and its free, {v['rate']:,.0f}/s reached)"
              for c, v in d["paced"].items() if c != "empty"))
    if "step_ms" in d:
        p(f"  a training step of {STEP_TENSORS:,} tensor allocations (and frees) pays "
          f"{d['step_ms']:.1f} ms with every call probed; "
          + ", ".join(f"{c} {d['paced'][c]['us_per_alloc'] * STEP_TENSORS / 1e3:.2f} ms"
                      for c in WINDOWED if c in d["paced"]))


def targets(res):
    d = res["derived"]
    body = d.get("body_ns")
    out = []
    if body is None:
        out.append(("N/A", f"torch hook body <= {BODY_TARGET_NS} ns", "not measured"))
    else:
        out.append(("PASS" if body <= BODY_TARGET_NS else "MISS",
                    f"torch hook body <= {BODY_TARGET_NS} ns",
                    f"{body:.1f} ns (torch_hook {res['median']['stats_ns']['torch_hook']:.1f} "
                    f"less empty_uprobe {res['median']['stats_ns']['empty_uprobe']:.1f})"))
    rate = res["settings"]["rate"]
    for c in ("top", "guard"):
        pc = d["paced"].get(c)
        name = f"{c}: {rate:,} allocations/s pay <= {100 * PACED_TARGET:.0f}% of a core"
        if not pc:
            out.append(("N/A", name, "not measured"))
            continue
        out.append(("PASS" if pc["cost_share"] <= PACED_TARGET else "MISS", name,
                    f"{100 * pc['cost_share']:.2f}% (every call: "
                    f"{100 * d['paced']['every']['cost_share']:.1f}%)"
                    if "every" in d["paced"] else f"{100 * pc['cost_share']:.2f}%"))
    return out


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
    for v, name, detail in targets(res):
        print(f"  {v:<5} {name:<44} {detail}")
    path = os.path.join(out, "bench", "torch.json")
    with open(path, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
