#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""reporting_dips.py OUT: how often a VM's free page reporting makes the
guard decide to stop a job on memory that is free.

After a large free, the kernel's free page reporting (a virtio-balloon
here; page_reporting_order sets the block size) takes free blocks off the
free lists in batches, tells the hypervisor and puts them back a few ms
later: MemFree, and the zones' free-page counters the guard decides by,
dip meanwhile, with no page handed out.

Each round a ballast of BENCH_BALLAST_MIB is taken and freed, and from 1
to 5 s after the free (reporting starts 2 s after a free) a trickle job in
the guard's scope takes a page every ms. The floor sits BENCH_MARGIN_MIB
under where the host settles with the ballast gone, so the trickle never
really crosses it: each of the dry-run guard's kernel decisions in that
window is a dip taken for a crossing. MemFree is sampled as fast as
/proc/meminfo reads to count the dips (over 16 MiB under the running
maximum) and their depth.

The guard looks again before it tells a kernel stop (guardd/enforce.c:
a crossing that does not last); what it let go is counted too. Prints a
line per round and the totals; writes OUT/bench/reporting_dips.json.
Needs root. Environment: BENCH_ROUNDS=5, BENCH_BALLAST_MIB=4096,
BENCH_MARGIN_MIB=64.
"""
import json
import mmap
import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from harness import meminfo, readline  # noqa: E402

MIB = 1 << 20
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
BALLAST = int(os.environ.get("BENCH_BALLAST_MIB", "4096")) * MIB
MARGIN = int(os.environ.get("BENCH_MARGIN_MIB", "64")) * MIB
DIP = 16 * MIB
WINDOW = (1.0, 5.0)	# s after the free

TRICKLE = r"""
import mmap, sys, time
m = mmap.mmap(-1, 64 << 20)
sys.stdout.write("ready\n"); sys.stdout.flush()
for line in sys.stdin:
    end = time.monotonic() + float(line)
    i = 0
    while time.monotonic() < end and i < len(m):
        m[i] = 1
        i += 4096
        time.sleep(0.001)
    m.close()
    m = mmap.mmap(-1, 64 << 20)
    sys.stdout.write("done\n"); sys.stdout.flush()
"""


def ballast():
    """Take BALLAST, then free it; the moment of the free, CLOCK_MONOTONIC."""
    m = mmap.mmap(-1, BALLAST)
    for i in range(0, BALLAST, 4096):
        m[i] = 1
    m.close()
    return time.monotonic()


def settle(timeout=20):
    """Wait until MemFree moves by under 16 MiB over a second."""
    deadline = time.monotonic() + timeout
    last = meminfo("MemFree")
    while time.monotonic() < deadline:
        time.sleep(1)
        now = meminfo("MemFree")
        if abs(now - last) < DIP:
            return
        last = now


def sample(until, out):
    """MemAvailable as fast as it reads, until CLOCK_MONOTONIC until."""
    while time.monotonic() < until:
        out.append((time.monotonic(), meminfo("MemAvailable")))


def on_free_memory(samples, t, floor):
    """At t the host was over the floor but for a dip: its most in the
    50 ms either side was, by more than a dip's least."""
    near = [v for at, v in samples if abs(at - t) <= 0.05]
    return bool(near) and max(near) > floor + DIP


def dips(samples):
    """Dips under the running maximum: (count of separate dips, deepest)."""
    top, n, deepest, inside = 0, 0, 0, False
    for _, v in samples:
        top = max(top, v)
        low = top - v > DIP
        n += low and not inside
        inside = low
        deepest = max(deepest, top - v)
    return n, deepest


