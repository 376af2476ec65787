# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""umtrace trace against the fake libcuda: every call seen, host pages
charged to the right call, frees credited, exits and drops accounted."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from harness import Skip, find_stub_libcuda, maps_say, wait_line

MIB = 1 << 20
# Entry points that take their whole size in host pages inside the call.
POPULATING = {
    "cuMemAlloc_v2", "cuMemAlloc", "cuMemAllocPitch_v2", "cuMemAllocPitch",
    "cuMemAllocHost_v2", "cuMemAllocHost", "cuMemHostAlloc",
    "cuMemAllocAsync", "cuMemAllocAsync_ptsz", "cuMemAllocFromPoolAsync",
    "cuMemAllocFromPoolAsync_ptsz", "cuMemCreate",
}
# What the workload calls that umtrace does not probe.
UNPROBED = {"cuInit", "cuMemSetAccess"}


def within(value, want, pct):
    return abs(value - want) <= want * pct / 100.0


def expected_calls(truth):
    return {api: c["calls"] for api, c in truth["calls"].items() if api not in UNPROBED}


def seen_calls(res):
    seen = {}
    for c in res.calls:
        seen[c["api"]] = seen.get(c["api"], 0) + 1
    return seen


def test_every_call_seen(env):
    """All 26 entry points, 4 threads: the trace's count equals the workload's."""
    res = env.trace([env.alloc_mix, "-t", "4", "-n", "5", "-s", "2M", "-a", "all", "-F"])
    assert res.rc == 0, res
    assert res.truth, "workload wrote no ground truth"
    want, got = expected_calls(res.truth), seen_calls(res)
    assert got == want, f"calls differ: traced {got}, made {want}"
    assert len(want) == 26, f"workload exercised {len(want)} entry points"
    assert res.totals["dropped"] == 0, res.totals
    assert res.totals["records"] == len(res.calls)
    assert all(c["pid"] == res.truth["pid"] for c in res.calls)
    assert {c["tid"] for c in res.calls} == set(res.truth["threads"])


def test_classic_uprobes(env):
    """Kernels before 6.6 get one perf-event uprobe per entry point."""
    res = env.trace([env.alloc_mix, "-t", "2", "-n", "2", "-s", "2M", "-a", "all", "-F"],
                    env={"UMTRACE_NO_UPROBE_MULTI": "1"})
    assert res.rc == 0, res
    assert seen_calls(res) == expected_calls(res.truth)
    for c in res.calls_of("cuMemHostAlloc"):
        assert within(c["host_bytes"], 2 * MIB, 2), c


def test_host_bytes_per_call(env):
    """Each populating call is charged its own size in host pages, within 2%."""
    size = 8 * MIB
    apis = "alloc,pitch,host,hostalloc,async,pool,vmm"
    res = env.trace([env.alloc_mix, "-t", "2", "-n", "3", "-s", "8M", "-a", apis, "-F"])
    assert res.rc == 0, res
    checked = 0
    for c in res.calls:
        if c["api"] not in POPULATING:
            continue
        assert c["ret"] == 0, c
        assert within(c["host_bytes"], size, 2), \
            f"{c['api']} tid {c['tid']}: {c['host_bytes']} host bytes for {size}"
        checked += 1
    assert checked == 2 * 3 * 7, f"checked {checked} calls"
    total = sum(c["host_bytes"] for c in res.calls if c["event"] == "alloc")
    assert within(total, res.truth["populated_bytes"], 2), \
        f"traced {total}, fake populated {res.truth['populated_bytes']}"


