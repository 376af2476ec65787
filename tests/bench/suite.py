#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""suite.py OUT: what umtrace costs, side by side with the tools people use
instead. `make bench` runs it (through overhead.sh); needs root.

Workloads
  storm   tests/bench/storm: mmap, touch every 4 KiB page, munmap, on
          BENCH_THREADS threads (every page one mm_page_alloc and one free)
  stress  stress-ng --vm (write64, remapping between passes)
  calls   GPU call storm: alloc_mix, 4 KiB cuMemAlloc_v2 + cuMemFree_v2
          pairs on 2 threads through the fake libcuda (FAKECUDA_MODE=discrete,
          its cheapest calls, for the highest rate)
  mixed   storm and a 1-thread GPU call storm at once; the time is until both
          are done

Configurations (each a tracer started before the workload and stopped after
it, system-wide)
  none      no tracer
  empty     an empty tp_btf program on mm_page_alloc: the floor any BPF page
            tracer pays (tests/bench/empty_tp)
  guard     umtrace guard --floor 1% (never stops anything here), --no-pin:
            --page-programs auto, the default. Far from the floor, as here,
            its page programs (mm_page_alloc, mm_page_free) are detached: a
            helper process of its own (umtrace-arm) attaches them only when
            the headroom nears the floor. Each run waits until the guard
            says they are detached (umtrace status) before the workload,
            so what is measured is the guard as it runs far from the floor;
            the helper's CPU time is the guard's
  guard-always  the same with --page-programs always: the page programs
            attached all the time, as the guard was before, and as it is
            within its margin above LOW
  trace     umtrace trace --json > /dev/null
  record    umtrace record -o FILE
  record-fp umtrace record -o FILE --stack fp (GPU call storm only: no stack
            copies through the ring buffer, unlike record's default)
  bpftrace  a bpftrace script counting mm_page_alloc and mm_page_free per
            thread
  perf      perf record -e kmem:mm_page_alloc -a
The GPU call storm runs under none, guard, guard-always, trace, record and
record-fp only
(the peers do not see GPU calls). BCC's memleak is not run (said in the
output): Debian's libbpf-tools does not ship it, and BCC's Python tools need
kernel headers.

Passes
  0. slices (BENCH_SLICE_PAIRS=0 skips it): the storm's slowdown measured
     finely. Whole runs differ by 10 to 30% from one to the next on a
     shared VM, whatever the tracer; 32 MiB slices of one storm 25 ms apart
     differ by a few percent. tests/bench/interleave loads a configuration's
     programs once and attaches them for every other slice, in pairs (off
     on, on off, ...); the slowdown is the median of each pair's on/off
     ratio, with its distribution-free 95% interval. For guard and trace
     the real tracer is started first and its BPF object is copied as it
     set it up (its .rodata and .bss, the programs it attached); then it
     is stopped, so its own programs are gone. Its user space is not in
     these figures: it did no work in a storm (its CPU time is in the
     tracers' table). Configurations: control (nothing ever attached: the
     method's own check, which should come out at 0), empty (empty_alloc),
     empty-pair (empty programs on mm_page_alloc and mm_page_free: the
     floor of a tracer that must count frees, as guard-always and trace
     do), empty-sched (empty programs on the process tracepoints the guard
     keeps attached far from the floor: exec, prepare_exec, exit; with
     guard), guard (what the daemon attached far from the floor: its
     tracepoint programs other than the page programs, which its helper
     holds only near the floor; where it attached none, the row says so),
     guard-always, trace; BENCH_SLICE_BLOCKS blocks each, alternated.
  1. wall times, kernel.bpf_stats_enabled=0: every workload, configurations
     alternated run by run (A B C ... A B C ...), BENCH_RUNS runs each. Also
     records lost, recursion misses, the tracer's CPU time during the
     workload, its peak RSS, its BPF map memory and its load-and-attach time
     (start to the line saying it is attached).
  2. BPF statistics, kernel.bpf_stats_enabled=1 (BENCH_STATS=0 skips it): a
     smaller storm and GPU call storm, alternated the same way; mean ns per
     invocation of every program the tracer loaded. The statistics add two
     clock reads to every invocation (about 60 ns here), which is why the
     empty program is measured: the difference is the program body. Then
     the empty program and guard (or trace) attached together over one
     storm, 2 x BENCH_RUNS runs alternating which is attached first:
     page_alloc less empty_alloc in the same storm moves far less from run
     to run than two storms apart, and the page_alloc targets are judged on
     it (the mean of the two orders' medians: the first program on the
     tracepoint pays for what is cold on the way). The guard's is judged
     on guard-always: far from the floor the guard runs no page program.
  3. PyTorch's allocator hook (BENCH_TORCH=0 skips it; tests/bench/torch_bench.py,
     which runs alone too): ns per hook call untraced, under an empty uprobe
     and under umtrace's program; the program body (bpf_stats); a job
     making 100,000 tensor allocations a second, its CPU time.
  4. guard idle: umtrace guard left alone BENCH_IDLE_S seconds, once its
     page programs are detached: RSS, CPU. The CPU time is the daemon's
     and its helper's (umtrace-arm, which looks at the headroom: up to
     once a second this far from the floor), both shown; the helper's RSS is shown apart (a fork of the
     daemon: the pages they share count in both VmRSS, once in their
     Pss). As an always-on guard runs: no --libcuda (it finds the fake
     through LD_LIBRARY_PATH) and a rescan for new libcuda files every
     2 s. Then the rescan's own cost: the same with --rescan 0, and the
     default with RESCAN_EXTRA_PROCS more idle processes.
  5. arming (BENCH_ARM=0 skips it): how the helper attaches the page
     programs as the headroom nears the floor. A guard -v -n (a dry run:
     it sends nothing) with its floor ARM_DISTANCE under MemAvailable
     (further if twice its margin is not under that) waits until its page
     programs are detached; then ARM_TRIES times a ballast process
     (python3) takes the headroom less half the margin as fast as one CPU
     faults (and what is left of it again, up to ARM_TAKES takes, where the
     host's other memory moved meanwhile), the guard attaches them (the
     -v line says in how many us, and at what headroom: the margin less
     that headroom above LOW, ARM_LOW_GAP over the floor, is what the host
     took of the margin before the look that found it), the ballast is
     killed and
     the guard detaches them again (1 s over twice the margin). With the
     exit line's looks, how late the latest came and how often the margin
     widened for a late one.

Before the first pass, memory the kernel initialises late (deferred_init=lazy:
counted in MemFree but in no zone yet, so the guard cannot use the kernel's
counters and keeps its page programs attached) is faulted in once, as a
host's first jobs would.

Prints a table with PASS/MISS per target; writes OUT/bench/suite.json.

Environment
  BENCH_RUNS=5            runs per configuration and workload
  BENCH_THREADS           storm and stress-ng threads: CPUs less one, 1 to 4
                          (a CPU left for the tracer and kernel threads keeps
                          runs steady; on 2 vCPUs two storm threads let runs
                          of one configuration differ by over 50%)
  BENCH_GIB               GiB touched per storm round, all threads; 1/thread
  BENCH_ROUNDS=3          storm rounds
  BENCH_STRESS_OPS=1000   stress-ng --vm-ops
  BENCH_STRESS_BYTES=256M stress-ng --vm-bytes
  BENCH_CALLS=400000      GPU calls per call storm run
  BENCH_MIXED_CALLS=100000  GPU calls beside the storm in the mixed run
  BENCH_STATS=1           0: skip the statistics pass
  BENCH_STATS_ROUNDS=1    storm rounds in the statistics pass
  BENCH_STATS_CALLS=200000  GPU calls per run in the statistics pass
  BENCH_IDLE_S=30         guard idle time (0: not measured)
  BENCH_TORCH=1           0: skip the torch pass (its own knobs: torch_bench.py)
  BENCH_SLICE_PAIRS=100   slice pairs per block (0: no slices pass)
  BENCH_SLICE_BLOCKS=2    blocks per configuration in the slices pass
  BENCH_SLICE_MIB=32      MiB per slice
  BENCH_ARM=1             0: skip the arming pass
  BENCH_WORKLOADS, BENCH_CONFIGS  comma-separated subsets, for quick runs
