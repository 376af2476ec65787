# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""PyTorch's caching allocator seen from outside: the hook
c10::reportMemoryUsageToProfiler in the fake libc10.so, called by
tests/workloads/torch_alloc (a caching allocator with PyTorch's rules) for
every block, and what umtrace makes of it: figures exact against the
workload's own truth, a verdict per mode, none in the warm-up, the old
3-argument hook, CPU-device calls left out, a libc10 found inside another
mount namespace, and the same story in top, report, record, timeline and
the guard's stop.

The jobs run against the fake libcuda in discrete mode (FAKECUDA_MODE:
segments take no host pages), except under the guard, whose floor needs
the host memory they take."""
import json
import os
import re
import shutil
import signal
import subprocess
import time

from harness import Skip, maps_say, readline, wait_line

MIB = 1 << 20
DISCRETE = dict(os.environ, FAKECUDA_MODE="discrete")
FIGURES = ("allocated", "reserved", "peak_allocated", "peak_reserved", "allocs", "frees")


def paths(env):
    c10 = os.path.join(env.tests, "libc10.so")
    job = os.path.join(env.tests, "torch_alloc")
    for p in (c10, job):
        if not os.path.exists(p):
            raise Skip(f"{p} not built")
    return c10, job


def c10_copy(env, name):
    """The fake libc10 copied into a fresh directory of this test's:
    (the original, torch_alloc, the copy)."""
    c10, job = paths(env)
    d = env.tmpfile(name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    copy = os.path.join(d, "libc10.so")
    shutil.copy(c10, copy)
    return c10, job, copy


def objects(text, event="torch_allocator"):
    return [o for o in (json.loads(l) for l in text.splitlines() if l.startswith("{"))
            if o.get("event") == event]


def truth_of(path):
    with open(path) as f:
        return json.load(f)


def report_cmd(env, job_args, extra=(), penv=None, timeout=120):
    """`umtrace report --json -- torch_alloc ...`: (its allocator objects, stderr, truth)."""
    c10, job = paths(env)
    truth = env.tmpfile("torch-truth.json")
    if os.path.exists(truth):
        os.unlink(truth)
    p = env.popen([env.umtrace, "report", "--json", "--stack", "fp", "--libcuda", env.fake,
                   "--libc10", c10, *extra, "--", job, *job_args, "-o", truth],
                  env=penv or DISCRETE)
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0, err[-800:]
    return objects(out), err, truth_of(truth)


def test_torch_figures_exact(env):
    """allocated, reserved, their peaks and the block counts, to the byte,
    against torch_alloc's own totals: with the size_t totals (leaking, so
    the figures move), the int64 totals, expandable segments, and other
    allocators' calls to the same hook among them, which must not count:
    the CPU's (device {CPU, -1}) and another backend's on index 0 ({XPU,
    0}: only the device type tells it from CUDA's first device)."""
    for args in (["-m", "leak", "-C"], ["-m", "empty", "-L"], ["-m", "steady", "-e", "-X"]):
        # Every block: the hook's windows would make no difference at this
        # job's pace unless another job's calls took their budget.
        objs, err, truth = report_cmd(env, ["-s", "12", "-w", "20", *args],
                                      extra=["--libc10-every-call"])
        assert "probing PyTorch's allocator hook (3 forms)" in err, err[-600:]
        assert len(objs) == 1, (args, objs)
        o, final = objs[0], truth["final"]
        assert o["pid"] == truth["pid"] and o["device"] == 0 and o["comm"] == "torch_alloc", o
        for k in FIGURES:
            assert o[k] == final[k], (args, k, o[k], final[k])
        assert o["reserved_known"] and o["cached"] == final["reserved"] - final["allocated"], o
        assert o["exited"], o
        if {"-C", "-X"} & set(args):	# the other device's calls happened, left out
            assert truth["cpu"]["allocs"] == 12 and o["allocs"] == final["allocs"], truth["cpu"]
        assert o["expandable_segments"] == ("-e" in args), o
        assert not o["counts_windowed"], o


WINDOW_LINE = re.compile(r"hook: (\d+) windows \((\d+) for its segments' moves, (\d+) closed "
                         r"with their (\d+) calls taken\)")


def test_torch_windowed_verdicts(env):
    """Jobs calling the hook far more than a window's budget (about 10,000
    calls a second), so that it is attached in windows: the verdict each
    mode deserves (as on every call), with steps shorter than a window (128
    calls, 10 ms apart) and longer (2048 calls, 100 ms apart: there the
    growing shapes use what they reserve at each step's peak, no
    fragmentation on every call either, so it is not run); reserved exact at the
    end where the segments moved last in the warm-up; the block counts marked
    as the windows', and fewer than the job made."""
    want = {"steady": "ok", "fragment": "fragmentation", "leak": "leak", "cache": "cache-held"}
    shapes = {"short": ["-t", "64", "-b", "64K", "-w", "10", "-s", "600"],
              "long": ["-t", "1024", "-b", "4K", "-w", "100", "-s", "70"]}
    for shape, sargs in shapes.items():
        for mode, verdict in want.items():
            if shape == "long" and mode == "fragment":
                continue
            margs = ["-m", mode]
            if mode == "fragment":	# 1% a step, fewer and slower short steps: within -M
                margs += ["-g", "1", "-s", "250", "-w", "20"]
            if mode == "leak" and shape == "long":	# 6 MiB a step: past the noise
                margs += ["-k", "64"]
            objs, err, truth = report_cmd(env, [*sargs, *margs, "-M", "64G"], extra=["-v"])
            m = WINDOW_LINE.search(err)
            assert m and int(m.group(3)) >= 3, (shape, mode, err[-600:])
            assert len(objs) == 1, (shape, mode, objs)
            o, final = objs[0], truth["final"]
            assert o["verdict"] == verdict, (shape, mode, o)
            assert o["counts_windowed"] and o["allocs"] < final["allocs"], (shape, mode, o)
            if mode in ("steady", "cache"):	# no segment moves after the warm-up
                assert o["reserved"] == final["reserved"], (shape, mode, o, final)


def test_torch_three_argument_hook(env):
    """The old hook (ptr, size, device): no totals, so reserved is unknown
    and allocated is kept from the signed sizes, exact from the first call."""
    objs, _, truth = report_cmd(env, ["-m", "leak", "-s", "12", "-w", "20", "-3", "-C"])
    assert truth["hook"]["args"] == 3, truth["hook"]
    o, final = objs[0], truth["final"]
    assert not o["reserved_known"] and o["reserved"] == 0 and o["peak_reserved"] == 0, o
    for k in ("allocated", "peak_allocated", "allocs", "frees"):
        assert o[k] == final[k], (k, o[k], final[k])
    assert o["verdict"] in ("ok", "leak"), o


def start_jobs(env, job, modes, steps, wait_ms, extra_env=None):
    jobs = {}
    for name, args, e in modes:
        truth = env.tmpfile(f"torch-{name}.json")
        penv = dict(DISCRETE, **(e or {}), **(extra_env or {}))
        jobs[name] = (env.popen([job, "-s", str(steps), "-w", str(wait_ms), "-M", "16G",
                                 *args, "-o", truth], env=penv), truth)
    return jobs


def test_torch_verdicts(env):
    """Every mode at once under one live report: the verdict each deserves,
    and the advice that names its fix. With expandable segments the same
    growing shapes are no fragmentation; with max_split_size_mb in its
    environment the advice says to leave it out."""
    c10, job = paths(env)
    modes = [
        ("steady", ["-m", "steady"], None),
        ("fragment", ["-m", "fragment", "-g", "2"], None),
        ("fragment-es", ["-m", "fragment", "-g", "2", "-e"], None),
        ("fragment-split", ["-m", "fragment", "-g", "2"],
         {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:64"}),
        ("leak", ["-m", "leak"], None),
        ("cache", ["-m", "cache"], None),
        ("empty", ["-m", "empty"], None),
    ]
    # Every call: seven jobs together call the hook more often than a
    # window's budget, and each one's last figures are checked to the byte
    # (test_torch_windowed_verdicts has the windows' verdicts).
    rp = env.popen([env.umtrace, "report", "--json", "--stack", "fp", "-d", "12s",
                    "--libcuda", env.fake, "--libc10", c10, "--libc10-every-call"], env=DISCRETE)
    wait_line(rp.stderr, "probing PyTorch", 30)
    jobs = start_jobs(env, job, modes, 70, 100)
    for name, (p, _) in jobs.items():
        p.wait(timeout=60)
        assert p.returncode == 0, (name, p.stderr.read())
    out, err = rp.communicate(timeout=60)
    assert rp.returncode == 0, err[-600:]
    got = {o["pid"]: o for o in objects(out)}
    want = {"steady": "ok", "fragment": "fragmentation", "fragment-es": "ok",
            "fragment-split": "fragmentation", "leak": "leak", "cache": "cache-held",
            "empty": "ok"}
    for name, (p, truth) in jobs.items():
        o = got.get(p.pid)
        assert o, (name, sorted(got))
        assert o["phase"] == "steady" and o["verdict"] == want[name], (name, o)
        final = truth_of(truth)["final"]
        assert o["allocated"] == final["allocated"] and o["reserved"] == final["reserved"], \
            (name, o, final)
    adv = {name: got[p.pid]["advice"] for name, (p, _) in jobs.items()}
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in adv["fragment"], adv
    assert "max_split_size_mb" not in adv["fragment"], adv
    assert "without max_split_size_mb" in adv["fragment-split"], adv
    assert got[jobs["fragment-split"][0].pid]["max_split_size"], got
    assert got[jobs["fragment-es"][0].pid]["expandable_segments"], got
    assert not got[jobs["fragment"][0].pid]["expandable_segments"], got
    assert "torch.cuda.empty_cache()" in adv["cache"], adv
    # A leak's advice names the call sites of the segments it holds.
    assert "cuMemAlloc_v2 < ca_malloc" in adv["leak"], adv
    assert adv["steady"] == "" and adv["empty"] == "", adv


def parse_top(text):
    """top -b snapshots: [(t, {pid: {"verdict":...}})], columns by header position."""
    snaps, cur, cols = [], None, None
    for line in text.splitlines():
        if line.startswith("umtrace top "):
            cur = {}
            snaps.append(cur)
            continue
        if line.startswith("PID ") and "ALLOCATED" in line:
            cols = {n: line.index(n) for n in ("ALLOCATED", "RESERVED", "CACHED", "VERDICT")}
            continue
        if line.startswith("PID "):
            cols = None
            continue
        f = line.split()
        if cur is None or not f or not f[0].isdigit():
            continue
        row = {"line": line}
        if cols:
            end = cols["ALLOCATED"] + 9
            row.update(allocated=line[cols["ALLOCATED"]:end].strip(),
                       reserved=line[end + 1:end + 10].strip(),
                       cached=line[end + 11:end + 20].strip(),
                       verdict=line[cols["VERDICT"]:].split()[0] if
                       line[cols["VERDICT"]:].strip() else "")
        cur[int(f[0])] = row
    return snaps



def top_while(env, top, argv, timeout=60):
    """Run a job (discrete fake) beside a running `top -b`, reading its
    snapshots as they come; then stop top. The job and [(seconds since the
    job started, snapshot)] and all top printed."""
    fd = top.stdout.fileno()
    os.set_blocking(fd, False)
    t0 = time.monotonic()
    p = env.popen(argv, env=DISCRETE)
    seen, text = [], b""
    while p.poll() is None and time.monotonic() - t0 < timeout:
        time.sleep(0.05)
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            continue
        text += chunk
        now = time.monotonic() - t0
        for snap in parse_top(text.decode(errors="replace"))[len(seen):]:
            seen.append((now, snap))
    top.send_signal(signal.SIGINT)
    top.communicate(timeout=30)
    return p, seen, text.decode(errors="replace")


def test_torch_no_verdict_in_warmup(env):
    """A job whose reserved races up from its first step: top shows it in
    warm-up for its first 2 s (never fragmentation), then fragmentation.
    Each snapshot is placed in time by when top printed it."""
    c10, job = paths(env)
    top = env.popen([env.umtrace, "top", "-b", "-i", "250ms", "--libcuda", env.fake,
                     "--libc10", c10], env=DISCRETE)
    wait_line(top.stderr, "probing PyTorch", 30)
    p, seen, _ = top_while(env, top, [job, "-m", "fragment", "-g", "3", "-s", "60", "-w", "100",
                                      "-M", "16G", "-o", "/dev/null"])
    assert p.returncode == 0, p.stderr.read()
    verdicts = [(t, s[p.pid]["verdict"]) for t, s in seen if p.pid in s]
    assert verdicts, seen[-3:]
    early = [v for t, v in verdicts if t < 2.0]
    assert early and all(v == "warm-up" for v in early), verdicts
    assert "fragmentation" not in [v for t, v in verdicts if t < 2.0], verdicts
    assert verdicts[-1][1] == "fragmentation", verdicts
    print(f"    first verdict at {min(t for t, v in verdicts if v != 'warm-up'):.1f} s")


def test_torch_top_columns(env):
    """top: ALLOCATED, RESERVED, CACHED and VERDICT for a process whose
    allocator reports, blank for one that does not (a plain GPU job); the
    figures are the allocator's own."""
    c10, job = paths(env)
    top = env.popen([env.umtrace, "top", "--once", "-i", "3s", "--libcuda", env.fake,
                     "--libc10", c10], env=DISCRETE)
    wait_line(top.stderr, "probing PyTorch", 30)
    p = env.popen([job, "-m", "steady", "-s", "40", "-w", "100", "-o", "/dev/null"],
                  env=DISCRETE)
    other = env.popen([env.alloc_mix, "-n", "2", "-s", "8M", "-a", "alloc", "-w", "4000",
                       "-o", "/dev/null"], env=DISCRETE)
    out, err = top.communicate(timeout=30)
    assert top.returncode == 0, err
    snap = parse_top(out)[-1]
    assert p.pid in snap and other.pid in snap, out
    row = snap[p.pid]
    assert row["reserved"] == "94M" and row["verdict"] in ("warm-up", "ok"), row
    assert row["allocated"] == "40M", row	# the step's floor: it sleeps there
    assert row["cached"] == "54M", row
    blank = snap[other.pid]
    assert blank["allocated"] == blank["reserved"] == blank["cached"] == "" and \
        not blank["verdict"], blank
    p.wait(timeout=30)
    other.wait(timeout=30)


def test_torch_container_discovery(env):
    """A job in its own mount namespace maps its own libc10.so at the very
    path the host's has (a bind mount): a probe on the host's file would
    never fire. Found through /proc/PID/maps and /proc/PID/root by the
    rescan, without --libc10; its figures exact."""
    if not shutil.which("unshare"):
        raise Skip("unshare not installed")
    c10, job, copy = c10_copy(env, "torch-ctr")
    truth = env.tmpfile("torch-ctr.json")
    penv = {k: v for k, v in DISCRETE.items() if k != "LD_LIBRARY_PATH"}
    rp = env.popen([env.umtrace, "report", "--json", "--stack", "fp", "-d", "9s",
                    "--rescan", "200ms", "--libcuda", env.fake], env=penv)
    wait_line(rp.stderr, "probing 26 entry points", 30)
    ctr = env.popen(["unshare", "-m", "--propagation", "private", "sh", "-c",
                     f"mount --bind {copy} {c10} && exec {job} -m leak -s 20 -w 50 "
                     f"-d 1500 -M 16G -o {truth}"], env=penv)
    ctr.wait(timeout=60)
    assert ctr.returncode == 0, ctr.stderr.read()
    out, err = rp.communicate(timeout=60)
    assert rp.returncode == 0, err[-800:]
    assert f"probing PyTorch's allocator hook (3 forms) in /proc/{ctr.pid}/root{c10}" in err, \
        err[-1500:]
    o = [o for o in objects(out) if o["pid"] == ctr.pid]
    final = truth_of(truth)["final"]
    assert o and all(o[0][k] == final[k] for k in FIGURES), (o, final)


def fresh(env, name):
    """A temp file of this test's, not there yet."""
    path = env.tmpfile(name)
    if os.path.exists(path):
        os.unlink(path)
    return path


def record_job(env, rec, job_args):
    """`umtrace record -o REC -- torch_alloc JOB_ARGS`: its stderr."""
    c10, job = paths(env)
    p = subprocess.run([env.umtrace, "record", "-o", rec, "--stack", "fp", "--libcuda",
                        env.fake, "--libc10", c10, "--", job, *job_args],
                       capture_output=True, text=True, timeout=120, env=DISCRETE)
    assert p.returncode == 0, p.stderr[-600:]
    return p.stderr


def test_torch_record_report_timeline(env):
    """record keeps the samples: a report of the file tells what a live one
    would (figures, verdict, advice), and the timeline draws the job's
    reserved and allocated."""
    rec, truth = fresh(env, "torch.umt"), fresh(env, "torch-rec.json")
    err = record_job(env, rec, ["-m", "fragment", "-g", "2", "-s", "60", "-w", "100",
                                "-M", "16G", "-o", truth])
    m = re.search(r"and (\d+) PyTorch allocator samples", err)
    # 6 s of samples at 100 ms, and the last one at the job's end
    assert m and 30 <= int(m.group(1)) <= 200, err
    final = truth_of(truth)["final"]
    r = subprocess.run([env.umtrace, "report", "--json", rec], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    o = objects(r.stdout)
    assert len(o) == 1 and all(o[0][k] == final[k] for k in FIGURES), (o, final)
    assert o[0]["verdict"] == "fragmentation", o
    t = subprocess.run([env.umtrace, "report", rec], capture_output=True, text=True,
                       timeout=60)
    assert "PyTorch's caching allocator" in t.stdout and "verdict fragmentation" in t.stdout, \
        t.stdout[-1500:]
    assert "advice: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in t.stdout, t.stdout
    svg = fresh(env, "torch.svg")
    s = subprocess.run([env.umtrace, "timeline", rec, "-o", svg], capture_output=True,
                       text=True, timeout=60)
    assert s.returncode == 0, s.stderr
    with open(svg) as f:
        text = f.read()
    assert "torch_alloc (%d) cuda:0 reserved" % o[0]["pid"] in text, text[:2000]
    assert "cuda:0 allocated" in text and 'class="torch"' in text, text[:2000]


def available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no MemAvailable")


def test_torch_guard_stop(env):
    """guard --torch: the stop line, the post-mortem's event.txt and report
    and the metrics file carry the stopped job's allocated, reserved and
    verdict. The job's segments take host memory (unified fake) until its
    next cuMemAlloc_v2 would cross a floor set 600 MiB below what is
    available."""
    c10, job = paths(env)
    floor = available() - 600 * MIB
    state, prom, pm = env.tmpfile("tg.state"), env.tmpfile("tg.prom"), env.tmpfile("tg-pm")
    shutil.rmtree(pm, ignore_errors=True)
    env._tmp.append(prom + ".tmp")
    g = env.popen([env.umtrace, "guard", "--torch", "--libcuda", env.fake, "--libc10", c10,
                   "--platform", "unified", "--no-pin", "--state-file", state,
                   "--floor", str(floor), "--low", str(floor + 64 * MIB), "--drop", "90%",
                   "--metrics-file", prom, "--postmortem-dir", pm,
                   "--scope", "comm:^torch_alloc$"])
    _, early = wait_line(g.stderr, "guard: armed", 30)
    assert "probing PyTorch's allocator hook" in early, early
    p = env.popen([job, "-m", "fragment", "-g", "4", "-s", "60", "-w", "300", "-o",
                   "/dev/null"])
    line, _ = wait_line(g.stderr, "guard: stop pid=%d " % p.pid, 60)
    m = re.search(r"torch_allocated=(\S+) torch_reserved=(\S+) torch_verdict=(\S+)", line)
    assert m and m.group(3) in ("warm-up", "fragmentation"), line
    deadline = time.monotonic() + 10
    text = ""
    while time.monotonic() < deadline and f'pid="{p.pid}"' not in text:
        time.sleep(0.2)
        if os.path.exists(prom):
            with open(prom) as f:
                text = f.read()
    p.kill()
    p.wait(timeout=30)
    g.send_signal(signal.SIGINT)
    g.communicate(timeout=60)
    mm = re.search(r'^umtrace_torch_reserved_bytes\{pid="%d",comm="torch_alloc",device="0"\} '
                   r"(\d+)$" % p.pid, text, re.M)
    assert mm and int(mm.group(1)) >= 94 * MIB, text[-1200:]
    assert re.search(r'^umtrace_torch_allocated_bytes\{pid="%d",comm="torch_alloc",'
                     r'device="0"\} \d+$' % p.pid, text, re.M), text[-1200:]
    bundles = os.listdir(pm)
    assert len(bundles) == 1, bundles
    with open(os.path.join(pm, bundles[0], "event.txt")) as f:
        ev = f.read()
    assert re.search(r"^torch_allocated_bytes \d+$", ev, re.M) and \
        re.search(r"^torch_reserved_bytes \d+$", ev, re.M) and \
        f"torch_verdict {m.group(3)}\n" in ev, ev
    with open(os.path.join(pm, bundles[0], "report.txt")) as f:
        assert "PyTorch's caching allocator" in f.read()


def test_torch_versioned_libc10_found_and_its_form_named(env):
    """A distribution's libc10 has a versioned name (libc10.so.2.6) and no
    bare libc10.so beside it: found in LD_LIBRARY_PATH all the same, and
    -v names the form of the hook it has and what that gives."""
    c10, job = paths(env)
    d = env.tmpfile("versioned-c10")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    shutil.copy(c10, os.path.join(d, "libc10.so.2.6"))
    p = subprocess.run([env.umtrace, "report", "-v", "-d", "1s", "--libcuda", env.fake],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "LD_LIBRARY_PATH": d})
    assert p.returncode == 0, p.stderr[-1500:]
    assert f"found {d}/libc10.so.2.6\n" in p.stderr, p.stderr[-3000:]
    assert re.search(r"%s/libc10\.so\.2\.6: PyTorch's allocator hook, "
                     r"_ZN3c1027reportMemoryUsageToProfilerEPvl(mm|ll)N\S+: with the "
                     r"allocator's totals" % re.escape(d), p.stderr), p.stderr[-3000:]
    # -v is umtrace's own lines; libbpf's debug log waits for -vv.
    assert "libbpf: " not in p.stderr, "libbpf's debug log at -v: " + p.stderr[-1500:]
    p = subprocess.run([env.umtrace, "report", "-vv", "-d", "1s", "--libcuda", env.fake],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "LD_LIBRARY_PATH": d})
    assert p.returncode == 0 and "libbpf: " in p.stderr, p.stderr[-1500:]


BURST = ["-m", "burst", "-g", "2", "-s", "120", "-w", "100", "-M", "16G"]


def check_burst(o):
    """A burst job's allocator object: the window says cache-held now, the
    root cause is the burst's fragmentation (steps 20 to 69 of 100 ms:
    from about 2 s to 7 s of its life), with its figures and its fix."""
    assert o["verdict"] == "cache-held", o
    c = o["cause"]
    assert c and c["kind"] == "fragmentation" and c["horizon_s"] == 0, o
    assert 1.5 <= c["start_s"] <= 4.0 and 6.0 <= c["end_s"] <= 8.5, c
    assert c["reserved"][1] - c["reserved"][0] >= 300 * MIB, c
    assert c["floor"][0] == c["floor"][1], c	# the weights: what outlives a step
    assert c["unused"][1] > c["unused"][0], c
    assert [e["kind"] for e in o["episodes"]] == ["fragmentation", "cache-held"], o
    assert o["episodes"][0] == c, (o["episodes"], c)
    assert o["episodes"][1]["start_s"] >= c["end_s"], o["episodes"]
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in o["advice"], o
    assert "empty_cache" not in o["advice"], o
    print(f"    fragmentation {c['start_s']:.1f}-{c['end_s']:.1f} s, reserved "
          f"{c['reserved'][0] / MIB:.0f} -> {c['reserved'][1] / MIB:.0f} MiB, then cache-held")


def test_torch_burst_episodes(env):
    """A burst of fragmentation, then steps from the cache it left: report
    names the burst as the root cause, with its advice (expandable
    segments), though its last window says cache-held; every other job
    keeps no episode (steady) or one of its own kind (leak)."""
    objs, _, truth = report_cmd(env, BURST)
    assert len(objs) == 1 and objs[0]["pid"] == truth["pid"], objs
    check_burst(objs[0])
    objs, _, _ = report_cmd(env, ["-m", "steady", "-s", "60", "-w", "100"])
    assert objs[0]["cause"] is None and objs[0]["episodes"] == [], objs
    objs, _, _ = report_cmd(env, ["-m", "leak", "-s", "60", "-w", "100"])
    assert objs[0]["cause"]["kind"] == "leak", objs
    assert [e["kind"] for e in objs[0]["episodes"]] == ["leak"], objs


def test_torch_burst_record_report_timeline(env):
    """The same from a recording: report FILE (text and --json) and the
    timeline's shaded bands, one per episode, labelled by kind."""
    rec, svg = fresh(env, "torch-burst.umt"), fresh(env, "torch-burst.svg")
    record_job(env, rec, [*BURST, "-o", "/dev/null"])
    r = subprocess.run([env.umtrace, "report", "--json", rec], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    o = objects(r.stdout)
    assert len(o) == 1, o
    check_burst(o[0])
    t = subprocess.run([env.umtrace, "report", rec], capture_output=True, text=True,
                       timeout=60)
    assert t.returncode == 0, t.stderr
    m = re.search(r"^  verdict fragmentation from (\d+\.\d)s to (\d+\.\d)s \(reserved \+\S+, "
                  r"floor flat, unused [^)]+\)\), then cache-held: over the last", t.stdout, re.M)
    assert m, t.stdout[-2000:]
    assert re.search(r"^  episodes \(seconds from its first sample\):\n"
                     r"    fragmentation \d+\.\ds-\d+\.\ds: reserved \+\S+, floor flat, "
                     r"unused \S+ \(\d+%\)\n    cache-held \d+\.\ds-\d+\.\ds: ", t.stdout, re.M), \
        t.stdout[-2000:]
    assert "advice: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in t.stdout, t.stdout
    s = subprocess.run([env.umtrace, "timeline", rec, "-o", svg], capture_output=True,
                       text=True, timeout=60)
    assert s.returncode == 0, s.stderr
    with open(svg) as f:
        text = f.read()
    bands = re.findall(r'<g class="torch-episode"><title>torch_alloc \((\d+)\) cuda:0: '
                       r'(\S+) from ([\d.]+) s to ([\d.]+) s', text)
    assert [(int(b[0]), b[1]) for b in bands] == [(o[0]["pid"], "fragmentation"),
                                                   (o[0]["pid"], "cache-held")], bands
    assert float(bands[0][3]) <= float(bands[1][2]) + 0.05, bands
    assert ">fragmentation</text>" in text and ">cache-held</text>" in text, text[:3000]


def test_torch_top_root_cause(env):
    """top during a burst job: once the burst is over and its windows say
    cache-held, VERDICT still shows the root cause, fragmentation, with how
    long ago it began; the cell keeps the columns aligned."""
    c10, job = paths(env)
    top = env.popen([env.umtrace, "top", "-b", "-i", "500ms", "--libcuda", env.fake,
                     "--libc10", c10], env=DISCRETE)
    wait_line(top.stderr, "probing PyTorch", 30)
    p, seen, text = top_while(env, top, [job, *BURST, "-o", "/dev/null"])
    assert p.returncode == 0, p.stderr.read()
    rows = [(t, s[p.pid]) for t, s in seen if p.pid in s]
    late = [(t, r) for t, r in rows if t >= 10.0]
    assert late, [(t, r["line"]) for t, r in rows[-3:]]
    for t, r in late:
        cell = r["line"][r["line"].index(r["verdict"]):].rstrip()
        m = re.fullmatch(r"fragmentation (\d+)s", cell)
        assert m and t - 9.0 <= int(m.group(1)) + 1 and int(m.group(1)) <= t, (t, r["line"])
    header = [l for l in text.splitlines() if l.startswith("PID ") and "VERDICT" in l]
    assert header and all(r["line"].index(r["verdict"]) == header[-1].index("VERDICT")
                          for _, r in late), (header[-1], late[-1][1]["line"])
    print(f"    at {late[-1][0]:.1f} s: {late[-1][1]['line'].split()[-2:]}")


def test_torch_guard_stop_names_the_root_cause(env):
    """A burst job (unified fake: its segments take host memory) stopped at
    admission as the burst's growth crosses a floor a GiB below what is
    available, seconds into its fragmentation: its stop line, its bundle's
    event.txt and --on-stop name the root cause, an episode of its life in
    words (the fragmentation since it began, the floor flat)."""
    c10, job = paths(env)
    state, pm = env.tmpfile("tgc.state"), env.tmpfile("tgc-pm")
    hook_out = env.tmpfile("tgc.env")
    shutil.rmtree(pm, ignore_errors=True)
    if os.path.exists(hook_out):
        os.unlink(hook_out)
    floor = available() - 1024 * MIB
    g = env.popen([env.umtrace, "guard", "--torch", "--libcuda", env.fake, "--libc10", c10,
                   "--platform", "unified", "--no-pin", "--state-file", state,
                   "--floor", str(floor), "--low", str(floor + 64 * MIB), "--drop", "90%",
                   "--postmortem-dir", pm, "--scope", "comm:^torch_alloc$",
                   "--on-stop", f"env | grep ^UMTRACE_TORCH > {hook_out}.tmp && "
                                f"mv {hook_out}.tmp {hook_out}"])
    wait_line(g.stderr, "guard: armed", 30)
    # Shapes growing 4% a step: reserved crosses a GiB halfway through the burst.
    p = env.popen([job, "-m", "burst", "-g", "4", "-s", "120", "-w", "100", "-M", "16G",
                   "-o", "/dev/null"])
    line = failed = ""
    try:
        line, _ = wait_line(g.stderr, "guard: stop pid=%d " % p.pid, 60)
        deadline = time.monotonic() + 30
        while not os.path.exists(hook_out):
            assert time.monotonic() < deadline, "--on-stop did not run"
            time.sleep(0.05)
    except AssertionError as e:
        failed = str(e)
    finally:
        p.kill()
        p.wait(timeout=30)
        g.send_signal(signal.SIGINT)
        err = g.communicate(timeout=60)[1]
    assert not failed, f"{failed}\njob: {p.returncode} {p.stderr.read()[-600:]}\n{err[-2000:]}"
    cause = r'fragmentation \d+\.\ds-\d+\.\ds: reserved \+\S+, floor flat, unused [^"]+'
    m = re.search(r'torch_verdict=(\S+) torch_cause="(%s)" ' % cause, line)
    assert m and m.group(1) == "fragmentation", line
    bundles = os.listdir(pm)
    assert len(bundles) == 1, bundles
    with open(os.path.join(pm, bundles[0], "event.txt")) as f:
        ev = f.read()
    assert f'\ntorch_cause "{m.group(2)}"\n' in ev, ev
    assert "torch_advice " in ev and "expandable_segments:True" in ev, ev
    with open(hook_out) as f:
        hook = dict(l.split("=", 1) for l in f.read().splitlines())
    assert hook["UMTRACE_TORCH_CAUSE"] == m.group(2), hook
    print(f"    root cause at the stop: {m.group(2)}")


def test_torch_library_replaced_on_disk(env):
    """A job whose libc10 was replaced on disk after it mapped it (`pip
    install -U torch` while it trains: its maps say "(deleted)", no path
    leads to the inode it runs) is probed all the same, through
    /proc/PID/map_files/, with no --libc10: its figures exact. The job is
    held stopped in its start-up delay until the probes are in."""
    c10, job, lib = c10_copy(env, "torch-replaced")
    truth = fresh(env, "torch-replaced.json")
    penv = dict(DISCRETE, LD_LIBRARY_PATH=os.path.dirname(lib))
    p = env.popen([job, "-m", "leak", "-s", "20", "-w", "50", "-d", "1000", "-M", "16G",
                   "-o", truth], env=penv)
    maps_say(p.pid, lib)
    p.send_signal(signal.SIGSTOP)
    shutil.copy(c10, lib + ".new")
    os.rename(lib + ".new", lib)	# the old inode lives on, unnamed
    maps_say(p.pid, lib + " (deleted)")
    rp = env.popen([env.umtrace, "report", "-v", "--json", "--stack", "fp", "--rescan", "0",
                    "--libc10-every-call", "--libcuda", env.fake, "-p", str(p.pid)],
                   env=DISCRETE)
    want = f"probing PyTorch's allocator hook (3 forms) in {lib} (deleted, run by pid {p.pid})"
    wait_line(rp.stderr, want, 60)
    wait_line(rp.stderr, "capabilities dropped", 60)
    p.send_signal(signal.SIGCONT)
    p.wait(timeout=60)
    assert p.returncode == 0, p.stderr.read()
    out, err = rp.communicate(timeout=60)
    assert rp.returncode == 0, err[-800:]
    o = [o for o in objects(out) if o["pid"] == p.pid]
    final = truth_of(truth)["final"]
    assert o and all(o[0][k] == final[k] for k in FIGURES), (o, final)