def test_threads_do_not_mix(env):
    """8 threads allocating at once: no call is charged another's pages."""
    res = env.trace([env.alloc_mix, "-t", "8", "-n", "4", "-s", "4M", "-a", "alloc,hostalloc"])
    assert res.rc == 0, res
    allocs = [c for c in res.calls if c["event"] == "alloc"]
    assert len(allocs) == 8 * 4 * 2
    assert len({c["tid"] for c in allocs}) == 8
    for c in allocs:
        assert within(c["host_bytes"], 4 * MIB, 2), c
    per_tid = {}
    for c in allocs:
        per_tid[c["tid"]] = per_tid.get(c["tid"], 0) + c["host_bytes"]
    for tid, b in per_tid.items():
        assert within(b, 8 * 4 * MIB, 2), f"tid {tid}: {b}"


# Freshly faulted pages can sit in the kernel's per-CPU LRU batches (up to
# about 31 per CPU) holding a reference when their mapping goes: those few
# are freed later, outside the free call. Sizes here keep that under 2%.
def test_frees_credited(env):
    """Frees give the pages back inside the call; the table ends empty."""
    res = env.trace([env.alloc_mix, "-t", "2", "-n", "3", "-s", "16M",
                     "-a", "alloc,host,hostalloc,async,pool", "-F"])
    assert res.rc == 0, res
    frees = [c for c in res.calls if c["event"] == "free"]
    assert len(frees) == 2 * 3 * 5
    # 560 KiB more was freed once, under the sanitizer pass, and blamed on
    # LRU batches one thread's unmap leaves to the other's; it fits the
    # softirq frees since left out (test_softirq_frees_are_not_the_calls)
    # better. The bound stays at a few batches either way.
    for c in frees:
        assert c["ret"] == 0, c
        assert abs(c["host_freed_bytes"] - 16 * MIB) <= 768 * 1024, c
    assert res.totals["unfreed"] == 0, res.totals
    assert res.totals["unmatched_frees"] == 0, res.totals
    for row in res.summary:
        assert row["unfreed"] == 0, row


# Maps 64 MiB, touches it every 2 MiB (a page table each) and unmaps it, on
# CPU 0, for ARGV[1] seconds; prints how many rounds. The page tables go back
# to the kernel from an RCU callback, in a softirq on whatever runs there.
CHURN_PAGE_TABLES = r"""
import mmap, os, sys, time
os.sched_setaffinity(0, {0})
end = time.monotonic() + float(sys.argv[1])
n = 0
while time.monotonic() < end:
    m = mmap.mmap(-1, 64 << 20)
    for off in range(0, 64 << 20, 2 << 20):
        m[off] = 1
    m.close()
    n += 1
print(n)
"""


def test_softirq_frees_are_not_the_calls(env):
    """Three 1 s calls spin on CPU 0 while another process there frees page
    tables non-stop: the softirqs that free them run on top of the spinning
    thread, and none of those pages are the call's. (Before softirqs were
    left out, each call here was charged 4 to 6 MiB freed; now 0 to 24
    KiB.)"""
    churn = subprocess.Popen([sys.executable, "-c", CHURN_PAGE_TABLES, "5"],
                             stdout=subprocess.PIPE, text=True)
    try:
        res = env.trace(["taskset", "-c", "0", env.alloc_mix, "-t", "1", "-n", "3",
                         "-s", "2M", "-a", "alloc"], env={"FAKECUDA_SPIN_MS": "1000"})
    finally:
        rounds = int(churn.communicate(timeout=60)[0])
    assert res.rc == 0, res
    assert rounds >= 100, f"the churner ran {rounds} rounds: no page tables to free"
    calls = res.calls_of("cuMemAlloc_v2")
    assert len(calls) == 3, res.calls
    for c in calls:
        assert c["duration_ns"] >= 1e9, c
        assert within(c["host_bytes"], 2 * MIB, 2), c
        # Left: a hard interrupt's frees on the spinning thread, or the
        # thread's own LRU batch; up to 6 pages seen under a CPU hog.
        assert c["host_freed_bytes"] <= 64 * 1024, c