"""
import json
import math
import os
import re
import select
import signal
import statistics
import subprocess
import sys
import tempfile

# The tests' pipe reader: a line or an error at a deadline, never a hang.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import bring_memory_in, meminfo, readline  # noqa: E402
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_bench  # noqa: E402  (beside this file)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
# The guard's rescan measured again with this many more (idle) processes.
RESCAN_EXTRA_PROCS = 500
READY_TIMEOUT_S = 30
STOP_TIMEOUT_S = 60
WORKLOAD_TIMEOUT_S = 300
CALLS_TARGET_RATE = 100000
GIB = 2**30
MIB = 2**20
# The arming pass: the floor this far under MemAvailable (or further: see
# Suite.arm_guard), this many ballasts, and at most this many takes each (the
# host's other memory moves meanwhile: a take aims at the headroom it reads).
ARM_DISTANCE = 4 * GIB
ARM_TRIES = 5
ARM_TAKES = 8
# Its LOW over its floor: the helper keeps its margin above LOW.
ARM_LOW_GAP = 64 * MIB
HELPER_COMM = "umtrace-arm"
# Takes the bytes each line asks for (one CPU faulting them), says so, and
# holds them all until its stdin closes.
BALLAST = ("import sys\nheld = []\nfor line in sys.stdin:\n"
           "    held.append(b'\\x01' * int(line))\n    print('ready', flush=True)\n")
ATTACH_RE = re.compile(r"^umtrace: guard: page programs attached in (\d+) us: "
                       r"(-?[\d.]+[BKMGTPE]) above the floor")
DETACH_RE = re.compile(r"^umtrace: guard: page programs detached: "
                       r"(-?[\d.]+[BKMGTPE]) above the floor")
ARM_EXIT_RE = re.compile(r"^umtrace: guard: page programs attached (\d+) times within "
                         r"([\d.]+[BKMGTPE]) above low; (\d+) looks, none more than "
                         r"([\d.]+) ms past its time; the margin widened (\d+) times")

BPFTRACE_PROG = """tracepoint:kmem:mm_page_alloc { @alloc[tid] = count(); }
tracepoint:kmem:mm_page_free { @free[tid] = count(); }
BEGIN { printf("attached\\n"); }
END { clear(@alloc); clear(@free); }"""

MEMLEAK_NOTE = ("BCC memleak: not run: Debian's libbpf-tools does not ship it, "
                "and BCC's Python tools need kernel headers these machines lack")

CONFIGS = ["none", "empty", "guard", "guard-always", "trace", "record", "record-fp",
           "bpftrace", "perf"]
SLICE_CONFIGS = ["control", "empty", "empty-pair", "empty-sched", "guard", "guard-always",
                 "trace"]
PEERS = ["bpftrace", "perf"]
GPU_CONFIGS = ["none", "guard", "guard-always", "trace", "record", "record-fp"]
GUARDS = ("guard", "guard-always")
GPU_ONLY = ["record-fp"]	# the same page programs as record: GPU call storm only
CONFIG_DESC = {
    "none": "no tracer",
    "empty": "empty tp_btf/mm_page_alloc program (the floor)",
    "guard": "umtrace guard --floor 1% --no-pin (page programs auto: detached far from "
             "the floor, as here)",
    "guard-always": "umtrace guard --floor 1% --no-pin --page-programs always",
    "trace": "umtrace trace --json > /dev/null",
    "record": "umtrace record -o FILE",
    "record-fp": "umtrace record -o FILE --stack fp (frame pointers: no stack copy)",
    "bpftrace": "bpftrace: count mm_page_alloc/mm_page_free per tid",
    "perf": "perf record -e kmem:mm_page_alloc -a",
}
LOST_RE = re.compile(r"^umtrace: warning: (\d+) records lost: ")


def note(msg):
    print(f"suite: {msg}", file=sys.stderr, flush=True)


def die(msg):
    note(msg)
    sys.exit(1)


def env_int(name, default, lo=1):
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if not re.fullmatch(r"\d+", raw) or int(raw) < lo:
        die(f"{name} must be an integer >= {lo}, not '{raw}'")
    return int(raw)


def env_float(name, default):
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        v = float(raw)
    except ValueError:
        v = -1
    if not v > 0:
        die(f"{name} must be a positive number, not '{raw}'")
    return v


def env_list(name, allowed):
    raw = os.environ.get(name)
    if not raw:
        return list(allowed)
    got = [w for w in raw.split(",") if w]
    bad = [w for w in got if w not in allowed]
    if bad:
        die(f"{name}: unknown {', '.join(bad)} (known: {','.join(allowed)})")
    return [w for w in allowed if w in got]


def summary(values):
    """(median, min, max) of the numbers that are not None, or None."""
    v = [x for x in values if x is not None]
    if not v:
        return None
    return statistics.median(v), min(v), max(v)


# --- /proc ------------------------------------------------------------------

def proc_state(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/children") as f:
                    kids = [int(k) for k in f.read().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


def proc_comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


def task_files(pid, name):
    """The text of /proc/PID/task/*/NAME for each thread still there, or
    None if pid is gone."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    out = []
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/{name}") as f:
                out.append(f.read())
        except OSError:
            pass
    return out


def children(pid):
    return [int(k) for text in task_files(pid, "children") or [] for k in text.split()]


def helpers_of(pid):
    """The guard's page-program helpers: its children named umtrace-arm."""
    return [c for c in children(pid) if proc_comm(c) == HELPER_COMM]


def helper_alive(pid):
    """pid is still that helper, and not a zombie (its programs and links
    are closed once it has exited, reaped or not)."""
    return proc_state(pid) not in (None, "Z") and proc_comm(pid) == HELPER_COMM


def count_maps():
    """Processes on the host, and the lines of all their /proc/PID/maps."""
    procs = lines = 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/maps") as f:
                lines += sum(1 for _ in f)
            procs += 1
        except OSError:
            pass
    return procs, lines


def proc_cpu_s(pid):
    """CPU time of all threads of pid in seconds (schedstat: ns)."""
    texts = task_files(pid, "schedstat")
    if texts is None:
        return None
    return sum(int(t.split()[0]) for t in texts if t.split()) / 1e9


def proc_mem_kib(pid):
    """VmHWM, VmRSS, RssAnon, RssFile, RssShmem and Pss in KiB."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem"):
                    out[k] = int(v.split()[0])
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k == "Pss":
                    out[k] = int(v.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return out


def owned_bpf_ids(pid):
    progs, maps = set(), set()
    try:
        fds = os.listdir(f"/proc/{pid}/fdinfo")
    except OSError:
        return progs, maps
    for fd in fds:
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                text = f.read()
        except OSError:
            continue
        for line in text.splitlines():
            k, _, v = line.partition(":")
            if k == "prog_id":
                progs.add(int(v))
            elif k == "map_id":
                maps.add(int(v))
    return progs, maps


def cpu_idle_fraction(seconds):
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]
    t0, i0 = sample()
    time.sleep(seconds)
    t1, i1 = sample()
    return (i1 - i0) / max(t1 - t0, 1)


# --- BPF --------------------------------------------------------------------

def bpftool_json(*args):
    r = subprocess.run(["bpftool", "-j", *args], capture_output=True, text=True)
    if r.returncode:
        die(f"bpftool {' '.join(args)}: {r.stderr.strip()}")
    return json.loads(r.stdout or "[]")


def prog_snapshot(ids):
    """{id: (name, run_time_ns, run_cnt, recursion_misses)}"""
    return {p["id"]: (p.get("name", "?"), p.get("run_time_ns") or 0,
                      p.get("run_cnt") or 0, p.get("recursion_misses") or 0)
            for p in bpftool_json("prog", "show") if p["id"] in ids}


def prog_delta(before, after):
    """{name: {ns, cnt, misses}}; programs of one name are added up."""
    out = {}
    for pid, (name, ns, cnt, miss) in after.items():
        b = before.get(pid, (name, 0, 0, 0))
        d = out.setdefault(name, {"run_time_ns": 0, "run_cnt": 0, "misses": 0})
        d["run_time_ns"] += ns - b[1]
        d["run_cnt"] += cnt - b[2]
        d["misses"] += miss - b[3]
    return out


def map_memory(prog_ids, map_ids):
    progs = [p for p in bpftool_json("prog", "show") if p["id"] in prog_ids]
    ids = set(map_ids)
    for p in progs:
        ids.update(p.get("map_ids", []))
    maps = [m for m in bpftool_json("map", "show") if m["id"] in ids]
    return sum(m.get("bytes_memlock", 0) for m in maps), len(maps)


def foreign_tracing_progs(mine=()):
    return sorted(f'{p["id"]}:{p.get("name", "?")}' for p in bpftool_json("prog", "show")
                  if p.get("type") in ("tracing", "tracepoint", "raw_tracepoint", "kprobe",
                                       "perf_event")
                  and p["id"] not in mine)


# --- tracers ----------------------------------------------------------------

class Tracer:
    """One configuration's tracer: started, waited for, measured, stopped."""

    def __init__(self, suite, cfg, extra=(), deployed=False, floor="1%", quiet=False):
        self.s, self.cfg, self.extra = suite, cfg, list(extra)
        # As an always-on guard runs: finding libcuda itself, and looking
        # again every 2 s for files it has not probed.
        self.deployed = deployed
        self.floor = floor
        self.quiet = quiet	# a guard not detached in time is the caller's to report
        self.lines, self.proc, self.ready_at = [], None, None
        self.ready = threading.Event()
        self.reader = None
        self.ctl = None
        self.file = None
        self.cpu0 = self.cpu_s = self.maxrss_kib = None
        self.state_file = None
        # The auto guard: its page programs' state once settled, and when.
        self.pages = self.settle_ms = None

    def argv(self):
        s, lib = self.s, self.s.libcuda
        if self.cfg == "empty":
            return [s.empty_tp], r"^attached$"
        if self.cfg in GUARDS:
            named = [] if self.deployed else ["--libcuda", lib]
            always = ["--page-programs", "always"] if self.cfg == "guard-always" else []
            self.state_file = os.path.join(s.tmp, "guard.state")
            return ([s.umtrace, "guard", "--floor", self.floor, "--no-pin", "--state-file",
                     self.state_file] + always + named + self.extra,
                    r"^umtrace: guard: armed: ")
        if self.cfg == "trace":
            return [s.umtrace, "trace", "--json", "--libcuda", lib] + self.extra, \
                r"^umtrace: probing "
        if self.cfg in ("record", "record-fp"):
            self.file = os.path.join(s.tmp, "rec.umt")
            fp = ["--stack", "fp"] if self.cfg == "record-fp" else []
            return [s.umtrace, "record", "-o", self.file, "--force", "--libcuda", lib] + \
                fp + self.extra, r"^umtrace: probing "
        if self.cfg == "bpftrace":
            return ["bpftrace", "-e", BPFTRACE_PROG], r"^attached$"
        if self.cfg == "perf":
            self.file = os.path.join(s.tmp, "perf.data")
            ctl, ack = (os.path.join(s.tmp, n) for n in ("perf.ctl", "perf.ack"))
            for f in (ctl, ack):
                if not os.path.exists(f):
                    os.mkfifo(f)
            self.ctl = (ctl, ack)
            # Started disabled; enabled through the control FIFO, whose
            # "ack" is the moment it counts every event.
            return ["perf", "record", "-e", "kmem:mm_page_alloc", "-a", "-o", self.file,
                    "-D", "-1", "--control", f"fifo:{ctl},{ack}"], None
        raise ValueError(self.cfg)

    def _read(self, pipe, ready_re):
        for raw in pipe:
            t = time.monotonic()
            line = raw.decode(errors="replace").rstrip("\n")
            self.lines.append(line)
            if ready_re and self.ready_at is None and ready_re.search(line):
                self.ready_at = t
                self.ready.set()
        self.ready.set()

    def start(self):
        argv, ready = self.argv()
        # trace's records go nowhere; the rest say little, all of it read.
        if self.cfg == "trace":
            out, err = subprocess.DEVNULL, subprocess.PIPE
        else:
            out, err = subprocess.PIPE, subprocess.STDOUT
        env = None
        if self.deployed:
            env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(self.s.libcuda))
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=err, cwd=self.s.tmp, env=env)
        pipe = self.proc.stderr if self.cfg == "trace" else self.proc.stdout
        self.reader = threading.Thread(target=self._read, daemon=True,
                                       args=(pipe, re.compile(ready) if ready else None))
        self.reader.start()
        self.s.live.add(self)
        if self.cfg == "perf":
            self._enable_perf()
        else:
            self.ready.wait(READY_TIMEOUT_S)
        if self.ready_at is None:
            self.stop()
            raise RuntimeError(f"{self.cfg}: did not attach; it said: "
                               + " | ".join(self.lines[-5:]))
        self.attach_ms = (self.ready_at - self.t0) * 1e3
        self.prog_ids, self.map_ids = owned_bpf_ids(self.proc.pid)
        if self.cfg == "guard":
            self.settle()
        self.cpu0 = self.cpu_now()

    def cpu_now(self):
        """CPU seconds of the tracer and of its page-program helper."""
        cpu = proc_cpu_s(self.proc.pid)
        if cpu is None:
            return None
        return cpu + sum(proc_cpu_s(h) or 0 for h in helpers_of(self.proc.pid))

    def status(self):
        """The guard's `umtrace status --json`, or None until it has
        written its state file (or where the file is an older guard's)."""
        try:
            r = subprocess.run([self.s.umtrace, "status", "--json", "--state-file",
                                self.state_file], capture_output=True, text=True,
                               timeout=10)
            st = json.loads(r.stdout)
        except (subprocess.TimeoutExpired, ValueError):
            return None
        if not isinstance(st, dict) or st.get("pid") != self.proc.pid or \
                not st.get("running"):
            return None
        return st

    def wait_pages(self, want, timeout=READY_TIMEOUT_S):
        """Polls the guard's status until its page_programs is one of want;
        returns that status, or the last one read (None if none) at the
        deadline. An exited guard is an error."""
        deadline = time.monotonic() + timeout
        last = None
        while True:
            st = self.status()
            if st:
                last = st
                if st.get("page_programs") in want:
                    return st
            if proc_state(self.proc.pid) in (None, "Z"):
                raise RuntimeError(f"{self.cfg}: exited while waiting for its page programs "
                                   f"to be {'/'.join(want)}: " + " | ".join(self.lines[-3:]))
            if time.monotonic() > deadline:
                return last
            time.sleep(0.05)

    def settle(self):
        """The auto guard starts with its page programs attached and its
        helper detaches them once it has measured its margin and found the
        headroom over twice it for a second: the workload starts after
        that, so what is measured is the guard far from the floor."""
        st = self.wait_pages(("detached", "always"))
        self.settle_ms = (time.monotonic() - self.t0) * 1e3
        self.pages = st.get("page_programs") if st else None
        if self.pages != "detached" and not self.quiet:
            why = {"always": "attached all the time (it did not find the kernel's "
                             "counters, or its helper could not start)",
                   "attached": "still attached (the headroom within twice its margin?)",
                   None: "unknown (no status)"}.get(self.pages, self.pages)
            margin = f"; margin {st['arm_margin'] / MIB:.0f} MiB, headroom " \
                f"{st['headroom'] / MIB:.0f} MiB" if st else ""
            self.s.note_once(f"guard (auto): page programs {why} {READY_TIMEOUT_S} s after "
                             f"start{margin}: its figures are not those of a guard far "
                             "from the floor")

    def _enable_perf(self):
        ctl, ack = self.ctl
        deadline = time.monotonic() + READY_TIMEOUT_S
        fd = None
        while fd is None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                return
            try:
                fd = os.open(ctl, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                time.sleep(0.01)
        afd = os.open(ack, os.O_RDONLY | os.O_NONBLOCK)
        try:
            os.write(fd, b"enable\n")
            got = b""
            while b"ack" not in got:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    return
                r, _, _ = select.select([afd], [], [], 0.05)
                if r:
                    data = os.read(afd, 64)
                    if not data:
                        time.sleep(0.01)
                    got += data
            self.ready_at = time.monotonic()
        finally:
            os.close(fd)
            os.close(afd)

    def stop(self):
        """SIGINT as a user would; SIGKILL if it hangs. Returns its status
        and keeps its resource usage: self.cpu_s is the CPU time it used
        from attached to exit (what it read and wrote, its summary; the
        guard's includes its helper's, which it reaps), and self.maxrss_kib
        its peak RSS (the guard's: of the daemon or its helper, whichever
        was higher). A guard's helper is gone when this returns: the daemon
        kills it at SIGINT, and is waited for here all the same."""
        if not self.proc:
            return 0
        p, status, ru = self.proc, None, None
        helpers = helpers_of(p.pid) if p.returncode is None else []
        if p.returncode is None:
            # Not p.send_signal(): it polls first, and a tracer that has
            # exited would be reaped there, its resource usage lost.
            os.kill(p.pid, signal.SIGINT)
            deadline = time.monotonic() + STOP_TIMEOUT_S
            while True:
                pid, status, ru = os.wait4(p.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() > deadline:
                    note(f"{self.cfg}: ignored SIGINT for {STOP_TIMEOUT_S} s; killing it")
                    p.kill()
                    _, status, ru = os.wait4(p.pid, 0)
                    break
                time.sleep(0.01)
            p.returncode = os.waitstatus_to_exitcode(status)
        if ru and self.cpu0 is not None:
            self.cpu_s = ru.ru_utime + ru.ru_stime - self.cpu0
            self.maxrss_kib = ru.ru_maxrss
        self.wait_helpers_gone(helpers)
        self.reader.join(5)
        self.proc = None
        self.s.live.discard(self)
        return p.returncode

    def wait_helpers_gone(self, helpers):
        """Until none of the guard's helpers is left (what the next
        configuration measures must not find their programs attached)."""
        deadline = time.monotonic() + STOP_TIMEOUT_S
        killed = False
        while True:
            left = [h for h in helpers if helper_alive(h)]
            if not left:
                return
            if time.monotonic() > deadline:
                if killed:
                    note(f"{self.cfg}: its helper {' '.join(map(str, left))} survived SIGKILL")
                    return
                note(f"{self.cfg}: its helper {' '.join(map(str, left))} outlived it by "
                     f"{STOP_TIMEOUT_S} s; killing it")
                for h in left:
                    try:
                        os.kill(h, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                self.s.note_once(f"{self.cfg}: a page-program helper ({HELPER_COMM}) "
                                 "outlived its guard and was killed")
                killed = True
                deadline = time.monotonic() + STOP_TIMEOUT_S
            time.sleep(0.01)

    def drops(self):
        """Records lost, as the tracer counts them; None where nothing can be."""
        if self.cfg in GUARDS + ("trace", "record", "record-fp"):
            return sum(int(m.group(1)) for m in map(LOST_RE.match, self.lines) if m)
        if self.cfg == "perf" and self.file and os.path.exists(self.file):
            # The samples lost on the traced event, from its own section.
            r = subprocess.run(["perf", "report", "-i", self.file, "--stats"],
                               capture_output=True, text=True)
            sect = r.stdout.partition("kmem:mm_page_alloc stats:")[2].split(" stats:")[0]
            m = re.search(r"LOST_SAMPLES events:\s+(\d+)", sect)
            return int(m.group(1)) if m else 0
        return None

    def stops(self):
        return [l for l in self.lines if l.startswith("umtrace: guard: stop ")]

    def arm_exit(self):
        """The auto guard's exit line on its page programs, or None."""
        for line in self.lines:
            m = ARM_EXIT_RE.match(line)
            if m:
                return {"arms": int(m.group(1)), "margin": m.group(2),
                        "looks": int(m.group(3)), "latest_ms": float(m.group(4)),
                        "widened": int(m.group(5))}
        return None

    def cleanup(self):
        if self.file and os.path.exists(self.file):
            os.unlink(self.file)


# --- workloads --------------------------------------------------------------

def run_procs(suite, specs):
    """Starts every (name, argv, env) at once and waits for all. Returns
    ({name: (wall_s, stdout, cpu_s)}, taints), cpu_s the user and system
    time of the process and the children it waited for (the BPF programs
    run in the workload's context: that is where they cost). A workload
    stopped by someone else's guard (the machine is shared) is continued,
    and the run says so."""
    procs, ends, taints = {}, {}, []

    def waiter(name, p, t0):
        out = p.stdout.read()
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        ends[name] = (time.monotonic() - t0, p.returncode, out, ru.ru_utime + ru.ru_stime)

    threads = []
    for name, argv, env in specs:
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, env=env, cwd=suite.tmp)
        procs[name] = p
        th = threading.Thread(target=waiter, args=(name, p, t0), daemon=True)
        th.start()
        threads.append(th)
    deadline = time.monotonic() + WORKLOAD_TIMEOUT_S
    try:
        while any(th.is_alive() for th in threads):
            next(th for th in threads if th.is_alive()).join(0.2)
            for name, p in procs.items():
                if p.returncode is not None:
                    continue
                for pid in [p.pid] + descendants(p.pid):
                    if proc_state(pid) == "T":
                        taints.append(f"{name} pid {pid} was stopped by something else; "
                                      "continued")
                        os.kill(pid, signal.SIGCONT)
            if time.monotonic() > deadline:
                raise RuntimeError(f"workload ran over {WORKLOAD_TIMEOUT_S} s")
    except BaseException:
        for p in procs.values():
            if p.returncode is None:
                p.kill()
        raise
    result = {}
    for name, (wall, rc, out, cpu) in ends.items():
        if rc:
            raise RuntimeError(f"{name} exited with status {rc}: "
                               f"{out.decode(errors='replace').strip()[-300:]}")
        result[name] = (wall, out.decode(errors="replace"), cpu)
    return result, taints


class Suite:
    def __init__(self, out):
        self.out = out = os.path.abspath(out)
        self.umtrace = os.path.join(out, "umtrace")
        self.libcuda = os.path.abspath(os.path.join(out, "tests", "libcuda.so.1"))
        self.alloc_mix = os.path.join(out, "tests", "alloc_mix")
        self.storm_bin = os.path.join(out, "bench", "storm")
        self.empty_tp = os.path.join(out, "bench", "empty_tp")
        self.interleave = os.path.join(out, "bench", "interleave")
        self.empty_obj = os.path.join(out, "bench", "empty_tp.bpf.o")
        self.umtrace_obj = os.path.join(out, "umtrace.bpf.o")
        ncpu = os.cpu_count() or 1
        self.runs = env_int("BENCH_RUNS", 5)
        self.threads = env_int("BENCH_THREADS", min(max(ncpu - 1, 1), 4))
        self.gib = env_float("BENCH_GIB", float(self.threads))
        self.rounds = env_int("BENCH_ROUNDS", 3)
        self.stress_ops = env_int("BENCH_STRESS_OPS", 1000)
        self.stress_bytes = os.environ.get("BENCH_STRESS_BYTES") or "256M"
        self.calls = env_int("BENCH_CALLS", 400000, lo=4)
        self.mixed_calls = env_int("BENCH_MIXED_CALLS", 100000, lo=2)
        self.stats = env_int("BENCH_STATS", 1, lo=0) != 0
        self.stats_rounds = env_int("BENCH_STATS_ROUNDS", 1)
        self.stats_calls = env_int("BENCH_STATS_CALLS", 200000, lo=4)
        self.idle_s = env_int("BENCH_IDLE_S", 30, lo=0)
        self.torch_on = env_int("BENCH_TORCH", 1, lo=0) != 0
        self.torch = None	# torch_bench.run()'s results
        self.slice_pairs = env_int("BENCH_SLICE_PAIRS", 100, lo=0)
        self.slice_blocks = env_int("BENCH_SLICE_BLOCKS", 2)
        self.slice_mib = env_int("BENCH_SLICE_MIB", 32)
        self.slices = {}	# slice config -> {"pairs": [[off, on]], "programs": [...]}
        self.slices_none = {}	# slice config -> why nothing was toggled
        self.arm_on = env_int("BENCH_ARM", 1, lo=0) != 0
        self.arm = None	# arming()'s results
        self.idle = None
        self.paired = {}	# config -> [paired_once() results]
        self.workloads = env_list("BENCH_WORKLOADS", ["storm", "stress", "calls", "mixed"])
        self.configs = env_list("BENCH_CONFIGS", CONFIGS)
        self.skipped = {}
        self.notes = []
        self.results = {}	# workload -> config -> [run dicts]
        self.tracer_info = {}	# config -> map memory etc.
        self.attach = {}	# config -> [ms]
        self.tmp = None
        self.old_stats = None
        self.mounted_tracefs = False
        self.live = set()	# tracers running now

    def note_once(self, msg):
        if msg not in self.notes:
            self.notes.append(msg)
            note(msg)

    # --- set-up -------------------------------------------------------------

    def check(self):
        if os.geteuid():
            die("needs root (BPF programs, kernel.bpf_stats_enabled)")
        torch = [os.path.join(self.out, "bench", "hookloop"),
                 os.path.join(self.out, "tests", "libc10.so")] if self.torch_on else []
        for f in (self.umtrace, self.libcuda, self.alloc_mix, self.storm_bin, self.empty_tp,
                  self.interleave, self.empty_obj, self.umtrace_obj, *torch):
            if not os.path.exists(f):
                die(f"{f} is missing: run 'make bench' (or make OUT=... bench-progs)")
        if subprocess.run(["bpftool", "version"], capture_output=True).returncode:
            die("needs bpftool")
        if not os.path.isdir("/sys/kernel/tracing/events/kmem") and \
                any(c in self.configs for c in ("bpftrace", "perf")):
            r = subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"],
                               capture_output=True, text=True)
            if r.returncode == 0:
                self.mounted_tracefs = True
                self.notes.append("mounted tracefs on /sys/kernel/tracing for bpftrace and "
                                  "perf (unmounted at the end)")
            else:
                why = f"tracefs is not mounted and mount failed: {r.stderr.strip()}"
                for c in ("bpftrace", "perf"):
                    self.skipped[c] = why
        tools = {"bpftrace": "bpftrace", "perf": "perf"}
        for cfg, tool in tools.items():
            if cfg in self.configs and cfg not in self.skipped and \
                    subprocess.run(["sh", "-c", f"command -v {tool}"],
                                   capture_output=True).returncode:
                self.skipped[cfg] = f"{tool} is not installed (scripts/install-deps.sh --bench)"
        if "stress" in self.workloads and \
                subprocess.run(["sh", "-c", "command -v stress-ng"],
                               capture_output=True).returncode:
            self.workloads.remove("stress")
            self.skipped["stress-ng workload"] = \
                "stress-ng is not installed (scripts/install-deps.sh --bench)"
        self.configs = [c for c in self.configs if c not in self.skipped]
        if "none" not in self.configs:
            die("BENCH_CONFIGS must include none: every ratio is to it")

    def set_stats(self, on):
        if self.old_stats is None:
            with open("/proc/sys/kernel/bpf_stats_enabled") as f:
                self.old_stats = f.read().strip()
            if self.old_stats != "0":
                self.notes.append("kernel.bpf_stats_enabled was already 1: turned off for "
                                  "the wall-time pass, restored at the end")
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write("1" if on else "0")

    def bring_memory_in(self):
        """A kernel that initialises its memory late (deferred_init=lazy)
        counts the part not yet initialised in MemFree but in no zone's
        counter, so the guard cannot use the counters until it is: its
        page programs then stay attached, auto or not. Faulted in once, as
        the tests do (harness.py)."""
        done = bring_memory_in(timeout=WORKLOAD_TIMEOUT_S)
        if done:
            late, size, secs, left = done
            self.notes.append(f"{late / MIB:.0f} MiB of memory not yet initialised by the "
                              f"kernel (deferred_init=lazy) was faulted in once before the "
                              f"suite ({size / GIB:.1f} GiB, {secs:.1f} s), {left / MIB:.0f} "
                              "MiB left")

    def restore(self):
        if self.old_stats is not None:
            with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
                f.write(self.old_stats)
        if self.mounted_tracefs:
            subprocess.run(["umount", "/sys/kernel/tracing"], capture_output=True)

    # --- workloads ------------------------------------------------------------

    def pages_per_run(self, rounds):
        return int(self.gib * 2**30 / os.sysconf("SC_PAGESIZE")) * rounds

    def storm_spec(self, rounds, threads=None):
        return ("storm", [self.storm_bin, "-t", str(threads or self.threads),
                          "-s", str(self.gib), "-r", str(rounds)], None)

    def calls_spec(self, calls, threads):
        env = dict(os.environ, FAKECUDA_MODE="discrete")
        iters = max(calls // (2 * threads), 1)
        return ("calls", [self.alloc_mix, "-t", str(threads), "-n", str(iters), "-s", "4K",
                          "-a", "alloc", "-F", "-o", os.path.join(self.tmp, "truth.json")], env)

    def calls_made(self):
        with open(os.path.join(self.tmp, "truth.json")) as f:
            truth = json.load(f)
        return sum(c["calls"] for api, c in truth["calls"].items() if api != "cuInit")

    def workload(self, name, stats_pass=False):
        """Runs one workload; returns its figures."""
        if name == "storm":
            rounds = self.stats_rounds if stats_pass else self.rounds
            res, taints = run_procs(self, [self.storm_spec(rounds)])
            out = res["storm"][1].strip()
            if not re.fullmatch(r"\d+\.\d+", out):
                raise RuntimeError(f"storm printed '{out}', not a time")
            return {"wall_s": float(out), "cpu_s": res["storm"][2]}, taints
        if name == "stress":
            argv = ["stress-ng", "--vm", str(self.threads), "--vm-bytes", self.stress_bytes,
                    "--vm-method", "write64", "--vm-ops", str(self.stress_ops), "-q"]
            res, taints = run_procs(self, [("stress", argv, None)])
            return {"wall_s": res["stress"][0], "cpu_s": res["stress"][2]}, taints
        if name == "calls":
            calls = self.stats_calls if stats_pass else self.calls
            res, taints = run_procs(self, [self.calls_spec(calls, 2)])
            made = self.calls_made()
            return {"wall_s": res["calls"][0], "cpu_s": res["calls"][2], "calls": made,
                    "calls_per_s": made / res["calls"][0]}, taints
        if name == "mixed":
            t0 = time.monotonic()
            res, taints = run_procs(self, [self.storm_spec(self.rounds),
                                           self.calls_spec(self.mixed_calls, 1)])
            wall = time.monotonic() - t0
            made = self.calls_made()
            return {"wall_s": wall, "storm_s": float(res["storm"][1].strip()),
                    "cpu_s": res["storm"][2] + res["calls"][2],
                    "calls": made, "calls_per_s": made / res["calls"][0]}, taints
        raise ValueError(name)

    def run_once(self, wname, cfg, stats_pass=False):
        run = {}
        tracer = None
        if cfg != "none":
            tracer = Tracer(self, cfg)
            tracer.start()
            run["attach_ms"] = round(tracer.attach_ms, 1)
            if tracer.settle_ms is not None:
                # The auto guard: when its page programs were detached.
                run["settle_ms"] = round(tracer.settle_ms, 1)
                run["page_programs"] = tracer.pages
            self.attach.setdefault(cfg, []).append(tracer.attach_ms)
            if cfg not in self.tracer_info and (tracer.prog_ids or tracer.map_ids):
                mem, n = map_memory(tracer.prog_ids, tracer.map_ids)
                self.tracer_info[cfg] = {"bpf_map_bytes": mem, "maps": n,
                                         "programs": len(tracer.prog_ids)}
            before = prog_snapshot(tracer.prog_ids) if tracer.prog_ids else {}
        try:
            figures, taints = self.workload(wname, stats_pass)
        except Exception:
            if tracer:
                tracer.stop()
                tracer.cleanup()
            raise
        run.update(figures)
        if tracer:
            after = prog_snapshot(tracer.prog_ids) if tracer.prog_ids else {}
            rc = tracer.stop()
            run["tracer_cpu_s"] = None if tracer.cpu_s is None else round(tracer.cpu_s, 4)
            run["tracer_hwm_kib"] = tracer.maxrss_kib
            run["drops"] = tracer.drops()
            tracer.cleanup()
            delta = prog_delta(before, after)
            run["recursion_misses"] = sum(d["misses"] for d in delta.values())
            if stats_pass:
                run["progs"] = {n: {"ns": round(d["run_time_ns"] / d["run_cnt"], 1)
                                    if d["run_cnt"] else None, "calls": d["run_cnt"],
                                    "misses": d["misses"]}
                                for n, d in delta.items()}
            # perf ends by raising the SIGINT it was stopped with.
            if rc not in (0, None) and not (cfg == "perf" and rc == -signal.SIGINT):
                taints.append(f"the tracer exited with status {rc}: "
                              + " | ".join(tracer.lines[-3:]))
            taints += [f"guard: {l}" for l in tracer.stops()]
            arm = tracer.arm_exit() if cfg == "guard" else None
            if arm:
                # Far from the floor the helper should never attach them.
                run["arms"] = arm["arms"]
                if arm["arms"]:
                    taints.append(f"guard: page programs attached {arm['arms']} times during "
                                  "the run")
        if taints:
            run["taints"] = taints
            for t in taints:
                note(f"{wname}/{cfg}: {t}")
        return run

    def block(self, wname, configs, stats_pass=False):
        key = wname + ("-stats" if stats_pass else "")
        res = self.results.setdefault(key, {c: [] for c in configs})
        for i in range(1, self.runs + 1):
            for cfg in configs:
                # One failed run (the machine is shared) costs that run only.
                try:
                    r = self.run_once(wname, cfg, stats_pass)
                except RuntimeError as e:
                    note(f"{key} run {i}/{self.runs} {cfg}: failed: {e}")
                    res[cfg].append({"error": str(e)})
                    continue
                res[cfg].append(r)
                extra = f", {r['calls_per_s']:.0f} calls/s" if "calls_per_s" in r else ""
                lost = f", {r['drops']} lost" if r.get("drops") else ""
                note(f"{key} run {i}/{self.runs} {cfg}: {r['wall_s']:.3f} s{extra}{lost}")

    def paired_once(self, cfg, empty_first):
        """The empty program and cfg's tracer attached together, in the
        order given, over one storm with the statistics on: page_alloc's
        ns less empty_alloc's in the same storm."""
        order = ["empty", cfg] if empty_first else [cfg, "empty"]
        tracers = []
        try:
            for c in order:
                tracers.append(Tracer(self, c))
                tracers[-1].start()
            ids = set().union(*(t.prog_ids for t in tracers))
            before = prog_snapshot(ids)
            self.workload("storm", stats_pass=True)
            delta = prog_delta(before, prog_snapshot(ids))
        finally:
            for t in reversed(tracers):
                t.stop()
                t.cleanup()
        ns = {n: d["run_time_ns"] / d["run_cnt"] for n, d in delta.items() if d["run_cnt"]}
        if "page_alloc" not in ns or "empty_alloc" not in ns:
            raise RuntimeError(f"no page_alloc/empty_alloc figure: {sorted(ns)}")
        return {"empty_first": empty_first, "page_alloc_ns": round(ns["page_alloc"], 1),
                "empty_alloc_ns": round(ns["empty_alloc"], 1),
                "diff_ns": round(ns["page_alloc"] - ns["empty_alloc"], 1)}

    def paired_block(self):
        """Both orders alternated: whichever program runs first pays for
        what is cold on the tracepoint's path (about 5 to 10 ns here), so
        one order alone would favour one side. The guard's page_alloc is
        measured on guard-always: far from the floor, as here, the auto
        guard has none attached."""
        for i in range(self.runs * 2):
            for cfg in [c for c in ("guard-always", "trace") if c in self.configs]:
                try:
                    r = self.paired_once(cfg, i % 2 == 0)
                except RuntimeError as e:
                    note(f"paired run {i + 1}/{self.runs * 2} {cfg}: failed: {e}")
                    continue
                self.paired.setdefault(cfg, []).append(r)
                note(f"paired run {i + 1}/{self.runs * 2} {cfg} "
                     f"({'empty' if r['empty_first'] else cfg} first): page_alloc "
                     f"{r['page_alloc_ns']} ns, empty_alloc {r['empty_alloc_ns']} ns")

    # --- slices -------------------------------------------------------------

    def slice_argv(self, cfg, tracer):
        argv = [self.interleave, "-n", str(self.slice_pairs), "-m", str(self.slice_mib)]
        if cfg == "control":
            return argv + ["-A", self.empty_obj]
        if cfg == "empty":
            return argv + ["-P", "empty_alloc", self.empty_obj]
        if cfg == "empty-pair":
            return argv + ["-P", "empty_alloc", "-P", "empty_free", self.empty_obj]
        if cfg == "empty-sched":
            return argv + ["-P", "empty_exec", "-P", "empty_prep", "-P", "empty_exit",
                           self.empty_obj]
        return argv + ["-p", str(tracer.proc.pid), self.umtrace_obj]

    def slice_block(self, cfg):
        """One interleave run; its pairs join the configuration's. None
        where the tracer had no tracepoint program attached to toggle (the
        auto guard far from the floor may have none): slices cannot tell
        nothing from nothing, and self.slices_none says so."""
        tracer = None
        if cfg in GUARDS + ("trace",):
            tracer = Tracer(self, cfg)
            tracer.start()
        p = subprocess.Popen(self.slice_argv(cfg, tracer), stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            first = readline(p.stdout, WORKLOAD_TIMEOUT_S, "'ready' from interleave").strip()
        except AssertionError as e:
            p.kill()
            p.communicate(timeout=30)
            raise RuntimeError(f"interleave {cfg}: {e}")
        finally:
            # Its programs must be gone before the first slice.
            if tracer:
                tracer.stop()
                tracer.cleanup()
        try:
            out, err = p.communicate(timeout=WORKLOAD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate(timeout=30)
        if first != "ready" and "the tracer has no tracepoint program of it attached" in err:
            self.slices_none[cfg] = "no tracepoint program attached: " + \
                err.strip().splitlines()[-1]
            return None
        if first != "ready" or p.returncode:
            raise RuntimeError(f"interleave {cfg}: status {p.returncode}: "
                               + " | ".join((first + "\n" + err).strip().splitlines()[-3:]))
        res = json.loads(out)
        progs = [l.split()[-1] for l in err.splitlines()
                 if l.startswith("interleave: toggling ")]
        d = self.slices.setdefault(cfg, {"pairs": [], "programs": progs})
        d["pairs"] += res["pairs"]
        if tracer and tracer.pages:
            d["page_programs"] = tracer.pages
        return slice_summary(res["pairs"])

    def slice_pass(self):
        cfgs = [c for c in SLICE_CONFIGS
                if c in ("control", "empty-pair") or c in self.configs
                or (c == "empty-sched" and "guard" in self.configs)]
        for b in range(1, self.slice_blocks + 1):
            for cfg in cfgs:
                try:
                    m = self.slice_block(cfg)
                except RuntimeError as e:
                    note(f"slices block {b}/{self.slice_blocks} {cfg}: failed: {e}")
                    continue
                if m is None:
                    note(f"slices block {b}/{self.slice_blocks} {cfg}: not measured: "
                         f"{self.slices_none[cfg]}")
                    continue
                note(f"slices block {b}/{self.slice_blocks} {cfg}: {self.slice_pairs} pairs, "
                     f"median {(m[0] - 1) * 100:+.2f}% [{(m[1] - 1) * 100:+.2f}, "
                     f"{(m[2] - 1) * 100:+.2f}]")

    def idle_cpu_s(self, extra=()):
        """A deployed guard left alone idle_s once its page programs are
        detached: {"cpu": daemon and helper CPU seconds, "daemon_cpu",
        "helper_cpu", "mem": the daemon's memory, "helper_mem", "helpers",
        "page_programs", "attach_ms", "settle_ms"}."""
        t = Tracer(self, "guard", extra, deployed=True)
        t.start()
        try:
            pid = t.proc.pid
            helpers = helpers_of(pid)
            cpu0 = [proc_cpu_s(pid)] + [proc_cpu_s(h) for h in helpers]
            time.sleep(self.idle_s)
            cpu1 = [proc_cpu_s(pid)] + [proc_cpu_s(h) for h in helpers]
            mem = proc_mem_kib(pid)
            hmem = proc_mem_kib(helpers[0]) if helpers else {}
            left = [h for h in helpers if helper_alive(h)]
        finally:
            t.stop()
        if None in cpu0 + cpu1 or len(left) != len(helpers):
            raise RuntimeError("guard idle: the guard or its helper exited while idle: "
                               + " | ".join(t.lines[-3:]))
        daemon = cpu1[0] - cpu0[0]
        helper = sum(b - a for a, b in zip(cpu0[1:], cpu1[1:]))
        return {"cpu": daemon + helper, "daemon_cpu": daemon, "helper_cpu": helper,
                "mem": mem, "helper_mem": hmem, "helpers": len(helpers),
                "page_programs": t.pages, "attach_ms": t.attach_ms, "settle_ms": t.settle_ms}

    def rescan_cost(self, base_cpu):
        """What looking for new libcuda files costs: the same guard with
        --rescan 0, and with RESCAN_EXTRA_PROCS more (idle) processes."""
        off = self.idle_cpu_s(["--rescan", "0"])["cpu"]
        extra = [subprocess.Popen(["sleep", str(self.idle_s + 60)])
                 for _ in range(RESCAN_EXTRA_PROCS)]
        try:
            crowd = self.idle_cpu_s()["cpu"]
            procs, maps = count_maps()
        finally:
            for p in extra:
                p.kill()
                p.wait(timeout=30)
        pct = lambda c: round(c / self.idle_s * 100, 4)
        return {"rescan_off_cpu_pct": pct(off), "rescan_on_cpu_pct": pct(base_cpu),
                "crowd_processes": procs, "crowd_maps_lines": maps,
                "crowd_cpu_pct": pct(crowd)}

    def guard_idle(self):
        procs, maps = count_maps()
        r = self.idle_cpu_s()
        cpu = r["cpu"]
        self.attach.setdefault("guard", []).append(r["attach_ms"])
        pct = lambda c: round(c / self.idle_s * 100, 4)
        idle = {"seconds": self.idle_s, "cpu_s": round(cpu, 4), "cpu_pct": pct(cpu),
                "daemon_cpu_s": round(r["daemon_cpu"], 4), "daemon_cpu_pct": pct(r["daemon_cpu"]),
                "helper_cpu_s": round(r["helper_cpu"], 4), "helper_cpu_pct": pct(r["helper_cpu"]),
                "helpers": r["helpers"], "page_programs": r["page_programs"],
                "settle_ms": None if r["settle_ms"] is None else round(r["settle_ms"]),
                "helper_mem_kib": r["helper_mem"], "processes": procs,
                "maps_lines": maps,
                "attach_ms": round(r["attach_ms"], 1), **{k: v for k, v in r["mem"].items()}}
        idle["rescan"] = self.rescan_cost(cpu)
        # What of that RSS is the ring buffer: the same guard with a small one.
        small = Tracer(self, "guard", ["--ringbuf-size", "256K"])
        small.start()
        time.sleep(2)
        mem = proc_mem_kib(small.proc.pid)
        small.stop()
        idle["ringbuf_256K"] = {k: mem.get(k) for k in ("VmRSS", "VmHWM")}
        return idle

    # --- arming -------------------------------------------------------------

    def arm_guard(self):
        """A guard -v -n whose floor is far enough under MemAvailable that
        its page programs are detached: ARM_DISTANCE, or 3 x its margin
        plus 1 GiB where twice the margin is not under that (the margin
        grows with the CPUs). Returns (tracer, its status), or (None, why)."""
        distance = ARM_DISTANCE
        for _ in range(2):
            avail = meminfo()
            if avail - distance < GIB:
                return None, (f"MemAvailable {avail / GIB:.1f} GiB leaves under 1 GiB under "
                              f"a floor {distance / GIB:.1f} GiB below it")
            floor = avail - distance
            # low just over the floor, and a drop rule the ballast cannot
            # meet: nothing but the floor's own rules near it (a dry run,
            # all the same).
            t = Tracer(self, "guard", ["-v", "--dry-run", "--low", str(floor + ARM_LOW_GAP),
                                       "--drop", str(distance)], floor=str(floor), quiet=True)
            t.start()	# waits for the page programs to be detached
            if t.pages == "detached":
                st = t.wait_pages(("detached",))
                if st:
                    return t, st
                t.stop()
                return None, "no status from the guard"
            st = t.status()
            t.stop()
            if t.pages == "always" or not st or not st.get("arm_margin"):
                return None, f"the page programs never detached (page_programs {t.pages})"
            margin = st["arm_margin"]
            if distance > 2 * margin:
                return None, (f"the page programs still attached {READY_TIMEOUT_S} s after "
                              f"start, {st['headroom'] / MIB:.0f} MiB above the floor, "
                              f"margin {margin / MIB:.0f} MiB")
            distance = 3 * margin + GIB
        return None, f"the page programs stay attached with the floor {distance / GIB:.1f} GiB away"

    def arm_once(self, t, i):
        """One ballast: takes the headroom less half the margin, again if
        the host's other memory moved meanwhile; the guard attaches its
        page programs, the ballast is killed and it detaches them. Returns
        this try's figures."""
        st = t.status()
        if not st or st.get("page_programs") != "detached":
            raise RuntimeError(f"not detached before the ballast: {st}")
        margin, headroom = st["arm_margin"], st["headroom"]
        seen = len(t.lines)
        ballast = subprocess.Popen(["python3", "-c", BALLAST], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   cwd=self.tmp)
        taken, takes, took_s = 0, 0, None
        try:
            while True:
                size = st["headroom"] - margin // 2
                if size < MIB:
                    raise RuntimeError(f"not attached {st['headroom'] / MIB:.0f} MiB above "
                                       f"the floor, margin {margin / MIB:.0f} MiB: {st}")
                if takes == ARM_TAKES:
                    raise RuntimeError(f"page programs not attached after {takes} takes "
                                       f"({taken / MIB:.0f} MiB; headroom was "
                                       f"{headroom / MIB:.0f} MiB, now "
                                       f"{st['headroom'] / MIB:.0f}; margin "
                                       f"{margin / MIB:.0f}): {st}")
                t0 = time.monotonic()
                ballast.stdin.write(f"{size}\n".encode())
                ballast.stdin.flush()
                got = readline(ballast.stdout, WORKLOAD_TIMEOUT_S, "'ready' from the ballast")
                if got.strip() != "ready":
                    raise RuntimeError(f"ballast: {got.strip() or 'exited'}")
                took_s = took_s or time.monotonic() - t0
                taken += size
                takes += 1
                # The helper looks within 10 ms near the margin; the state
                # file follows the samples: a few of them.
                st = t.wait_pages(("attached",), 3)
                if st and st.get("page_programs") != "attached" and st["headroom"] < margin:
                    st = t.wait_pages(("attached",))
                    if st and st.get("page_programs") != "attached":
                        raise RuntimeError(f"page programs not attached {READY_TIMEOUT_S} s "
                                           f"with the headroom under the margin: {st}")
                if not st:
                    raise RuntimeError("no status from the guard")
                if st.get("page_programs") == "attached":
                    break
            # A late look may have widened it meanwhile (guardd/arm.h).
            margin_now = st["arm_margin"]
            line = self.wait_line(t, ATTACH_RE, seen)
        except AssertionError as e:
            raise RuntimeError(str(e))
        finally:
            ballast.kill()
            ballast.wait(timeout=30)
            for f in (ballast.stdin, ballast.stdout):
                try:
                    f.close()
                except OSError:	# a take it died in: nothing to flush to
                    pass
        t1 = time.monotonic()
        seen = len(t.lines)
        st = t.wait_pages(("detached",))
        if not st or st.get("page_programs") != "detached":
            raise RuntimeError(f"page programs not detached {READY_TIMEOUT_S} s after the "
                               f"ballast was killed: {st}")
        detach_s = time.monotonic() - t1
        dline = self.wait_line(t, DETACH_RE, seen)
        m = ATTACH_RE.match(line)
        room = parse_fmt_bytes(m.group(2))
        r = {"try": i, "ballast_bytes": taken, "takes": takes, "first_take_bytes":
             headroom - margin // 2, "first_take_s": round(took_s, 2),
             "headroom_before": headroom, "margin": margin_now, "attach_us": int(m.group(1)),
             "room_at_attach": room, "margin_used": margin_now - (room - ARM_LOW_GAP),
             "room_at_detach": parse_fmt_bytes(DETACH_RE.match(dline).group(1)),
             "detached_after_s": round(detach_s, 2)}
        note(f"arming {i}/{ARM_TRIES}: ballast {taken / MIB:.0f} MiB in {takes} takes (the first "
             f"{r['first_take_bytes'] / MIB:.0f} MiB in {took_s:.1f} s); "
             f"attached in {r['attach_us']} us, {room / MIB:.0f} MiB above the floor "
             f"(margin {margin / MIB:.0f} MiB: {r['margin_used'] / MIB:.0f} used); "
             f"detached {detach_s:.1f} s after the ballast went")
        return r

    @staticmethod
    def wait_line(t, regex, start):
        """The first of t's lines from start on that regex matches, waited
        for (the reader thread may not have it yet)."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            for line in t.lines[start:]:
                if regex.match(line):
                    return line
            if time.monotonic() > deadline:
                raise RuntimeError(f"no line matching {regex.pattern!r} within "
                                   f"{READY_TIMEOUT_S} s: " + " | ".join(t.lines[-3:]))
            time.sleep(0.01)

    def arming(self):
        """How the helper attaches the page programs as the headroom nears
        the floor (see the docstring's pass 5)."""
        try:
            t, st = self.arm_guard()
        except RuntimeError as e:
            t, st = None, str(e)
        if t is None:
            note(f"arming: not measured: {st}")
            return {"skipped": st}
        out = {"floor": int(t.floor), "margin": st["arm_margin"],
               "headroom_start": st["headroom"], "settle_ms": round(t.settle_ms),
               "tries": [], "errors": []}
        try:
            for i in range(1, ARM_TRIES + 1):
                try:
                    out["tries"].append(self.arm_once(t, i))
                except RuntimeError as e:
                    note(f"arming {i}/{ARM_TRIES}: failed: {e}")
                    out["errors"].append(str(e))
                    # What follows would start from an unknown state.
                    break
        finally:
            rc = t.stop()
        if rc:
            out["errors"].append(f"the guard exited with status {rc}: "
                                 + " | ".join(t.lines[-3:]))
        out["would_stop"] = [l for l in t.lines if "would-stop" in l]
        out["exit"] = t.arm_exit()
        if not out["exit"]:
            out["errors"].append("no exit line on the page programs: "
                                 + " | ".join(t.lines[-3:]))
        return out

    # --- main ---------------------------------------------------------------

    def run(self):
        self.check()
        self.tmp = tempfile.mkdtemp(prefix="umtrace-bench.")
        self.started = time.time()
        try:
            self.idle_before = cpu_idle_fraction(2)
            if self.idle_before < 0.8:
                self.notes.append(f"the machine was busy before the suite: "
                                  f"{(1 - self.idle_before) * 100:.0f}% of CPU in use; "
                                  "figures will be noisy")
            self.bring_memory_in()
            self.foreign = foreign_tracing_progs()
            if self.foreign:
                self.notes.append(f"tracing programs of others were loaded "
                                  f"({len(self.foreign)}: {' '.join(self.foreign[:12])}"
                                  f"{' ...' if len(self.foreign) > 12 else ''}); "
                                  "any on the page tracepoints slow every configuration alike")
            for n in self.notes:
                note(n)
            for k, why in self.skipped.items():
                note(f"{k} skipped: {why}")
            note(MEMLEAK_NOTE)
            self.set_stats(False)
            note(f"warm-up storm: {self.workload('storm')[0]['wall_s']:.3f} s")
            if self.slice_pairs and "storm" in self.workloads:
                self.slice_pass()
            for w in self.workloads:
                cfgs = [c for c in self.configs if c in GPU_CONFIGS or w != "calls"]
                cfgs = [c for c in cfgs if c not in GPU_ONLY or w == "calls"]
                self.block(w, cfgs)
            if self.stats:
                self.set_stats(True)
                if "storm" in self.workloads:
                    self.block("storm", [c for c in self.configs
                                         if c not in ["none", "perf"] + GPU_ONLY], True)
                    if "empty" in self.configs:
                        self.paired_block()
                if "calls" in self.workloads:
                    self.block("calls", [c for c in self.configs
                                         if c in GPU_CONFIGS and c != "none"], True)
                self.set_stats(False)
            if self.torch_on:
                self.torch = torch_bench.run(self.out, note)
            if "guard" in self.configs and self.idle_s:
                try:
                    self.idle = self.guard_idle()
                except RuntimeError as e:
                    note(f"guard idle: failed: {e}")
            if self.arm_on:
                self.arm = self.arming()
            self.idle_after = cpu_idle_fraction(2)
            self.foreign_after = foreign_tracing_progs()
        finally:
            for t in list(self.live):
                t.stop()
            self.restore()
            subprocess.run(["rm", "-rf", self.tmp])
        self.finished = time.time()
        report = Report(self)
        report.print()
        path = os.path.join(self.out, "bench", "suite.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "w") as f:
            json.dump(report.json(), f, indent=1)
            f.write("\n")
        os.rename(path + ".tmp", path)
        print(f"\nwrote {path}")


# --- report -----------------------------------------------------------------

def slice_summary(pairs):
    """Median of the pairs' on/off ratios and its distribution-free 95%
    interval: the order statistics whose ranks a binomial(n, 1/2) count
    stays between 95% of the time (normal approximation)."""
    r = sorted(on / off for off, on in pairs if off > 0)
    n = len(r)
    if not n:
        return None
    h = 1.96 * math.sqrt(n) / 2
    lo = max(math.floor(n / 2 - h), 1)
    hi = min(math.ceil(n / 2 + 1 + h), n)
    return statistics.median(r), r[lo - 1], r[hi - 1]


def parse_fmt_bytes(text):
    """What umtrace's fmt_bytes printed ("512K", "1.2G", "-3.0M", "17B"),
    in bytes (to its two or three digits)."""
    m = re.fullmatch(r"(-?)([\d.]+)([BKMGTPE])", text)
    if not m:
        raise RuntimeError(f"not a size: '{text}'")
    v = float(m.group(2)) * 1024 ** "BKMGTPE".index(m.group(3))
    return int(-v if m.group(1) else v)


def fmt_range(s, fmt):
    if s is None:
        return "-"
    return f"{fmt.format(s[0])} [{fmt.format(s[1])}-{fmt.format(s[2])}]"


class Report:
    def __init__(self, suite):
        self.s = suite
        self.targets = []

    def col(self, wname, cfg, key):
        return [r.get(key) for r in self.s.results.get(wname, {}).get(cfg, [])]

    def wall(self, wname, cfg, key="wall_s"):
        return summary(self.col(wname, cfg, key))

    def ratio(self, wname, cfg, key="wall_s"):
        base, m = self.wall(wname, "none", key), self.wall(wname, cfg, key)
        if not base or not m:
            return None
        return m[0] / base[0]

    def prog_ns(self, wname, cfg, prog):
        return summary([r.get("progs", {}).get(prog, {}).get("ns")
                        for r in self.s.results.get(wname, {}).get(cfg, [])])

    def prog_names(self, wname, cfg):
        names = []
        for r in self.s.results.get(wname, {}).get(cfg, []):
            for n, d in r.get("progs", {}).items():
                if d["calls"] and n not in names:
                    names.append(n)
        return names

    def total(self, wname, cfg, key):
        v = [x for x in self.col(wname, cfg, key) if x is not None]
        return sum(v) if v else None

    def target(self, name, figure, ok, why=None):
        result = "N/A" if ok is None else ("PASS" if ok else "MISS")
        self.targets.append({"target": name, "figure": figure, "result": result,
                             **({"note": why} if why else {})})

    def paired_diff(self, cfg):
        """(balanced, empty first, cfg first): page_alloc less empty_alloc
        in the same storm, the median of each order and their mean."""
        runs = self.s.paired.get(cfg, [])
        by = [[r["diff_ns"] for r in runs if r["empty_first"] == f] for f in (True, False)]
        if not all(by):
            return None
        first, second = statistics.median(by[0]), statistics.median(by[1])
        return (first + second) / 2, first, second

    def slice(self, cfg):
        d = self.s.slices.get(cfg)
        return slice_summary(d["pairs"]) if d else None

    def slowdown_target(self, cfg, limit):
        """Judged on the slices, whose interval is narrow enough to judge
        by: met when all of it is at or under the limit, missed when all
        of it is over, undecided otherwise. Whole runs are shown beside."""
        name = f"storm slowdown {cfg} <= {limit}%"
        pct = lambda x: (x - 1) * 100
        sl, whole = self.slice(cfg), self.whole_runs(cfg)
        if not sl:
            self.target(name, whole or "-", None, self.no_slices(cfg))
            return
        fig = f"slices {pct(sl[0]):+.1f}% [{pct(sl[1]):+.1f}, {pct(sl[2]):+.1f}]"
        floor = self.slice("empty-pair")
        if floor:
            fig += f", floor {pct(floor[0]):+.1f}%"
        if pct(sl[2]) <= limit:
            ok = True
        elif pct(sl[1]) > limit:
            ok = False
        else:
            ok = None
        self.target(name, fig + (f"; {whole}" if whole else ""), ok,
                    None if ok is not None else "the interval holds the limit")

    def whole_runs(self, cfg):
        pct = lambda x: (x - 1) * 100
        r, c = self.ratio("storm", cfg), self.ratio("storm", cfg, "cpu_s")
        whole = f"whole runs: wall {pct(r):+.1f}%" if r else ""
        return whole + (f", workload CPU {pct(c):+.1f}%" if c else "")

    def no_slices(self, cfg):
        why = self.s.slices_none.get(cfg)
        if why:
            return f"no slices: {why}"
        return "no slices measured: whole runs are too noisy here to judge 3% by"

    def control_noise_target(self, cfg, slack=1.0):
        """The auto guard far from the floor attaches no page program: its
        slices' interval should lie within the control's (the method's own
        error, nothing ever attached), widened by slack points either side.
        Met when all of it does, missed when none of it does, undecided
        otherwise."""
        name = f"storm slowdown {cfg} (far from the floor) within the control's noise"
        pct = lambda x: (x - 1) * 100
        sl, ctl = self.slice(cfg), self.slice("control")
        whole = self.whole_runs(cfg)
        if not sl or not ctl:
            self.target(name, whole or "-", None,
                        self.no_slices(cfg) if not sl else "no control slices")
            return
        lo, hi = pct(ctl[1]) - slack, pct(ctl[2]) + slack
        fig = (f"slices {pct(sl[0]):+.1f}% [{pct(sl[1]):+.1f}, {pct(sl[2]):+.1f}], control "
               f"{pct(ctl[0]):+.1f}% [{pct(ctl[1]):+.1f}, {pct(ctl[2]):+.1f}] "
               f"+-{slack:g} = [{lo:+.1f}, {hi:+.1f}]")
        progs = self.s.slices.get(cfg, {}).get("programs")
        if progs is not None:
            fig += f"; {len(progs)} programs toggled"
        if lo <= pct(sl[1]) and pct(sl[2]) <= hi:
            ok = True
        elif pct(sl[2]) < lo or pct(sl[1]) > hi:
            ok = False
        else:
            ok = None
        self.target(name, fig + (f"; {whole}" if whole else ""), ok,
                    None if ok is not None else "the intervals overlap in part")

    def compute_targets(self):
        s = self.s
        floor = self.prog_ns("storm-stats", "empty", "empty_alloc")
        # The guard's page program runs near the floor only: measured
        # attached all the time (guard-always).
        for cfg, limit in (("guard-always", 15), ("trace", 30)):
            ns = self.prog_ns("storm-stats", cfg, "page_alloc")
            name = f"{cfg} page_alloc <= floor + {limit} ns"
            apart = f"{ns[0]:.1f} ns, floor {floor[0]:.1f}: {ns[0] - floor[0]:+.1f} ns" \
                if floor and ns else None
            both = self.paired_diff(cfg)
            if both:
                # Judged on the same-storm figure: it moves far less.
                self.target(name, f"same storm {both[0]:+.1f} ns (empty first "
                            f"{both[1]:+.1f}, {cfg} first {both[2]:+.1f})"
                            + (f"; apart {apart}" if apart else ""), both[0] <= limit)
            elif apart:
                self.target(name, apart, ns[0] - floor[0] <= limit)
            else:
                self.target(name, "-", None, "not measured")
        peers = {p: self.ratio("storm", p) for p in PEERS}
        peers = {p: r for p, r in peers.items() if r is not None}
        for cfg, limit in (("guard", 3), ("guard-always", 3), ("trace", 4)):
            if cfg not in s.configs:
                continue
            self.slowdown_target(cfg, limit)
            if cfg == "guard":
                self.control_noise_target(cfg)
            r = self.ratio("storm", cfg)
            if r is None:
                continue
            if peers:
                best = min(peers, key=peers.get)
                self.target(f"storm slowdown {cfg} < every peer",
                            f"{(r - 1) * 100:+.1f}% vs {best} {(peers[best] - 1) * 100:+.1f}%",
                            r < peers[best])
            else:
                self.target(f"storm slowdown {cfg} < every peer", "-", None, "no peer ran")
        for cfg in ("trace", "record", "guard", "guard-always", "record-fp"):
            if cfg not in s.results.get("calls", {}):
                continue
            rate = summary(self.col("calls", cfg, "calls_per_s"))
            lost = self.total("calls", cfg, "drops")
            name = f"0 drops at {CALLS_TARGET_RATE // 1000}k calls/s ({cfg})"
            if rate is None or lost is None:
                self.target(name, "-", None, "not measured")
                continue
            fig = f"{lost} lost, {rate[0]:,.0f} calls/s"
            if lost:
                self.target(name, fig, False)
            elif rate[0] < CALLS_TARGET_RATE:
                self.target(name, fig, None, f"{CALLS_TARGET_RATE:,} calls/s not reached here")
            else:
                self.target(name, fig, True)
        idle = s.idle
        if idle:
            rss = idle.get("VmRSS", 0) / 1024
            h = idle.get("helper_mem_kib") or {}
            helper = (f"; helper VmRSS {h.get('VmRSS', 0) / 1024:.1f} MiB, Pss of both "
                      f"{(idle.get('Pss', 0) + h.get('Pss', 0)) / 1024:.1f} MiB") if h else ""
            self.target("guard idle RSS <= 8 MiB", f"VmRSS {rss:.1f} MiB, VmHWM "
                        f"{idle.get('VmHWM', 0) / 1024:.1f} MiB{helper}", rss <= 8)
            self.target("guard idle CPU <= 0.2%",
                        f"{idle['cpu_pct']:.3f}% (daemon {idle['daemon_cpu_pct']:.3f}%, helper "
                        f"{idle['helper_cpu_pct']:.3f}%; page programs {idle['page_programs']})",
                        idle["cpu_pct"] <= 0.2)
        att = summary(s.attach.get("guard", []))
        if att:
            self.target("guard load+attach <= 300 ms", fmt_range(att, "{:.0f}") + " ms",
                        att[0] <= 300)

    def print(self):
        s = self.s
        self.compute_targets()
        p = print
        p(f"\numtrace overhead suite: {os.cpu_count()} CPUs, kernel {os.uname().release}, "
          f"{s.runs} runs per config, alternated; median [min-max]")
        p(f"storm: {s.threads} thread(s), {s.gib:g} GiB x {s.rounds} rounds "
          f"({s.pages_per_run(s.rounds):,} pages per run); stress-ng --vm {s.threads} "
          f"--vm-bytes {s.stress_bytes} --vm-method write64 --vm-ops {s.stress_ops}")
        p(f"calls: alloc_mix -t 2, {s.calls:,} calls (4 KiB cuMemAlloc_v2/cuMemFree_v2, "
          f"fake libcuda, discrete); mixed: storm + alloc_mix -t 1 with {s.mixed_calls:,} calls")
        wl = [w for w in ("storm", "stress", "mixed") if w in s.results]
        for key, title in (("wall_s", "Wall time, seconds (bpf_stats off), and ratio to no "
                                      "tracer"),
                           ("cpu_s", "Workload CPU time (user+sys; the BPF programs run in it, "
                                     "and it is less swayed than wall time by other load on "
                                     "the machine), seconds")):
            if not wl:
                break
            p("\n" + title)
            p(f"{'config':<12}" + "".join(f" {w + ' s':>25} {'ratio':>6}" for w in wl))
            for cfg in s.configs:
                if not any(self.wall(w, cfg, key) for w in wl):
                    continue
                row = f"{cfg:<12}"
                for w in wl:
                    m, r = self.wall(w, cfg, key), self.ratio(w, cfg, key)
                    row += f" {fmt_range(m, '{:.3f}'):>25} {('%.3f' % r) if r else '-':>6}"
                p(row)
        if s.slices:
            p(f"\nStorm in slices ({s.slice_mib} MiB each, programs attached for every other "
              f"slice; bpf_stats off): slowdown = median on/off ratio of the pairs "
              f"[95% interval]")
            p(f"{'config':<12} {'pairs':>6} {'slowdown':>9} {'interval':>17} "
              f"{'ms/slice off':>13}  programs")
            for cfg in SLICE_CONFIGS:
                d, m = s.slices.get(cfg), self.slice(cfg)
                if not m:
                    if cfg in s.slices_none:
                        p(f"{cfg:<12} {'-':>6} {'-':>9} {'-':>17} {'-':>13}  "
                          f"{s.slices_none[cfg]}")
                    continue
                off = statistics.median(x[0] for x in d["pairs"])
                progs = " ".join(d["programs"])
                p(f"{cfg:<12} {len(d['pairs']):>6} {(m[0] - 1) * 100:>+8.2f}% "
                  f"{'[%+.2f, %+.2f]' % ((m[1] - 1) * 100, (m[2] - 1) * 100):>17} "
                  f"{off:>13.2f}  {progs[:60] + ('...' if len(progs) > 60 else '')}")
            p("(control attaches nothing: its figure is the method's own error; empty-pair "
              "is the floor of a tracer that counts frees too; empty-sched empty programs on "
              "the guard's process tracepoints; guard toggles what the auto "
              "guard's daemon attached far from the floor, its page programs not among them, "
              "guard-always its page programs too)")
        if "calls" in s.results:
            p("\nGPU call storm: calls/s, records lost (all runs), tracer CPU and peak RSS")
            p(f"{'config':<12} {'calls/s':>30} {'lost':>8} {'tracer cpu s':>13} "
              f"{'peak RSS MiB':>13}")
            for cfg in s.results["calls"]:
                rate = summary(self.col("calls", cfg, "calls_per_s"))
                lost = self.total("calls", cfg, "drops")
                cpu = summary(self.col("calls", cfg, "tracer_cpu_s"))
                hwm = summary(self.col("calls", cfg, "tracer_hwm_kib"))
                p(f"{cfg:<12} {fmt_range(rate, '{:,.0f}'):>30} "
                  f"{'-' if lost is None else lost:>8} "
                  f"{'-' if not cpu else f'{cpu[0]:.2f}':>13} "
                  f"{'-' if not hwm else f'{hwm[1] / 1024:.1f}':>13}")
            p("(lost: ring-buffer records; record also ships a stack record per call, so "
              "its count can exceed the calls lost)")
            if "mixed" in s.results:
                p("mixed run, GPU side: " + ", ".join(
                    f"{cfg} {summary(self.col('mixed', cfg, 'calls_per_s'))[0]:,.0f}/s"
                    for cfg in s.configs if summary(self.col("mixed", cfg, "calls_per_s"))))
        if any(k.endswith("-stats") for k in s.results):
            p("\nBPF programs, mean ns per invocation (bpf_stats on; page programs from the "
              "storm, uprobes from the GPU call storm)")
            p(f"{'workload':<8} {'config':<12} {'program':<16} {'ns':>24} {'calls/run':>11} "
              f"{'rec.misses':>10}")
            for w in ("storm-stats", "calls-stats"):
                for cfg in s.results.get(w, {}):
                    for n in self.prog_names(w, cfg):
                        ns = self.prog_ns(w, cfg, n)
                        c = summary([r.get("progs", {}).get(n, {}).get("calls")
                                     for r in s.results[w][cfg]])
                        miss = sum(r.get("progs", {}).get(n, {}).get("misses") or 0
                                   for r in s.results[w][cfg])
                        p(f"{w[:-6]:<8} {cfg:<12} {n:<16} {fmt_range(ns, '{:.1f}'):>24} "
                          f"{c[0] if c else 0:>11,.0f} {miss:>10}")
            for cfg in self.s.paired:
                d = self.paired_diff(cfg)
                runs = self.s.paired[cfg]
                if d:
                    p(f"{cfg} page_alloc less empty_alloc, both in the same storm: {d[0]:+.1f} ns "
                      f"(median with empty first {d[1]:+.1f}, with {cfg} first {d[2]:+.1f}; "
                      f"{len(runs)} runs, {min(r['diff_ns'] for r in runs):+.1f} to "
                      f"{max(r['diff_ns'] for r in runs):+.1f})")
            fl = self.prog_ns("storm-stats", "empty", "empty_alloc")
            if fl:
                p(f"(the figures include the statistics' own clock reads: less empty_alloc's "
                  f"{fl[0]:.1f} ns, they are the program body)")
            if "perf" in s.configs:
                p("perf: no BPF program (a perf event ring buffer per CPU); its cost is in "
                  "the wall times")
        p("\nTracers: load+attach ms, BPF map memory, CPU s and peak RSS during the storm "
          "(the guard's with its helper's), records lost (storm/stress/mixed, all runs), "
          "recursion misses (all runs)")
        p(f"{'config':<12} {'attach ms':>22} {'maps MiB':>9} {'cpu s':>7} {'RSS MiB':>8} "
          f"{'lost':>16} {'rec.miss':>9}")
        for cfg in s.configs:
            if cfg == "none":
                continue
            att = summary(s.attach.get(cfg, []))
            info = s.tracer_info.get(cfg, {})
            mem = f"{info['bpf_map_bytes'] / 2**20:.2f}" if info else "-"
            cpu = summary(self.col("storm", cfg, "tracer_cpu_s"))
            hwm = summary(self.col("storm", cfg, "tracer_hwm_kib"))
            lost = [self.total(w, cfg, "drops") for w in ("storm", "stress", "mixed")]
            lost = "/".join("-" if x is None else str(x) for x in lost)
            miss = sum(self.total(w, cfg, "recursion_misses") or 0 for w in s.results)
            p(f"{cfg:<12} {fmt_range(att, '{:.0f}'):>22} {mem:>9} "
              f"{'-' if not cpu else f'{cpu[0]:.2f}':>7} "
              f"{'-' if not hwm else f'{hwm[1] / 1024:.1f}':>8} {lost:>16} {miss:>9}")
        settle = summary([r.get("settle_ms") for w in ("storm", "stress", "calls", "mixed")
                          for r in s.results.get(w, {}).get("guard", [])])
        if settle:
            states = sorted({r.get("page_programs") or "unknown"
                             for w in ("storm", "stress", "calls", "mixed")
                             for r in s.results.get(w, {}).get("guard", [])
                             if "settle_ms" in r})
            p(f"guard (auto): page programs {'/'.join(states)} {fmt_range(settle, '{:.0f}')} ms "
              "after start (each run's workload starts then)")
        if s.idle:
            i = s.idle
            mib = lambda kib: f"{(kib or 0) / 1024:.1f}"
            small = i["ringbuf_256K"]
            h = i.get("helper_mem_kib") or {}
            p(f"\nGuard idle {i['seconds']} s (page programs {i['page_programs']}, "
              f"{i['settle_ms']} ms after start): CPU {i['cpu_s']:.3f} s ({i['cpu_pct']:.3f}% "
              f"of a core) = daemon {i['daemon_cpu_s']:.3f} s ({i['daemon_cpu_pct']:.3f}%) + "
              f"helper {i['helper_cpu_s']:.3f} s ({i['helper_cpu_pct']:.3f}%)")
            p(f"  Daemon MiB: VmRSS {mib(i.get('VmRSS'))} = RssAnon {mib(i.get('RssAnon'))} + "
              f"RssFile {mib(i.get('RssFile'))}, VmHWM {mib(i.get('VmHWM'))}, Pss "
              f"{mib(i.get('Pss'))}")
            if h:
                p(f"  Helper ({HELPER_COMM}, a fork of the daemon) MiB: VmRSS "
                  f"{mib(h.get('VmRSS'))} = RssAnon {mib(h.get('RssAnon'))} + RssFile "
                  f"{mib(h.get('RssFile'))}, VmHWM {mib(h.get('VmHWM'))}, Pss {mib(h.get('Pss'))}"
                  f" (pages shared with the daemon count in both VmRSS, once in the Pss)")
            else:
                p(f"  No helper: {i['helpers']} {HELPER_COMM} process")
            r = i["rescan"]
            p(f"  As deployed: libcuda found by the guard itself, rescan every 2 s, "
              f"{i['processes']} processes ({i['maps_lines']} maps lines). The rescan: "
              f"{r['rescan_on_cpu_pct']:.3f}% with it, {r['rescan_off_cpu_pct']:.3f}% with "
              f"--rescan 0; {r['crowd_cpu_pct']:.3f}% with {r['crowd_processes']} processes "
              f"({r['crowd_maps_lines']} maps lines)")
            p(f"  (RssFile holds the ring buffer, mapped twice: the 8 MiB default counts 16. "
              f"With --ringbuf-size 256K: VmRSS {mib(small['VmRSS'])}, "
              f"VmHWM {mib(small['VmHWM'])}: the peak is reached while loading)")
        if s.arm:
            self.print_arming(p)
        if s.torch:
            torch_bench.print_table(s.torch, p)
            for res, name, figure in torch_bench.targets(s.torch):
                self.target(name, figure, None if res == "N/A" else res == "PASS")
        p("\nTargets")
        for t in self.targets:
            extra = f" ({t['note']})" if "note" in t else ""
            p(f"  {t['result']:<5} {t['target']:<40} {t['figure']}{extra}")
        p("\nNot run:")
        p(f"  {MEMLEAK_NOTE}")
        for k, why in s.skipped.items():
            p(f"  {k}: {why}")
        notes = list(s.notes)
        if s.idle_after < 0.8:
            notes.append(f"the machine was busy after the suite: "
                         f"{(1 - s.idle_after) * 100:.0f}% of CPU in use")
        runs = [r for w in s.results.values() for rs in w.values() for r in rs]
        taints = sum(1 for r in runs if r.get("taints"))
        if taints:
            notes.append(f"{taints} runs were disturbed (see 'taints' in the JSON)")
        errors = sum(1 for r in runs if "error" in r)
        if errors:
            notes.append(f"{errors} runs failed and are left out (see 'error' in the JSON)")
        if notes:
            p("\nNotes:")
            for n in notes:
                p(f"  {n}")

    def print_arming(self, p):
        a = self.s.arm
        p("\nArming: the auto guard's helper attaching the page programs near the floor "
          "(guard -v -n, a ballast taking the headroom less half the margin)")
        if "skipped" in a:
            p(f"  not measured: {a['skipped']}")
            return
        tries = a["tries"]
        p(f"  floor {a['floor'] / GIB:.2f} GiB, headroom {a['headroom_start'] / GIB:.2f} GiB "
          f"at start, margin {a['margin'] / MIB:.0f} MiB; detached {a['settle_ms']} ms after "
          "start")
        if tries:
            att = summary([t["attach_us"] for t in tries])
            used = summary([t["margin_used"] / MIB for t in tries])
            det = summary([t["detached_after_s"] for t in tries])
            bal = summary([t["first_take_bytes"] / MIB / t["first_take_s"] for t in tries
                           if t["first_take_s"] > 0])
            takes = summary([t["takes"] for t in tries])
            p(f"  {len(tries)} ballasts (the first take at {fmt_range(bal, '{:.0f}')} MiB/s; "
              f"{takes[2]} takes at most): attached in "
              f"{att[0]:.0f} us median, {att[2]:.0f} max; margin used before the attach "
              f"{used[0]:.0f} MiB median, {used[2]:.0f} max (of {a['margin'] / MIB:.0f}); "
              f"detached {fmt_range(det, '{:.1f}')} s after the ballast was killed")
        e = a.get("exit")
        if e:
            p(f"  exit line: attached {e['arms']} times within {e['margin']}; {e['looks']} "
              f"looks, none more than {e['latest_ms']:.1f} ms past its time; the margin "
              f"widened {e['widened']} times for late ones")
        if a.get("would_stop"):
            p(f"  {len(a['would_stop'])} would-stop lines (dry run): {a['would_stop'][0]}")
        for err in a["errors"]:
            p(f"  error: {err}")

    def arming_json(self):
        a = self.s.arm
        if not a or "skipped" in a or not a["tries"]:
            return a
        tries = a["tries"]
        att = summary([t["attach_us"] for t in tries])
        used = summary([t["margin_used"] for t in tries])
        return {**a, "attach_us": {"median": att[0], "max": att[2]},
                "margin_used_bytes": {"median": used[0], "max": used[2]}}

    def json(self):
        s = self.s
        git = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                             capture_output=True, text=True).stdout.strip()
        workloads = {}
        for w, cfgs in s.results.items():
            workloads[w] = {}
            for cfg, runs in cfgs.items():
                d = {"runs": runs}
                for key in ("wall_s", "cpu_s", "calls_per_s", "storm_s", "tracer_cpu_s",
                            "tracer_hwm_kib", "attach_ms", "settle_ms"):
                    m = summary([r.get(key) for r in runs])
                    if m:
                        d[key] = {"median": m[0], "min": m[1], "max": m[2]}
                r = self.ratio(w, cfg)
                if r:
                    d["ratio"] = round(r, 4)
                r = self.ratio(w, cfg, "cpu_s")
                if r:
                    d["cpu_ratio"] = round(r, 4)
                for key in ("drops", "recursion_misses"):
                    t = self.total(w, cfg, key)
                    if t is not None:
                        d[key + "_total"] = t
                if w.endswith("-stats"):
                    d["progs"] = {}
                    for n in self.prog_names(w, cfg):
                        m = self.prog_ns(w, cfg, n)
                        if m:
                            d["progs"][n] = {"median_ns": m[0], "min_ns": m[1], "max_ns": m[2]}
                workloads[w][cfg] = d
        return {
            "schema": 1,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(s.started)),
            "duration_s": round(s.finished - s.started),
            "git": git,
            "out": s.out,
            "umtrace_version": subprocess.run([s.umtrace, "--version"], capture_output=True,
                                              text=True).stdout.strip(),
            "host": {"cpus": os.cpu_count(), "kernel": os.uname().release,
                     "idle_before": round(s.idle_before, 3),
                     "idle_after": round(s.idle_after, 3),
                     "foreign_tracing_progs": s.foreign,
                     "foreign_tracing_progs_after": s.foreign_after},
            "settings": {"runs": s.runs, "threads": s.threads, "gib_per_round": s.gib,
                         "rounds": s.rounds, "pages_per_run": s.pages_per_run(s.rounds),
                         "stress_ops": s.stress_ops, "stress_bytes": s.stress_bytes,
                         "calls": s.calls, "mixed_calls": s.mixed_calls,
                         "stats_rounds": s.stats_rounds, "stats_calls": s.stats_calls,
                         "idle_s": s.idle_s, "arm": s.arm_on, "slice_pairs": s.slice_pairs,
                         "slice_blocks": s.slice_blocks, "slice_mib": s.slice_mib},
            "configs": {c: CONFIG_DESC[c] for c in s.configs},
            "workloads": workloads,
            "tracers": {c: {**s.tracer_info.get(c, {}),
                            **({"attach_ms": dict(zip(("median", "min", "max"),
                                                      summary(s.attach[c])))}
                               if s.attach.get(c) else {})}
                        for c in s.configs if c != "none"},
            "guard_idle": s.idle,
            "arming": self.arming_json(),
            "torch_hook": s.torch,
            "paired_page_alloc": {c: {"runs": runs, **dict(zip(
                ("balanced_diff_ns", "empty_first_diff_ns", "tracer_first_diff_ns"),
                self.paired_diff(c) or ()))} for c, runs in s.paired.items()},
            "slices": {**{c: {**d, **dict(zip(("median_ratio", "ci95_low", "ci95_high"),
                                              self.slice(c)))}
                          for c, d in s.slices.items()},
                       **{c: {"none": why} for c, why in s.slices_none.items()
                          if c not in s.slices}},
            "targets": self.targets,
            "not_run": {"bcc-memleak": MEMLEAK_NOTE, **s.skipped},
            "notes": s.notes,
        }


def main():
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    suite = Suite(sys.argv[1])

    def on_term(sig, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    try:
        suite.run()
    except KeyboardInterrupt:
        note("interrupted")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
