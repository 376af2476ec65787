# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Faults around GPU calls: the traced process exits, is killed, execs or
forks in the middle of calls, 64 threads call at once, a pid is reused
between a process's calls and the next one's, libcuda is unmapped and
mapped again, two containers map two libcuda files, and the ring buffer
fills up. In every case each call is accounted (seen, or counted as
lost) and the totals stay consistent: nothing negative, nothing runaway,
nothing unfreed that was released.

The workloads write their own ground truth: tests/workloads/lifecycle.c
(one JSON file per process image) and dlcycle.c; alloc_mix for the rest.

Pid reuse is made exact rather than waited for: B is created with A's
pid by clone3()'s set_tid (root, host pid namespace), after A exited
holding allocations; where that is refused the tests say SKIP. Reuse
through ns_last_pid in a new pid namespace would not reuse anything
umtrace sees, since it keys processes by their host pid: that case is a
test of its own (two jobs, both pid 1 of their namespaces, kept apart).
"""
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import time

from harness import Skip, TraceResult, wait_line

MIB = 1 << 20
# A count or byte total at or above this is a wrapped negative, or runaway.
BIG = 1 << 60


def within(value, want, pct):
    return abs(value - want) <= want * pct / 100.0


def seen_calls(calls):
    seen = {}
    for c in calls:
        seen[c["api"]] = seen.get(c["api"], 0) + 1
    return seen


def add_calls(*dicts):
    out = {}
    for d in dicts:
        for api, n in d.items():
            out[api] = out.get(api, 0) + n
    return out


def am_calls(truth):
    """alloc_mix's ground truth as {api: calls}, without what is not probed."""
    return {api: c["calls"] for api, c in truth["calls"].items()
            if api not in ("cuInit", "cuMemSetAccess")}


def check_consistent(res):
    """No negative (wrapped) or runaway figure; every row adds up."""
    for row in res.summary:
        for k, v in row.items():
            if isinstance(v, int):
                assert 0 <= v < BIG, f"{k} wrapped or runaway: {row}"
        ok = row["calls"] - row["failed"] - row["died_in_call"]
        assert ok >= 0, row
        assert row["unfreed"] + row["freed_at_exit"] <= ok, row
        assert row["unfreed_host_bytes"] + row["freed_at_exit_host_bytes"] <= row["host_bytes"], row
    t = res.totals
    assert t, f"no totals line: {res}"
    for k, v in t.items():
        if isinstance(v, int):
            assert 0 <= v < BIG, f"{k} wrapped or runaway: {t}"
    assert t["records"] == len(res.calls), (t, len(res.calls))
    assert t["unfreed"] == sum(r["unfreed"] for r in res.summary), t
    assert t["freed_at_exit"] == sum(r["freed_at_exit"] for r in res.summary), t
    assert sum(r["calls"] for r in res.summary) == t["records"], t


def lc_prefix(env, name, roles):
    """A ground-truth prefix for lifecycle, its files cleaned up afterwards."""
    prefix = env.tmpfile(name)
    for role in roles:
        path = env.tmpfile(f"{name}.{role}.json")
        if os.path.exists(path):
            os.unlink(path)
    return prefix


def lc_truth(prefix, role):
    with open(f"{prefix}.{role}.json") as f:
        return json.load(f)


def trace_cmd(env, argv, extra=(), timeout=180, penv=None):
    """umtrace trace --json --libcuda FAKE [extra] -- argv, run to its end."""
    p = subprocess.run([env.umtrace, "trace", "--json", "--libcuda", env.fake, *extra, "--",
                        *argv], capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, **(penv or {})))
    return TraceResult(p.returncode, p.stdout, p.stderr)


def lifecycle(env):
    path = os.path.join(env.tests, "lifecycle")
    if not os.path.exists(path):
        raise Skip(f"{path} not built")
    return path