def test_vmm_create_map_release(env):
    """VMM: cuMemCreate holds the pages, the release credits them."""
    res = env.trace([env.alloc_mix, "-t", "1", "-n", "4", "-s", "16M", "-a", "vmm", "-F"])
    assert res.rc == 0, res
    by_api = {a: res.calls_of(a) for a in ("cuMemAddressReserve", "cuMemCreate", "cuMemMap",
                                          "cuMemUnmap", "cuMemRelease", "cuMemAddressFree")}
    for api, calls in by_api.items():
        assert len(calls) == 4, f"{api}: {len(calls)}"
    for c in by_api["cuMemCreate"]:
        assert within(c["host_bytes"], 16 * MIB, 2), c
    for c in by_api["cuMemAddressReserve"] + by_api["cuMemMap"]:
        assert c["host_bytes"] < 64 * 1024, c
    # Unmap before release: the pages go when the last reference does.
    freed = sum(c["host_freed_bytes"] for c in by_api["cuMemRelease"] + by_api["cuMemUnmap"])
    assert within(freed, 4 * 16 * MIB, 2), freed
    maps = by_api["cuMemMap"]
    creates = {c["handle"] for c in by_api["cuMemCreate"]}
    assert {c["aux"] for c in maps} == creates, "cuMemMap's physical handle not recorded"
    assert res.totals["unfreed"] == 0, res.totals


def test_nested_calls_charged_once(env):
    """cuMemAllocFromPoolAsync calls cuMemAllocAsync: one record, one charge."""
    res = env.trace([env.alloc_mix, "-t", "2", "-n", "5", "-s", "4M", "-a", "pool,pool_ptsz"])
    assert res.rc == 0, res
    assert res.truth["fake"]["calls"]["cuMemAllocAsync"]["calls"] == 20, "fake did not nest"
    assert not res.calls_of("cuMemAllocAsync"), "inner call reported"
    pools = res.calls_of("cuMemAllocFromPoolAsync") + res.calls_of("cuMemAllocFromPoolAsync_ptsz")
    assert len(pools) == 20
    for c in pools:
        assert within(c["host_bytes"], 4 * MIB, 2), c


def test_managed_pages_outside_the_call(env):
    """Managed memory takes nothing at the call; pages come on first touch."""
    res = env.trace([env.alloc_mix, "-t", "1", "-n", "3", "-s", "32M", "-a", "managed", "-F"])
    assert res.rc == 0, res
    calls = res.calls_of("cuMemAllocManaged")
    assert len(calls) == 3
    for c in calls:
        assert c["host_bytes"] < 64 * 1024, c
    frees = res.calls_of("cuMemFree_v2")
    assert len(frees) == 3
    for c in frees:    # half was touched (see test_frees_credited on the 2%)
        assert within(c["host_freed_bytes"], 16 * MIB, 2), c


def test_managed_first_touch_charged_back(env):
    """Pages CPU faults bring into managed memory after the call are charged
    back to the allocation that owns the address (x86: page_fault_user):
    at least 95% of the half the workload touches, and nothing more."""
    import platform
    if platform.machine() != "x86_64":
        raise Skip("only x86 has a tracepoint with the fault address")
    res = env.trace([env.alloc_mix, "-t", "2", "-n", "3", "-s", "32M", "-a", "managed", "-F"],
                    extra=["--managed-faults"])
    assert res.rc == 0, res
    assert res.truth["managed_touched_bytes"] == 2 * 3 * 16 * MIB, res.truth
    frees = res.calls_of("cuMemFree_v2")
    assert len(frees) == 6
    for c in frees:
        assert 0.95 * 16 * MIB <= c["faulted_bytes"] <= 1.02 * 16 * MIB, c
    # Other allocations know nothing of faults.
    res = env.trace([env.alloc_mix, "-n", "2", "-s", "8M", "-a", "alloc", "-F"],
                    extra=["--managed-faults"])
    assert all(c["faulted_bytes"] == 0 for c in res.calls), res.calls
    # Without the option the fault hook is not attached: nothing is charged.
    res = env.trace([env.alloc_mix, "-n", "1", "-s", "8M", "-a", "managed", "-F"])
    assert all(c["faulted_bytes"] == 0 for c in res.calls), res.calls