def judge(freed, n, deepest, samples, lines, floor):
    """A round's figures; its kernel decisions in the window, each over the
    floor but for a dip (on free memory) or not."""
    time.sleep(0.5)	# the guard's last lines
    decided = [float(m.group(1)) for m in
               (re.search(r"would-stop pid=\d+ ts=([\d.]+) .*reason=(?:floor|admission)", l)
                for l in list(lines)) if m]
    mine = [t for t in decided if freed + WINDOW[0] <= t <= freed + WINDOW[1]]
    let_go = sum(1 for l in list(lines) if "the crossing did not last" in l)
    r = {"dips": n, "deepest_mib": deepest / MIB, "would_stop": len(mine),
         "let_go_so_far": let_go,
         "on_free_memory": sum(on_free_memory(samples, t, floor) for t in mine),
         "lowest_over_floor_mib": (min(v for _, v in samples) - floor) / MIB}
    print(f"round: {r['dips']} dips, deepest {r['deepest_mib']:.0f} MiB, MemAvailable "
          f"down to {r['lowest_over_floor_mib']:+.0f} MiB over the floor; "
          f"{r['would_stop']} kernel decisions to stop the trickle, "
          f"{r['on_free_memory']} of them over the floor but for a dip; "
          f"{r['let_go_so_far']} let go so far (the crossing did not last)", flush=True)
    return r


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "build/x86"
    umtrace = os.path.join(out, "umtrace")
    trickle = subprocess.Popen([sys.executable, "-c", TRICKLE], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    assert readline(trickle.stdout, 120, "ready from the trickle") == "ready\n"
    ballast()	# once before, so that reporting has caught up when the floor is set
    settle()
    floor = meminfo("MemAvailable") - 1024 * MIB
    state = os.path.join("/tmp", f"umtrace-dips-{os.getpid()}.state")
    guard = subprocess.Popen([umtrace, "guard", "--no-pin", "-n", "--state-file", state,
                              "--floor", str(floor), "--low", str(floor + MIB),
                              "--drop", str(meminfo("MemTotal") // 2), "--scope", f"pid:{trickle.pid}",
                              "--page-programs", "always"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(guard.stderr), daemon=True)
    reader.start()
    deadline = time.monotonic() + 60
    while not any("guard: armed" in l for l in lines):
        assert guard.poll() is None and time.monotonic() < deadline, "".join(lines)
        time.sleep(0.05)
    rounds = []
    for r in range(ROUNDS):
        # The host settled MARGIN over the floor: held here, out of scope.
        settle()
        level = mmap.mmap(-1, max(meminfo("MemAvailable") - floor - MARGIN, MIB))
        for i in range(0, len(level), 4096):
            level[i] = 1
        freed = ballast()
        samples = []
        sampler = threading.Thread(target=sample, args=(freed + WINDOW[1], samples))
        sampler.start()
        time.sleep(max(0, freed + WINDOW[0] - time.monotonic()))
        trickle.stdin.write(f"{WINDOW[1] - WINDOW[0]}\n")
        trickle.stdin.flush()
        assert readline(trickle.stdout, 120, "done from the trickle") == "done\n"
        sampler.join()
        n, deepest = dips(samples)
        rounds.append(judge(freed, n, deepest, samples, lines, floor))
        level.close()
    guard.send_signal(signal.SIGINT)
    guard.wait(timeout=60)
    reader.join(timeout=10)
    trickle.kill()
    total = sum(r["would_stop"] for r in rounds)
    false = sum(r["on_free_memory"] for r in rounds)
    print(f"{ROUNDS} rounds of {BALLAST // MIB} MiB freed, floor {MARGIN // MIB} MiB under "
          f"the settled level: {sum(r['dips'] for r in rounds)} dips, deepest "
          f"{max(r['deepest_mib'] for r in rounds):.0f} MiB; {total} decisions, {false} "
          f"on free memory, in {ROUNDS} windows of {WINDOW[1] - WINDOW[0]:.0f} s")
    os.makedirs(os.path.join(out, "bench"), exist_ok=True)
    with open(os.path.join(out, "bench", "reporting_dips.json"), "w") as f:
        json.dump({"margin_mib": MARGIN // MIB, "ballast_mib": BALLAST // MIB,
                   "rounds": rounds}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