def test_exit_with_calls_in_flight(env):
    """8 threads asleep inside cuMemAlloc_v2 when the process exits: each
    call is reported ended by the exit with its pages, every returned call
    is there, and what the process held is released by its exit."""
    prefix = lc_prefix(env, "lcexit", ["exit"])
    res = trace_cmd(env, [lifecycle(env), "exit", "-o", prefix, "-t", "8", "-n", "3",
                          "-s", "4M"], penv={"FAKECUDA_DELAY_MS": "20"})
    assert res.rc == 0, res
    truth = lc_truth(prefix, "exit")
    assert seen_calls(res.calls) == truth["calls"], (seen_calls(res.calls), truth["calls"])
    died = [c for c in res.calls if c["end"] != "returned"]
    assert sorted(c["tid"] for c in died) == sorted(truth["inflight"]), died
    for c in died:
        assert c["end"] == "exited" and c["api"] == "cuMemAlloc_v2", c
        assert within(c["host_bytes"], 4 * MIB, 2), c
    assert all(c["ret"] == 0 for c in res.calls if c["end"] == "returned")
    exits = [o for o in res.other if o.get("event") == "exit"]
    assert [e["pid"] for e in exits] == [truth["pid"]], exits
    check_consistent(res)
    t = res.totals
    assert t["dropped"] == 0 and t["unmatched_frees"] == 0, t
    assert t["unfreed"] == 0 and t["freed_at_exit"] == truth["kept"] == 24, t
    row = [r for r in res.summary if r["api"] == "cuMemAlloc_v2"][0]
    assert row["died_in_call"] == 8 and row["calls"] == 32, row


def test_sigkill_with_calls_in_flight(env):
    """SIGKILL at an arbitrary moment, 8 threads in slow calls: every call
    that returned is seen, nothing is seen that was not started, the calls
    cut short are ended by the exit, and the totals add up."""
    prefix = lc_prefix(env, "lckill", ["kill"])
    mapf = env.tmpfile("lckill.kill.map")
    tr = env.popen([env.umtrace, "trace", "--json", "--libcuda", env.fake, "--",
                    lifecycle(env), "kill", "-o", prefix, "-t", "8", "-s", "1M"],
                   env=dict(os.environ, FAKECUDA_DELAY_MS="30"))
    deadline = time.monotonic() + 30
    while not os.path.exists(f"{prefix}.kill.json") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.path.exists(f"{prefix}.kill.json"), "workload did not start"
    layout = lc_truth(prefix, "kill")
    time.sleep(1.5)
    os.kill(layout["pid"], signal.SIGKILL)
    out, err = tr.communicate(timeout=60)
    res = TraceResult(tr.returncode, out, err)
    assert res.rc == 128 + signal.SIGKILL, res
    n = len(layout["apis"])
    with open(mapf, "rb") as f:
        raw = f.read()
    started = dict(zip(layout["apis"], struct.unpack_from(f"={n}Q", raw, 0)))
    finished = dict(zip(layout["apis"], struct.unpack_from(f"={n}Q", raw, 8 * n)))
    seen = seen_calls(res.calls)
    assert res.totals["dropped"] == 0, res.totals
    for api in set(started) | set(seen):
        s, f, got = started.get(api, 0), finished.get(api, 0), seen.get(api, 0)
        assert f <= got <= s, f"{api}: {f} finished <= {got} seen <= {s} started"
    assert sum(started.values()) > 8 * 10, started
    cut = [c for c in res.calls if c["end"] != "returned"]
    assert 1 <= len(cut) <= 8, cut
    assert sum(seen.values()) - sum(finished.values()) <= 8
    for c in cut:
        assert c["end"] == "exited", c
        assert c["host_bytes"] <= 1.02 * MIB, c
    exits = [o for o in res.other if o.get("event") == "exit"]
    assert [e["pid"] for e in exits] == [layout["pid"]], exits
    check_consistent(res)
    assert res.totals["unfreed"] == 0 and res.totals["freed_at_exit"] <= 8, res.totals


def run_exec(env, name, threads):
    """lifecycle exec: THREADS threads in calls, the first execs alloc_mix."""
    prefix = lc_prefix(env, name, ["exec"])
    post = env.tmpfile(f"{name}-post.json")
    res = trace_cmd(env, [lifecycle(env), "exec", "-o", prefix, "-t", str(threads), "-n", "2",
                          "-s", "2M", "--", env.alloc_mix, "-t", "2", "-n", "2", "-s", "2M",
                          "-a", "alloc,hostalloc,vmm", "-F", "-o", post])
    assert res.rc == 0, res
    with open(post) as f:
        return res, lc_truth(prefix, "exec"), json.load(f)