def test_device_nodes_are_not_host_memory(env):
    """Pages on a NUMA node named by --device-nodes (GH200's HBM) are the
    call's device-node bytes and never its host bytes. This VM has one
    node, so naming node 0 turns every page into a device-node page: the
    node number read from each page's flags must be 0 for all of them."""
    for nodes, host_share in (["0", 0.0], ["none", 1.0]):
        res = env.trace([env.alloc_mix, "-n", "3", "-s", "8M", "-a", "alloc", "-F"],
                        extra=["--device-nodes", nodes])
        assert res.rc == 0, res
        calls = res.calls_of("cuMemAlloc_v2")
        assert len(calls) == 3, res
        for c in calls:
            total = c["host_bytes"] + c["device_node_bytes"]
            assert within(total, 8 * MIB, 2), c
            assert c["host_bytes"] == int(total * host_share), c
        said = "1 NUMA node(s) are not host RAM (0)" in res.stderr
        assert said == (nodes == "0"), res.stderr


def test_exit_releases_everything(env):
    """Allocations never freed are released when their process exits."""
    res = env.trace([env.alloc_mix, "-t", "2", "-n", "3", "-s", "4M",
                     "-a", "alloc,hostalloc,vmm,managed", "-k"])
    assert res.rc == 0, res
    allocs = [c for c in res.calls if c["event"] == "alloc"]
    assert not [c for c in res.calls if c["event"] == "free"], "-k frees nothing"
    exits = [o for o in res.other if o.get("event") == "exit"]
    assert [e["pid"] for e in exits] == [res.truth["pid"]], exits
    t = res.totals
    assert t["unfreed"] == 0 and t["freed_at_exit"] == len(allocs), t
    held = sum(c["host_bytes"] for c in allocs)
    assert t["freed_at_exit_host_bytes"] == held, (t, held)
    assert within(held, 2 * 3 * 3 * 4 * MIB, 2), held


def test_exit_inside_a_call(env):
    """The process exits while a thread is inside cuMemAlloc_v2: accounted."""
    res = env.trace([env.alloc_mix, "-t", "1", "-n", "1", "-s", "16M", "-a", "alloc", "-x"])
    assert res.rc == 0, res
    inflight = res.truth["inflight"]
    assert inflight, res.truth
    died = [c for c in res.calls if c["end"] == "exited"]
    assert len(died) == 1, [c for c in res.calls if c["end"] != "returned"]
    c = died[0]
    assert c["tid"] == inflight["tid"] and c["api"] == "cuMemAlloc_v2", c
    assert within(c["host_bytes"], 16 * MIB, 2), c
    row = [r for r in res.summary if r["api"] == "cuMemAlloc_v2"][0]
    assert row["died_in_call"] == 1, row


def test_ring_buffer_drops_counted(env):
    """A ring buffer too small to keep up: every call is either printed or
    counted as lost, and the loss is reported."""
    res = env.trace([env.alloc_mix, "-t", "8", "-n", "3000", "-s", "4K", "-a", "alloc", "-F"],
                    extra=["--ringbuf-size", "4K"], timeout=300)
    assert res.rc == 0, res
    made = sum(expected_calls(res.truth).values())
    assert made == 8 * 3000 * 2
    dropped = res.totals["dropped"]
    assert dropped > 0, "no drops with a 4K ring buffer: the test proves nothing"
    assert len(res.calls) + dropped == made, f"{len(res.calls)} seen + {dropped} dropped != {made}"
    assert "lost" in res.stderr, res.stderr[-300:]


