# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""A slide too slow for the window, named on a horizon, end to end: the
horizons compressed from 1 min, 15 min and 1 h to 20 s, 60 s and 240 s
by UMTRACE_TEST_HORIZONS (a test's setting, model/torch.h), and
torch_alloc's two slides: creep (a block of 64 KiB kept every 100 ms step,
allocated's floor slides: leak) and spread (a new 14 MiB segment every
15 steps while the floor stays flat: fragmentation; 50 weights put the
window's 5% above 50 MiB, so the window never names it).

One job per kind, watched at once by top (the verdict and its age), a
live report --json (interrupted while the job runs), a live report
(interrupted once it has exited) and record; then report FILE (text and
--json, at the job's exit) and the timeline's band.
The rate per hour is checked against the job's own figures over the
horizon the fit ended with: within 10% for the creep's even slope, 25% for
the spread's steps of a segment. Every wait is for a state, with a
deadline."""
import json
import os
import re
import signal
import time

from harness import interrupt, wait_line
from test_torch import DISCRETE, objects, parse_top, paths

MIB = 1 << 20
HORIZON_S = 20
SLIDE_ENV = dict(DISCRETE, UMTRACE_TEST_HORIZONS=f"{HORIZON_S},60,240")
JOB = ["-s", "250", "-w", "100", "-M", "16G"]
# kind: (torch_alloc's arguments, the figure that slides, the tolerance on its rate)
SLIDES = {
    "leak": (["-m", "creep"], "allocated", 0.10),
    "fragmentation": (["-m", "spread", "-p", "50"], "reserved", 0.25),
}


def child_of(pid, deadline):
    """The process record launched (its only child)."""
    path = f"/proc/{pid}/task/{pid}/children"
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                kids = f.read().split()
        except FileNotFoundError:
            kids = []
        if kids:
            return int(kids[0])
        time.sleep(0.02)
    raise AssertionError("record started no job")


def top_until(top, pid, kind, deadline):
    """Read top -b until its row for pid names kind: [(monotonic time,
    row)] of pid's rows so far. Reads what top printed, never blocks."""
    fd = top.stdout.fileno()
    os.set_blocking(fd, False)
    text, rows = b"", []
    while time.monotonic() < deadline:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            chunk = b""
        if not chunk:
            time.sleep(0.05)
            continue
        text += chunk
        snaps = parse_top(text.decode(errors="replace"))
        for snap in snaps[len(rows):]:
            rows.append((time.monotonic(), snap.get(pid)))
        if any(r and r["verdict"] == kind for _, r in rows):
            return [(t, r) for t, r in rows if r]
    raise AssertionError(f"top never named {kind}: {[r['line'] for _, r in rows if r][-3:]}")


def truth_rate(truth, figure, end_ns):
    """The job's own rate per hour of figure over the horizon ending at
    end_ns: a least-squares slope of its step-end figures there."""
    pts = [(s["t_mono_ns"] / 1e9, s[figure]) for s in truth["per_step"]
           if end_ns - HORIZON_S * 1e9 <= s["t_mono_ns"] <= end_ns]
    assert len(pts) >= 20, (len(pts), end_ns)
    n = len(pts)
    mt = sum(t for t, _ in pts) / n
    mv = sum(v for _, v in pts) / n
    slope = sum((t - mt) * (v - mv) for t, v in pts) / sum((t - mt) ** 2 for t, _ in pts)
    return slope * 3600


def check_object(o, kind, figure, tol, truth):
    """A torch_allocator object whose verdict and root cause are the
    slide, named on the shortest horizon with its rate."""
    assert o["verdict"] == kind and o["slide_horizon_s"] == HORIZON_S, o
    c = o["cause"]
    assert c and c["kind"] == kind and c["horizon_s"] == HORIZON_S, o
    # Never named on the window: every episode of its kind is the horizon's.
    assert all(e["horizon_s"] == HORIZON_S for e in o["episodes"] if e["kind"] == kind), o
    want = truth_rate(truth, figure, c["end_ns"])
    for rate in (o["slide_per_hour"], c["per_hour"]):
        assert abs(rate - want) <= tol * want, (rate / MIB, want / MIB, o)
    key = "floor" if kind == "leak" else "reserved"
    assert c[key][1] > c[key][0], c
    if kind == "fragmentation":
        assert abs(c["floor"][1] - c["floor"][0]) < MIB, c	# the weights, flat
        assert c["unused"][1] > c["unused"][0], c
        assert "expandable_segments:True" in o["advice"], o
    return o["slide_per_hour"], want


def run_slide(env, kind):
    """The job under top, a live report and record; what each said."""
    args, figure, tol = SLIDES[kind]
    c10, job = paths(env)
    rec, svg, truth_path = (env.tmpfile(f"slide-{kind}.{x}") for x in ("umt", "svg", "json"))
    for f in (rec, svg, truth_path):
        if os.path.exists(f):
            os.unlink(f)
    attach = ["--libcuda", env.fake, "--libc10", c10]
    top = env.popen([env.umtrace, "top", "-b", "-i", "500ms", *attach], env=SLIDE_ENV)
    live = env.popen([env.umtrace, "report", "--json", *attach], env=SLIDE_ENV)
    ended = env.popen([env.umtrace, "report", *attach], env=SLIDE_ENV)
    for p in (top, live, ended):
        wait_line(p.stderr, "probing PyTorch", 30)
    r = env.popen([env.umtrace, "record", "-o", rec, *attach, "--", job, *args, *JOB,
                   "-o", truth_path], env=SLIDE_ENV)
    t0 = time.monotonic()
    pid = child_of(r.pid, t0 + 30)
    rows = top_until(top, pid, kind, t0 + 45)
    # Named while the job runs: the live report says so before its end.
    live.send_signal(signal.SIGINT)
    out, err = live.communicate(timeout=30)
    assert live.returncode == 0, err[-800:]
    assert r.wait(timeout=60) == 0, r.stderr.read()[-800:]
    interrupt(top)
    ended.send_signal(signal.SIGINT)
    text, err = ended.communicate(timeout=30)
    assert ended.returncode == 0, err[-800:]
    check_text(text, pid, kind)
    with open(truth_path) as f:
        truth = json.load(f)
    assert truth["pid"] == pid, truth["pid"]
    lo = [o for o in objects(out) if o["pid"] == pid]
    assert len(lo) == 1 and not lo[0]["exited"], lo
    named, want = check_object(lo[0], kind, figure, tol, truth)
    first = truth["per_step"][0]["t_mono_ns"] / 1e9
    t_named = next(t for t, row in rows if row["verdict"] == kind)
    print(f"    {kind}: top named it {t_named - first:.1f} s after the job's first step; "
          f"live {named / MIB:.0f} MiB/h against the job's {want / MIB:.0f} MiB/h")
    return pid, rows, rec, svg, truth


def check_top(rows, kind):
    """top's VERDICT: the root cause and its age, which cannot be older
    than the job nor younger than half the horizon (the fit's span)."""
    t, row = next((t, r) for t, r in rows if r["verdict"] == kind)
    cell = row["line"][row["line"].index(kind):].rstrip()
    m = re.fullmatch(r"%s (\d+)s" % kind, cell)
    assert m and HORIZON_S / 2 - 1 <= int(m.group(1)) <= t - rows[0][0] + 3, (cell, rows[0])


def check_text(text, pid, kind):
    """report's text at the job's exit: the test's horizons said, the
    verdict on the shortest with its rate, the episode."""
    assert f"horizons of {HORIZON_S} s, 60 s and 240 s, not 1 min, 15 min and 1 h: a test's " \
           "(UMTRACE_TEST_HORIZONS)" in text, text[-2000:]
    assert re.search(r"^pid %d \(torch_alloc\) cuda:0 \[exited\]: " % pid, text, re.M), \
        text[-2000:]
    what = "allocated's floor" if kind == "leak" else r"reserved \(not the floor\)"
    assert re.search(r"^  verdict %s: over the last %d s, %s rises \S+/h, a slide too slow "
                     r"for a window of 4\.0 s$" % (kind, HORIZON_S, what), text, re.M), \
        text[-2000:]
    assert re.search(r"^    %s \d+\.\ds-\d+\.\ds: .*; over %d s, (the floor|reserved) \+\S+/h$"
                     % (kind, HORIZON_S), text, re.M), text[-2000:]


def check_file(env, pid, rec, svg, kind, truth):
    """report FILE (text and --json) at the job's exit, and the timeline."""
    args, figure, tol = SLIDES[kind]
    rj = env.popen([env.umtrace, "report", "--json", rec], env=SLIDE_ENV)
    out, err = rj.communicate(timeout=60)
    assert rj.returncode == 0, err
    o = [o for o in objects(out) if o["pid"] == pid]
    assert len(o) == 1 and o[0]["exited"], o
    at_exit, want = check_object(o[0], kind, figure, tol, truth)
    rt = env.popen([env.umtrace, "report", rec], env=SLIDE_ENV)
    text, err = rt.communicate(timeout=60)
    assert rt.returncode == 0, err
    check_text(text, pid, kind)
    ts = env.popen([env.umtrace, "timeline", rec, "-o", svg], env=SLIDE_ENV)
    assert ts.wait(timeout=60) == 0, ts.stderr.read()
    with open(svg) as f:
        bands = re.findall(r'<g class="torch-episode"><title>torch_alloc \((\d+)\) cuda:0: '
                           r'(\S+) from ([\d.]+) s to ([\d.]+) s', f.read())
    mine = [b for b in bands if int(b[0]) == pid and b[1] == kind]
    assert len(mine) == 1, bands
    c = o[0]["cause"]
    # The timeline counts from the recording's start, the report from the job's first sample.
    band = float(mine[0][3]) - float(mine[0][2])
    assert abs(band - (c["end_s"] - c["start_s"])) < 0.3, (mine, c)
    print(f"    {kind} at exit: {at_exit / MIB:.0f} MiB/h against the job's {want / MIB:.0f} "
          f"MiB/h; episode {c['start_s']:.1f}-{c['end_s']:.1f} s")


def slide_end_to_end(env, kind):
    pid, rows, rec, svg, truth = run_slide(env, kind)
    check_top(rows, kind)
    check_file(env, pid, rec, svg, kind, truth)


def test_torch_slide_leak(env):
    """creep: allocated's floor slides 64 KiB a step, named leak on the
    20 s horizon (never on the window) with its rate per hour, in top (with
    its age), a live report, report FILE at exit and the timeline."""
    slide_end_to_end(env, "leak")


def test_torch_slide_fragmentation(env):
    """spread: reserved and its unused part slide, the floor does not:
    named fragmentation on the 20 s horizon with reserved's rate, with
    expandable segments as the advice, everywhere the leak is."""
    slide_end_to_end(env, "fragmentation")