def test_exec_inside_a_call(env):
    """A thread execs from inside cuMemAlloc_v2 (its signal handler) while 3
    others sleep in theirs: one call ended by the exec, three by the exit,
    the new image's calls all seen under the same pid, totals settled."""
    res, pre, after = run_exec(env, "lcexec", 4)
    assert after["pid"] == pre["pid"], "exec kept the pid"
    want = add_calls(pre["calls"], am_calls(after))
    assert seen_calls(res.calls) == want, (seen_calls(res.calls), want)
    assert {c["pid"] for c in res.calls} == {pre["pid"]}
    ends = sorted(c["end"] for c in res.calls if c["end"] != "returned")
    assert ends == ["execed", "exited", "exited", "exited"], ends
    for c in res.calls:
        if c["end"] == "exited":
            assert c["api"] == "cuMemAlloc_v2" and within(c["host_bytes"], 2 * MIB, 2), c
        elif c["end"] == "execed":
            assert c["api"] == "cuMemAlloc_v2" and c["host_bytes"] >= 0.98 * 2 * MIB, c
    check_consistent(res)
    t = res.totals
    assert t["dropped"] == 0 and t["unmatched_frees"] == 0 and t["unfreed"] == 0, t
    assert {o["pid"] for o in res.other if o.get("event") == "exit"} == {pre["pid"]}
    # What the first image kept is gone with it; the second freed all.
    assert t["freed_at_exit"] == pre["kept"], t


def test_exec_inside_a_call_charges_only_the_call(env):
    """The call ended by exec is charged what it took before the exec, not
    what execve frees (the old image's whole address space) nor the new
    image past its first pages."""
    res, pre, _ = run_exec(env, "lcexec1", 1)
    c = [c for c in res.calls if c["end"] == "execed"]
    assert len(c) == 1, res.calls
    # On top of the 2 MiB: the page tables under it, the uprobe's
    # single-step page, and what execve builds for the new image before
    # sched_prepare_exec, its first tracepoint (page directory, argument
    # page and its tables): 7 to 11 pages here.
    assert 2 * MIB <= c[0]["host_bytes"] <= 2 * MIB + 128 * 1024, c[0]
    assert c[0]["host_freed_bytes"] < 256 * 1024, \
        f"{c[0]['host_freed_bytes']} bytes freed charged to a cuMemAlloc_v2 (the old image " \
        f"held {pre['kept']} x 2M): {c[0]}"


def top_snapshots(text):
    """`top -b` output as a list of snapshots, each {pid: row}."""
    snaps, cur = [], None
    for line in text.splitlines():
        if line.startswith("umtrace top "):
            cur = {}
            snaps.append(cur)
            continue
        f = line.split()
        if cur is None or len(f) < 8 or not f[0].isdigit():
            continue
        cur[int(f[0])] = {"comm": f[1], "gpu_held": parse_size(f[2]),
                          "host_hold": parse_size(f[3]), "observed": parse_size(f[4]),
                          "outside": f[5], "allocs": int(f[7])}	# PyTorch's columns may follow
    return snaps


def parse_size(s):
    """fmt_bytes() back to bytes: "0B", "4.0K", "256M" (no sign: a wrapped
    negative prints as some 16E)."""
    m = re.fullmatch(r"([0-9.]+)([BKMGTPE])", s)
    assert m, f"not a size: {s!r}"
    return int(float(m.group(1)) * 1024 ** "BKMGTPE".index(m.group(2)))


def start_top(env, extra=()):
    p = env.popen([env.umtrace, "top", "-b", "-i", "200ms", "--libcuda", env.fake, *extra])
    wait_line(p.stderr, "probing", 30, "'probing' line: top did not attach")
    return p


def stop_top(p):
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    return top_snapshots(out), err


def test_exec_releases_what_the_old_image_held(env):
    """After exec the old image's GPU memory is gone (its mappings and its
    driver context went with it): the live view must not count it as held
    by the new image."""
    prefix = lc_prefix(env, "lcexec2", ["exec"])
    post = env.tmpfile("lcexec2-post.json")
    top = start_top(env)
    p = env.popen([lifecycle(env), "exec", "-o", prefix, "-t", "2", "-n", "4", "-s", "4M",
                   "--", env.alloc_mix, "-n", "1", "-s", "1M", "-a", "alloc", "-w", "2500",
                   "-o", post])
    p.wait(timeout=60)
    snaps, err = stop_top(top)
    assert p.returncode == 0, p.stderr.read()
    pid = lc_truth(prefix, "exec")["pid"]
    rows = [s[pid] for s in snaps if pid in s]
    assert rows, f"pid {pid} never in top: {err[-300:]}"
    # The new image holds 1 allocation of 1M for 2.5 s: some snapshot must
    # show exactly that, and none more than the old image ever held.
    assert any(r["allocs"] == 1 for r in rows), \
        f"pid {pid} after exec: {[(r['allocs'], r['gpu_held']) for r in rows]}"