def test_command_exit_status(env):
    """trace -- COMMAND exits with COMMAND's status."""
    p = subprocess.run([env.umtrace, "trace", "--libcuda", env.fake, "--", "sh", "-c", "exit 7"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 7, (p.returncode, p.stderr)
    p = subprocess.run([env.umtrace, "trace", "--libcuda", env.fake, "--", "/nonexistent/prog"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 127, (p.returncode, p.stderr)
    assert "cannot run" in p.stderr


def test_children_traced(env):
    """A COMMAND's children are traced; their pid differs from the shell's."""
    truth = env.tmpfile("child.json")
    res = env.trace(["sh", "-c", f"{env.alloc_mix} -t 2 -n 3 -s 1M -a alloc -F -o {truth}; true"],
                    truth=False)
    assert res.rc == 0, res
    import json
    with open(truth) as f:
        t = json.load(f)
    assert len(res.calls) == 12, res
    assert {c["pid"] for c in res.calls} == {t["pid"]}


def test_pid_filter(env):
    """-p PID traces that process and not another one running beside it."""
    a = env.popen([env.alloc_mix, "-d", "1500", "-t", "1", "-n", "4", "-s", "1M", "-a", "alloc", "-F"])
    b = env.popen([env.alloc_mix, "-d", "1500", "-t", "1", "-n", "4", "-s", "1M", "-a", "alloc", "-F"])
    tr = env.popen([env.umtrace, "trace", "--json", "--libcuda", env.fake, "-p", str(a.pid)])
    out, err = tr.communicate(timeout=60)    # ends when pid a exits
    a.wait(timeout=30)
    b.wait(timeout=30)
    from harness import TraceResult
    res = TraceResult(tr.returncode, out, err)
    assert res.rc == 0, res
    assert len(res.calls) == 8, res
    assert {c["pid"] for c in res.calls} == {a.pid}


def test_text_output_and_summary(env):
    """The text form: a header, one line per call, a summary."""
    p = subprocess.run([env.umtrace, "trace", "--libcuda", env.fake, "--", env.alloc_mix,
                        "-n", "2", "-s", "2M", "-a", "hostalloc", "-o", "/dev/null"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split()[:5] == ["TIME", "PID", "TID", "COMM", "API"], lines[0]
    assert sum(1 for l in lines if " cuMemHostAlloc " in l and "2.0M" in l) >= 2, p.stdout
    assert any(l.startswith("PID") and "UNFREED" in l for l in lines), p.stdout
    assert "4 GPU calls traced, 0 records lost" in p.stdout, p.stdout


def test_demo(env):
    """make demo: the shipped demo runs and shows every kind of call."""
    p = subprocess.run([env.umtrace, "trace", "--json", "--libcuda", env.fake, "--", env.demo],
                       capture_output=True, text=True, timeout=120)
    from harness import TraceResult
    res = TraceResult(p.returncode, p.stdout, p.stderr)
    assert res.rc == 0, res
    apis = {c["api"] for c in res.calls}
    for api in ("cuMemAlloc_v2", "cuMemHostAlloc", "cuMemCreate", "cuMemMap",
                "cuMemAllocAsync", "cuMemFreeAsync"):
        assert api in apis, f"{api} missing from {apis}"
    # The demo leaks on purpose; its exit releases the leak.
    assert res.totals["unfreed"] == 0, res.totals
    assert res.totals["freed_at_exit"] > 0, res.totals
    assert res.totals["exits"] == 1, res.totals


def test_stack_recorded(env):
    """The user stack: the entry point first, then its direct caller (whose
    return address the kernel's frame-pointer walk would skip), then more."""
    res = env.trace([env.alloc_mix, "-n", "1", "-s", "1M", "-a", "alloc"])
    assert res.rc == 0, res
    c = res.calls_of("cuMemAlloc_v2")[0]
    stack = [int(a, 16) for a in c["stack"]]
    addrs = res.truth["addrs"]
    assert len(stack) >= 4, c
    assert stack[0] == addrs["cuMemAlloc_v2"], (hex(stack[0]), hex(addrs["cuMemAlloc_v2"]))
    assert 0 < stack[1] - addrs["am_alloc_dev"] < 512, \
        f"caller frame {stack[1]:#x} not in am_alloc_dev at {addrs['am_alloc_dev']:#x}"
    # Newer kernels put the caller in the walk themselves: never twice.
    assert not 0 < stack[2] - addrs["am_alloc_dev"] < 512, f"caller twice: {c['stack'][:4]}"


def test_toolkit_stub_resolves(env):
    """NVIDIA's own stub libcuda.so: every probed symbol is found and attached."""
    stub = find_stub_libcuda()
    if not stub:
        raise Skip("no CUDA toolkit stub libcuda.so installed")
    p = subprocess.Popen([env.umtrace, "trace", "--libcuda", stub, "-v"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line, _ = wait_line(p.stderr, "probing", 30)
    finally:
        p.terminate()
    out, err = p.communicate(timeout=30)
    assert f"probing 26 entry points in {stub}" in line, line + err
    assert p.returncode == 0, err


def test_no_libcuda_counts_process_pages(env):
    """With no libcuda anywhere, host pages are still counted per process."""
    envv = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    p = subprocess.run([env.umtrace, "trace", "--json", "--rescan", "0", "--",
                        "python3", "-c", "b = bytearray(64 << 20); b[::4096] = b'x' * len(b[::4096])"],
                       capture_output=True, text=True, timeout=120, env=envv)
    if "probing" in p.stderr:
        raise Skip("a libcuda is installed on this machine")
    assert p.returncode == 0, p.stderr
    assert "no libcuda found" in p.stderr
    import json
    rows = [json.loads(l) for l in p.stdout.splitlines() if '"host_pages_summary"' in l]
    py = [r for r in rows if r["comm"].startswith("python")]
    assert py and max(r["host_bytes"] for r in py) >= 64 << 20, rows


def test_discovery_ld_library_path(env):
    """Without --libcuda: a libcuda.so.1 in LD_LIBRARY_PATH is found."""
    truth = env.tmpfile("ldpath.json")
    p = subprocess.run([env.umtrace, "trace", "--json", "--rescan", "0", "--", env.alloc_mix,
                        "-n", "2", "-s", "1M", "-a", "alloc", "-F", "-o", truth],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, LD_LIBRARY_PATH=env.tests))
    assert p.returncode == 0, p.stderr
    assert f"probing 26 entry points in {env.tests}/libcuda.so.1" in p.stderr, p.stderr
    from harness import TraceResult
    assert len(TraceResult(0, p.stdout, p.stderr).calls) == 4


def test_discovery_rescan_finds_running_process(env):
    """A libcuda that appears later, mapped by a running process, is found by
    the rescan through /proc/PID/root and probed while the job runs."""
    envv = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    tr = env.popen([env.umtrace, "trace", "--json", "--rescan", "200ms"], env=envv)
    job = env.popen([env.alloc_mix, "-d", "2500", "-n", "3", "-s", "1M", "-a", "alloc", "-F",
                     "-o", env.tmpfile("rescan.json")])
    job.wait(timeout=60)
    import signal
    tr.send_signal(signal.SIGINT)
    out, err = tr.communicate(timeout=60)
    from harness import TraceResult
    res = TraceResult(tr.returncode, out, err)
    assert res.rc == 0, res
    assert f"/proc/{job.pid}/root" in err and "probing 26 entry points" in err, err
    mine = [c for c in res.calls if c["pid"] == job.pid]
    assert len(mine) == 6, res


def test_discovery_library_replaced_on_disk(env):
    """A job whose libcuda was replaced on disk after it mapped it (a driver
    upgrade: its maps say "(deleted)", and no path leads to the inode it
    runs) is probed all the same, through /proc/PID/map_files/: every call
    it makes is seen. The job is held stopped in its start-up delay until
    the probes are in, so no call can come before them."""
    d = env.tmpfile("replaced")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    lib = os.path.join(d, "libcuda.so.1")
    shutil.copy(env.fake, lib)
    envv = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    job = env.popen([env.alloc_mix, "-d", "1000", "-n", "3", "-s", "1M", "-a", "alloc", "-F",
                     "-o", env.tmpfile("replaced.json")], env={**envv, "LD_LIBRARY_PATH": d})
    maps_say(job.pid, lib)
    job.send_signal(signal.SIGSTOP)
    shutil.copy(env.fake, lib + ".new")
    os.rename(lib + ".new", lib)	# as an upgrade does: the old inode lives on, unnamed
    maps_say(job.pid, lib + " (deleted)")
    errf = env.tmpfile("replaced-trace.err")
    with open(errf, "w") as ef:
        tr = subprocess.Popen([env.umtrace, "trace", "-v", "--json", "--rescan", "0", "-p",
                               str(job.pid)], stdout=subprocess.PIPE, stderr=ef, text=True,
                              env=envv)
    env._procs.append(tr)
    want = f"probing 26 entry points in {lib} (deleted, run by pid {job.pid})"
    deadline = time.monotonic() + 60
    # Probes in, then the capabilities dropped: the tracer is running.
    while want not in open(errf).read() or "capabilities dropped" not in open(errf).read():
        assert tr.poll() is None and time.monotonic() < deadline, open(errf).read()[-1500:]
        time.sleep(0.02)
    job.send_signal(signal.SIGCONT)
    job.wait(timeout=60)
    assert job.returncode == 0, job.stderr.read()
    out, _ = tr.communicate(timeout=60)
    err = open(errf).read()
    assert tr.returncode == 0, err[-800:]
    from harness import TraceResult
    mine = [c for c in TraceResult(0, out, err).calls if c["pid"] == job.pid]
    assert len(mine) == 6, (mine, err[-1500:])


def root_of_its_own(env, name, files):
    """A root directory with copies of files (at their base names) and of
    what ldd says they need (at the same paths): to the loader and to
    libcuda, a container's, its files never seen by umtrace."""
    root = env.tmpfile(name)
    shutil.rmtree(root, ignore_errors=True)
    deps = set()
    for f in files:
        shutil.copy(f, os.path.join(root if os.path.isdir(root) else os.makedirs(root) or root,
                                    os.path.basename(f)))
        out = subprocess.run(["ldd", f], capture_output=True, text=True, timeout=30).stdout
        deps.update(re.findall(r"(/\S+) \(0x", out))
    for d in deps:
        dst = root + d
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copy(os.path.realpath(d), dst)
    return root


def test_discovery_when_the_loader_maps_it(env):
    """A job under a root directory of its own (its own loader and its own
    copy of libcuda: no probe on the host's files fires) dlopens libcuda,
    with no rescan due for a minute: the first exec under that root names
    its loader, the loader's debugger hook names the dlopen, and the copy
    is probed before the job's first call 100 ms later (creating a CUDA
    context takes longer). -v says how long it took."""
    if not shutil.which("chroot") or not shutil.which("ldd"):
        raise Skip("chroot or ldd not installed")
    root = root_of_its_own(env, "ctr-root", [os.path.join(env.tests, "dlcycle"), env.fake])
    errf = env.tmpfile("loader-trace.err")
    envv = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    with open(errf, "w") as ef:
        # -v goes to a file: libbpf's log would fill a pipe nobody reads.
        tr = subprocess.Popen([env.umtrace, "trace", "-v", "--json", "--rescan", "60s"],
                              stdout=subprocess.PIPE, stderr=ef, text=True, env=envv)
    env._procs.append(tr)
    deadline = time.monotonic() + 30
    while "watching the dynamic loader" not in open(errf).read():
        assert tr.poll() is None and time.monotonic() < deadline, open(errf).read()[-800:]
        time.sleep(0.02)
    job = env.popen(["chroot", root, "/dlcycle", "-l", "/libcuda.so.1", "-c", "2", "-n", "3",
                     "-d", "100", "-D", "100", "-o", "/truth.json"], env=envv)
    job.wait(timeout=60)
    assert job.returncode == 0, job.stderr.read()
    tr.send_signal(signal.SIGINT)
    out, _ = tr.communicate(timeout=60)
    err = open(errf).read()
    assert tr.returncode == 0, err[-800:]
    # Seen from here, a chroot's files are under its directory.
    assert f"probing 26 entry points in {root}/libcuda.so.1" in err, err[-1500:]
    took = re.findall(r"pid %d mapped a library to probe: probed ([\d.]+) ms" % job.pid, err)
    print(f"    probed {', '.join(took)} ms after the kernel said so")
    with open(os.path.join(root, "truth.json")) as f:
        made = json.load(f)["calls"]
    seen = {}
    for line in out.splitlines():
        c = json.loads(line) if line.startswith("{") else {}
        if c.get("pid") == job.pid and "api" in c and "ts_ns" in c:
            seen[c["api"]] = seen.get(c["api"], 0) + 1
    assert seen == made, (seen, made)


def test_driver_pool_reuse_is_observed_as_zero(env):
    """Driver 590+ pools: a free keeps the pages, the next allocation of that
    size reuses them with no page-allocator event. The observed figure says
    so honestly (the cost model, not the window, accounts for it)."""
    res = env.trace([env.alloc_mix, "-n", "4", "-s", "16M", "-a", "alloc", "-F"],
                    env={"FAKECUDA_POOL": "1"})
    assert res.rc == 0, res
    assert res.truth["pool"] and res.truth["pool_stats"]["hits"] == 3, res.truth["pool_stats"]
    allocs = res.calls_of("cuMemAlloc_v2")
    assert within(allocs[0]["host_bytes"], 16 * MIB, 2), allocs[0]
    for c in allocs[1:]:
        assert c["host_bytes"] < 64 * 1024, c
    for c in res.calls_of("cuMemFree_v2"):
        assert c["host_freed_bytes"] < 64 * 1024, c


def test_compaction_in_a_call_is_not_its_free(env):
    """Compaction in the calling thread, inside cuMemAlloc_v2, frees the
    pages it migrates (other processes' as well as the call's own) in that
    thread; their copies come from free pages it isolated, with no page
    allocation. None of it is the call's HOST-. The workload drives
    compact_zone() from a signal handler inside the call (a host with free
    2 MiB blocks never compacts for an allocation). Before the fix the call
    showed from 1.6 to 107 MiB freed here, about what was migrated; a run
    counts when the compaction moved at least 2 MiB, and it is tried up to
    5 times for one that did."""
    if not os.access("/proc/sys/vm/compact_memory", os.W_OK):
        raise Skip("no /proc/sys/vm/compact_memory (CONFIG_COMPACTION off)")
    workload = os.path.join(env.tests, "compact_call")
    tried = []
    for _ in range(5):
        res = env.trace([workload, "-s", "32M"])
        assert res.rc == 0, res
        t = res.truth
        assert t and t["handler_in_call"] and t["handler_errno"] == 0, t
        (alloc,) = res.calls_of("cuMemAlloc_v2")
        assert within(alloc["host_bytes"], 32 * MIB, 2), alloc
        assert alloc["duration_ns"] >= t["handler_ms"] * 1e6, (alloc, t)
        assert alloc["host_freed_bytes"] <= 256 * 1024, \
            f"{alloc['host_freed_bytes']} bytes freed in the call, " \
            f"{t['migrated_pages']} pages migrated inside it"
        (free,) = res.calls_of("cuMemFree_v2")
        assert abs(free["host_freed_bytes"] - 32 * MIB) <= 768 * 1024, free
        tried.append(t["migrated_pages"])
        if t["migrated_pages"] * t["page_size"] >= 2 * MIB:
            return
    raise Skip(f"compaction moved too little to tell (pages per run: {tried})")