def test_fork_child_makes_calls(env):
    """The parent forks while a second thread sleeps inside a call; parent
    and child then call at the same time. Both are traced, each call is
    charged to its own process, both exits release what each kept."""
    prefix = lc_prefix(env, "lcfork", ["parent", "child"])
    res = trace_cmd(env, [lifecycle(env), "fork", "-o", prefix, "-n", "4", "-s", "2M"])
    assert res.rc == 0, res
    parent, child = lc_truth(prefix, "parent"), lc_truth(prefix, "child")
    assert parent["pid"] != child["pid"]
    for t in (parent, child):
        mine = [c for c in res.calls if c["pid"] == t["pid"]]
        assert seen_calls(mine) == t["calls"], (t["role"], seen_calls(mine), t["calls"])
        assert {c["tid"] for c in mine} <= set(t["tids"]), t
    assert len(res.calls) == sum(parent["calls"].values()) + sum(child["calls"].values())
    for c in res.calls:
        assert c["end"] == "returned" and c["ret"] == 0, c
        if c["api"] in ("cuMemAlloc_v2", "cuMemHostAlloc"):
            assert within(c["host_bytes"], 2 * MIB, 2), c
        if c["pid"] == child["pid"] and c["event"] == "free":
            # The unmap may free a few page-table and slab pages with it,
            # and leave a few to the other CPU's LRU batch, which still
            # holds them (90 KiB once in CI): 128 KiB either way.
            assert 2 * MIB - 128 * 1024 <= c["host_freed_bytes"] <= 2 * MIB + 128 * 1024, c
    exits = sorted(o["pid"] for o in res.other if o.get("event") == "exit")
    assert exits == sorted([parent["pid"], child["pid"]]), exits
    check_consistent(res)
    t = res.totals
    assert t["unfreed"] == 0 and t["unmatched_frees"] == 0 and t["dropped"] == 0, t
    assert t["freed_at_exit"] == parent["kept"] + child["kept"], t


def test_fork_child_in_live_view(env):
    """`umtrace top -p PARENT` traces the parent's children (as trace -p
    does): a child holding GPU memory has its row."""
    sh = env.popen(["sh", "-c", f"sleep 1.5; {env.alloc_mix} -n 2 -s 1M -a alloc -w 2500 "
                    "-o /dev/null; true"])
    top = start_top(env, ["-p", str(sh.pid)])
    sh.wait(timeout=60)
    out, err = top.communicate(timeout=30)    # ends with the parent
    snaps = top_snapshots(out)
    rows = [r for s in snaps for pid, r in s.items() if pid != sh.pid]
    assert any(r["allocs"] == 2 and r["comm"] == "alloc_mix" for r in rows), \
        f"no row for the child in {len(snaps)} snapshots: {rows} {err[-300:]}"


def test_64_threads_at_once(env):
    """64 threads, each in slow calls at the same time: every call seen,
    each thread's calls its own, each charged its own pages."""
    res = env.trace([env.alloc_mix, "-t", "64", "-n", "3", "-s", "1M", "-a", "alloc,hostalloc,vmm",
                     "-F"], env={"FAKECUDA_DELAY_MS": "5"}, timeout=300)
    assert res.rc == 0, res
    want = am_calls(res.truth)
    assert seen_calls(res.calls) == want, (seen_calls(res.calls), want)
    assert {c["tid"] for c in res.calls} == set(res.truth["threads"])
    per_tid = {}
    for c in res.calls:
        per_tid[c["tid"]] = per_tid.get(c["tid"], 0) + 1
    assert set(per_tid.values()) == {3 * (2 + 2 + 6)}, per_tid
    for c in res.calls:
        if c["api"] in ("cuMemAlloc_v2", "cuMemHostAlloc", "cuMemCreate"):
            assert within(c["host_bytes"], MIB, 2), c
        elif c["api"] in ("cuMemAddressReserve", "cuMemMap"):
            assert c["host_bytes"] < 64 * 1024, c
    check_consistent(res)
    t = res.totals
    assert t["dropped"] == 0 and t["unfreed"] == 0, t


def test_address_reused_by_another_thread(env):
    """64 threads allocate and free at once; the fake (like the driver) hands
    an address one thread just freed to another. The records reach user
    space in the order the calls return, not the order the address changed
    hands, yet every free must match its own allocation."""
    res = env.trace([env.alloc_mix, "-t", "64", "-n", "20", "-s", "64K", "-a", "alloc", "-F"],
                    timeout=300)
    assert res.rc == 0, res
    assert len(res.calls) == 64 * 20 * 2 and res.totals["dropped"] == 0, res.totals
    reused = {}
    for c in res.calls_of("cuMemAlloc_v2"):
        reused[c["handle"]] = reused.get(c["handle"], 0) + 1
    if max(reused.values()) < 2:
        raise Skip("no address was reused: nothing to check")
    check_consistent(res)
    t = res.totals
    assert t["unmatched_frees"] == 0 and t["unfreed"] == 0, \
        f"{t['unmatched_frees']} frees unmatched, {t['unfreed']} unfreed: {t}"


def test_pid_reused_after_exit(env):
    """Process A exits holding allocations; B is then created with A's very
    pid (clone3 set_tid) and allocates, frees and keeps its own. A's exit
    releases A's; B's calls are B's; B's exit releases B's."""
    prefix = lc_prefix(env, "lcreuse", ["a", "b", "pidreuse"])
    res = trace_cmd(env, [lifecycle(env), "pidreuse", "-o", prefix, "-n", "4", "-s", "2M"])
    assert res.rc == 0, res
    info = lc_truth(prefix, "pidreuse")
    if not info["reused"]:
        raise Skip(f"clone3 set_tid could not give B A's pid (errno {info['errno']})")
    a, b = lc_truth(prefix, "a"), lc_truth(prefix, "b")
    pid = a["pid"]
    assert b["pid"] == pid
    lines = [json.loads(l) for l in res.stdout.splitlines() if l.startswith("{")]
    first_exit = next(i for i, o in enumerate(lines) if o["event"] == "exit")
    before = [o for o in lines[:first_exit] if o["event"] in ("alloc", "free")]
    after = [o for o in lines[first_exit:] if o["event"] in ("alloc", "free")]
    assert seen_calls(before) == a["calls"], before
    assert seen_calls(after) == b["calls"], after
    assert {c["pid"] for c in res.calls} == {pid}
    exits = [o["pid"] for o in res.other if o.get("event") == "exit"]
    assert exits == [pid, pid], exits
    check_consistent(res)
    t = res.totals
    assert t["unfreed"] == 0 and t["unmatched_frees"] == 0 and t["dropped"] == 0, t
    assert t["freed_at_exit"] == a["kept"] + b["kept"] == 4 + 8, t


def test_pid_reused_live_view(env):
    """The same in `umtrace top`: while A holds, its row shows A's; while B
    holds its allocations under A's old pid, the row shows B's, not
    nothing (A exited) and not A's (released)."""
    prefix = lc_prefix(env, "lcreuse2", ["a", "b", "pidreuse"])
    top = start_top(env)
    p = env.popen([lifecycle(env), "pidreuse", "-o", prefix, "-n", "3", "-s", "2M",
                   "-w", "2500"])
    p.wait(timeout=60)
    snaps, err = stop_top(top)
    assert p.returncode == 0, p.stderr.read()
    info = lc_truth(prefix, "pidreuse")
    if not info["reused"]:
        raise Skip(f"clone3 set_tid could not give B A's pid (errno {info['errno']})")
    rows = [s[info["b_pid"]] for s in snaps if info["b_pid"] in s]
    held = [(r["allocs"], r["gpu_held"]) for r in rows]
    # A: 3 x 2M for 2.5 s, then B: 6 x 2M for 2.5 s, never A's and B's at once.
    assert (3, 6 * MIB) in held, f"A never shown: {held} in {len(snaps)} snapshots"
    assert (6, 12 * MIB) in held, f"B (pid {info['b_pid']} reused) never shown: {held}"
    assert all(h in ((3, 6 * MIB), (6, 12 * MIB)) for h in held), held


def in_module(site, module):
    """A call site whose named caller frames are all named in module
    ("(alloc_mix)"). A frame the unwinder could not name ("[unknown 0x..]",
    "file+0x..") says nothing of stale names and is left out."""
    own = [f for f in site["stack"][1:] if "(libcuda.so.1)" not in f and "(libc.so.6)" not in f
           and f.endswith(")")]
    return bool(own) and all(f.endswith(f"({module})") for f in own)


def test_pid_reused_report_names_each_image(env):
    """`umtrace report`: A's calls are named in lifecycle's code, and those
    of B (alloc_mix under A's old pid) in alloc_mix's, not through A's
    stale mappings. Address randomization is off, so both images sit at
    the same addresses and stale names would show. A and B live on for a
    second after their calls: a process gone before its records are read
    cannot be named (README, Limits; under the sanitizers B's stack came
    out with no names at all)."""
    if not shutil.which("setarch"):
        raise Skip("setarch not installed")
    prefix = lc_prefix(env, "lcreuse3", ["a", "pidreuse"])
    p = subprocess.run([env.umtrace, "report", "--json", "--libcuda", env.fake, "--",
                        "setarch", "-R", lifecycle(env), "pidreuse", "-o", prefix, "-n", "2",
                        "-s", "1M", "-w", "1000", "--", env.alloc_mix, "-n", "3", "-s", "1M",
                        "-a", "alloc", "-w", "1000", "-o", "/dev/null"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-800:]
    info = lc_truth(prefix, "pidreuse")
    if not info["reused"]:
        raise Skip(f"clone3 set_tid could not give B A's pid (errno {info['errno']})")
    sites = [json.loads(l) for l in p.stdout.splitlines() if '"callsite"' in l]
    allocs = [s for s in sites if s["api"] == "cuMemAlloc_v2"]
    a_calls = sum(s["calls"] for s in allocs if in_module(s, "lifecycle"))
    b_calls = sum(s["calls"] for s in allocs if in_module(s, "alloc_mix"))
    assert (a_calls, b_calls) == (2, 3), [(s["calls"], s["stack"]) for s in allocs]


def test_exec_report_names_the_new_image(env):
    """`umtrace report` across exec in one pid: the new image's calls are
    named in its own code (address randomization off: the images overlap).
    The new image lives on for a second after its calls, as in
    test_pid_reused_report_names_each_image: a process gone before its
    records are read cannot be named (README, Limits; under the sanitizers
    on a busy machine its stack came out with no names at all)."""
    if not shutil.which("setarch"):
        raise Skip("setarch not installed")
    prefix = lc_prefix(env, "lcexec3", ["exec"])
    p = subprocess.run([env.umtrace, "report", "--json", "--libcuda", env.fake, "--",
                        "setarch", "-R", lifecycle(env), "exec", "-o", prefix, "-t", "1",
                        "-n", "2", "-s", "1M", "--", env.alloc_mix, "-n", "3", "-s", "1M",
                        "-a", "alloc", "-F", "-w", "1000", "-o", "/dev/null"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-800:]
    sites = [json.loads(l) for l in p.stdout.splitlines() if '"callsite"' in l]
    allocs = [s for s in sites if s["api"] == "cuMemAlloc_v2"]
    old = sum(s["calls"] for s in allocs if in_module(s, "lifecycle"))
    new = sum(s["calls"] for s in allocs if in_module(s, "alloc_mix"))
    # old image: 2 kept + 1 in flight when it exec'ed
    assert (old, new) == (3, 3), [(s["calls"], s["stack"][:4]) for s in allocs]


def test_same_pid_in_two_pid_namespaces(env):
    """Two jobs, each pid 1 of its own pid namespace, calling at once: told
    apart (by their pids on the host), each with its own calls and exit."""
    if not shutil.which("unshare"):
        raise Skip("unshare not installed")
    truths = [env.tmpfile(f"pidns{i}.json") for i in (0, 1)]
    job = " & ".join(f"unshare --pid --fork {env.alloc_mix} -t 2 -n 3 -s 1M "
                     f"-a alloc,hostalloc -k -o {t}" for t in truths)
    res = trace_cmd(env, ["sh", "-c", job + " & wait"])
    assert res.rc == 0, res
    ts = []
    for t in truths:
        with open(t) as f:
            ts.append(json.load(f))
    assert [t["pid"] for t in ts] == [1, 1], "each job is pid 1 in its namespace"
    pids = sorted({c["pid"] for c in res.calls})
    assert len(pids) == 2 and 1 not in pids, pids
    for pid in pids:
        mine = [c for c in res.calls if c["pid"] == pid]
        assert seen_calls(mine) == am_calls(ts[0]), (pid, seen_calls(mine))
    exits = sorted(o["pid"] for o in res.other if o.get("event") == "exit")
    assert exits == pids, exits
    check_consistent(res)
    t = res.totals
    assert t["unfreed"] == 0 and t["freed_at_exit"] == 2 * 2 * 3 * 2, t


def test_libcuda_unmapped_and_mapped_again(env):
    """dlopen, calls, dlclose (unmapped), dlopen again at another address:
    every call of every cycle is seen, at that cycle's address."""
    dlcycle = os.path.join(env.tests, "dlcycle")
    if not os.path.exists(dlcycle):
        raise Skip(f"{dlcycle} not built")
    truth = env.tmpfile("dlcycle.json")
    res = trace_cmd(env, [dlcycle, "-l", env.fake, "-c", "4", "-n", "3", "-s", "2M",
                          "-o", truth])
    assert res.rc == 0, res
    with open(truth) as f:
        t = json.load(f)
    assert all(c["unmapped"] for c in t["cycles"]), t["cycles"]
    assert all(c["remapped"] for c in t["cycles"][1:]), t["cycles"]
    assert seen_calls(res.calls) == t["calls"], (seen_calls(res.calls), t["calls"])
    at = {}
    for c in res.calls_of("cuMemAlloc_v2"):
        at[int(c["stack"][0], 16)] = at.get(int(c["stack"][0], 16), 0) + 1
    assert at == {c["alloc_addr"]: 3 for c in t["cycles"]}, (at, t["cycles"])
    for c in res.calls_of("cuMemHostAlloc"):
        assert within(c["host_bytes"], 2 * MIB, 2), c
    check_consistent(res)
    assert res.totals["unfreed"] == 0 and res.totals["unmatched_frees"] == 0, res.totals


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def test_rescan_finds_a_library_a_running_process_loads(env):
    """A process already running when tracing starts (as a PyTorch job
    that loads libcuda at its first CUDA call) dlopen()s libcuda later: the
    rescan finds it and its calls are seen. The rescan looks only at
    processes whose executable mappings changed (a task iterator in the
    kernel), not every process's maps: the tracer holds that iterator's link."""
    dlcycle = os.path.join(env.tests, "dlcycle")
    if not os.path.exists(dlcycle):
        raise Skip(f"{dlcycle} not built")
    truth = env.tmpfile("late.json")
    penv = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    job = env.popen([dlcycle, "-l", env.fake, "-c", "1", "-n", "3", "-s", "1M", "-d", "1500",
                     "-D", "1500", "-o", truth], env=penv)
    time.sleep(0.3)
    tr = env.popen([env.umtrace, "trace", "--json", "--rescan", "200ms"], env=penv)
    iters = 0
    deadline = time.monotonic() + 10
    while not iters and time.monotonic() < deadline:
        time.sleep(0.1)
        iters = sum("link_type:\titer" in _read(f"/proc/{tr.pid}/fdinfo/{fd}")
                    for fd in os.listdir(f"/proc/{tr.pid}/fdinfo"))
    assert iters == 1, "the rescan has no task iterator link"
    job.wait(timeout=60)
    time.sleep(0.3)
    tr.send_signal(signal.SIGINT)
    out, err = tr.communicate(timeout=60)
    res = TraceResult(tr.returncode, out, err)
    assert res.rc == 0, res
    assert f"probing 26 entry points in /proc/{job.pid}/root" in err, err[-1500:]
    with open(truth) as f:
        t = json.load(f)
    mine = [c for c in res.calls if c["pid"] == job.pid]
    assert seen_calls(mine) == t["calls"], (seen_calls(mine), t["calls"])


def test_two_containers_two_libcudas(env):
    """Two "containers" (mount namespaces), each mapping its own copy of
    libcuda.so.1: one at the very path the host's fake has, one at a path
    that exists only inside. Found through /proc/PID/maps and
    /proc/PID/root by the rescan, both probed, both jobs' calls seen."""
    if not shutil.which("unshare"):
        raise Skip("unshare not installed")
    base = env.tmpfile("ctr")
    shutil.rmtree(base, ignore_errors=True)
    libs = [os.path.join(base, d, "libcuda.so.1") for d in ("a", "b")]
    for lib in libs:
        os.makedirs(os.path.dirname(lib))
        shutil.copy(env.fake, lib)
    inside = os.path.join(base, "mnt")	# empty on the host
    os.makedirs(inside)
    truths = [env.tmpfile(f"ctr{i}.json") for i in (0, 1)]
    job = [env.alloc_mix, "-d", "2500", "-n", "3", "-s", "1M", "-a", "alloc,hostalloc", "-F"]
    penv = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    tr = env.popen([env.umtrace, "trace", "--json", "--rescan", "200ms"], env=penv)
    time.sleep(1.0)
    ctr_a = env.popen(["unshare", "-m", "--propagation", "private", "sh", "-c",
                       f"mount --bind {libs[0]} {env.fake} && exec {' '.join(job)} -o {truths[0]}"],
                      env=penv)
    ctr_b = env.popen(["unshare", "-m", "--propagation", "private", "sh", "-c",
                       f"mount --bind {os.path.dirname(libs[1])} {inside} && "
                       f"LD_LIBRARY_PATH={inside} exec {' '.join(job)} -o {truths[1]}"],
                      env=penv)
    for c in (ctr_a, ctr_b):
        c.wait(timeout=60)
        assert c.returncode == 0, c.stderr.read()
    tr.send_signal(signal.SIGINT)
    out, err = tr.communicate(timeout=60)
    res = TraceResult(tr.returncode, out, err)
    assert res.rc == 0, res
    want = [f"/proc/{ctr_a.pid}/root{env.fake}", f"/proc/{ctr_b.pid}/root{inside}/libcuda.so.1"]
    for w in want:
        assert f"probing 26 entry points in {w}" in err, f"{w} not probed:\n{err[-1500:]}"
    for c, t in zip((ctr_a, ctr_b), truths):
        with open(t) as f:
            truth = json.load(f)
        assert truth["pid"] == c.pid
        mine = [x for x in res.calls if x["pid"] == c.pid]
        assert seen_calls(mine) == am_calls(truth), (c.pid, seen_calls(mine))


def test_ring_buffer_full_burst(env):
    """A 4K ring buffer under a burst from 8 threads, traced, reported and
    watched live at once: every call is seen or counted lost, the loss is
    reported, and no figure goes negative or runs away (a lost free leaves
    an allocation unfreed, a lost allocation an unmatched free; neither may
    drive a count below zero)."""
    truth = env.tmpfile("burst.json")
    job = env.popen([env.alloc_mix, "-d", "3000", "-t", "8", "-n", "1500", "-s", "4K",
                     "-a", "alloc,hostalloc", "-o", truth])
    small = ["--ringbuf-size", "4K", "-p", str(job.pid)]
    tr = env.popen([env.umtrace, "trace", "--json", "--libcuda", env.fake, *small])
    rp = env.popen([env.umtrace, "report", "--json", "--stack", "fp", "--libcuda", env.fake,
                    *small])
    top = env.popen([env.umtrace, "top", "-b", "-i", "100ms", "--libcuda", env.fake, *small])
    job.wait(timeout=240)
    assert job.returncode == 0, job.stderr.read()
    out, err = tr.communicate(timeout=120)
    res = TraceResult(tr.returncode, out, err)
    rout, rerr = rp.communicate(timeout=120)
    tout, terr = top.communicate(timeout=120)
    assert res.rc == 0 and rp.returncode == 0 and top.returncode == 0, (res, rerr, terr)
    with open(truth) as f:
        made = sum(am_calls(json.load(f)).values())
    assert made == 8 * 1500 * 4
    t = res.totals
    exit_seen = any(o.get("event") == "exit" for o in res.other)
    # Every record the kernel made: the calls, and the process's exit.
    assert len(res.calls) + t["dropped"] == made + (0 if exit_seen else 1), (len(res.calls), t)
    if t["dropped"] == 0:
        raise Skip("no drops with a 4K ring buffer: this host keeps up")
    assert "records lost" in err, err[-400:]
    check_consistent(res)
    # A free is unmatched only when its allocation's record was lost.
    assert t["unmatched_frees"] <= t["dropped"], t
    if exit_seen:
        assert t["unfreed"] == 0, t
    allocs_made = made // 2
    for snap in top_snapshots(tout):
        row = snap.get(job.pid)
        if not row:
            continue
        assert row["allocs"] <= allocs_made, row
        for k in ("gpu_held", "host_hold", "observed"):
            assert row[k] <= allocs_made * 4096 * 1.05, (k, row)
    assert "records lost" in terr or "lost" in terr, terr[-300:]
    rtot = [json.loads(l) for l in rout.splitlines() if '"totals"' in l][0]
    sites = [json.loads(l) for l in rout.splitlines() if '"callsite"' in l]
    assert rtot["records"] == sum(s["calls"] for s in sites), rtot
    assert rtot["records"] + rtot["dropped"] >= made, rtot
    for s in sites:
        assert 0 <= s["held"] <= s["calls"] and s["held_host_bytes"] < BIG, s
        assert s["held_host_bytes"] <= s["host_bytes"], s
