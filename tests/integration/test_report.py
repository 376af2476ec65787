# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""umtrace report: call sites by symbolized stack, ranked by host memory."""
import json
import subprocess

MIB = 1 << 20


def run_report(env, extra, workload, timeout=120):
    p = subprocess.run([env.umtrace, "report", "--json", "--libcuda", env.fake, *extra, "--",
                        *workload], capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stderr
    objs = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    sites = [o for o in objs if o["event"] == "callsite"]
    totals = [o for o in objs if o["event"] == "totals"][0]
    return sites, totals


def frames(site):
    return [f.split("+")[0] for f in site["stack"]]


def test_report_call_sites(env):
    """Same stack from two threads is one site; sites name the caller;
    ranked by host bytes; every call lands in exactly one site."""
    sites, totals = run_report(env, [], [env.alloc_mix, "-t", "2", "-n", "3", "-s", "4M",
                                         "-a", "alloc,hostalloc,vmm", "-F", "-o", "/dev/null"])
    by_api = {}
    for s in sites:
        by_api.setdefault(s["api"], []).append(s)
    dev = by_api["cuMemAlloc_v2"]
    assert len(dev) == 1 and dev[0]["calls"] == 6, dev
    assert frames(dev[0])[:2] == ["cuMemAlloc_v2", "am_alloc_dev"], dev[0]["stack"]
    assert abs(dev[0]["host_bytes"] - 6 * 4 * MIB) <= 6 * 4 * MIB * 0.02, dev[0]
    host = by_api["cuMemHostAlloc"][0]
    assert frames(host)[:2] == ["cuMemHostAlloc", "am_alloc_hostalloc"], host["stack"]
    create = by_api["cuMemCreate"][0]
    assert frames(create)[:2] == ["cuMemCreate", "am_alloc_vmm"], create["stack"]
    hosts = [s["host_bytes"] for s in sites]
    assert hosts == sorted(hosts, reverse=True), "not ranked by host bytes"
    # per iteration: alloc+free, hostalloc+free, and the six VMM calls
    assert sum(s["calls"] for s in sites) == totals["records"] == 2 * 3 * 10
    assert all(s["held"] == 0 for s in sites), "everything was freed"


def test_report_leak_until_exit(env):
    """Allocations never freed show as released only at exit, at their site."""
    sites, _ = run_report(env, [], [env.alloc_mix, "-n", "4", "-s", "2M", "-a", "alloc,host",
                                    "-k", "-o", "/dev/null"])
    for s in sites:
        assert s["freed_at_exit"] == 4, s
        assert abs(s["freed_at_exit_host_bytes"] - 8 * MIB) <= 8 * MIB * 0.02, s


def test_report_duration_sees_held_memory(env):
    """--duration stops while the job still holds its memory: held at the site."""
    job = env.popen([env.alloc_mix, "-d", "1000", "-n", "2", "-s", "8M", "-a", "hostalloc",
                     "-w", "5000", "-o", "/dev/null"])
    p = subprocess.run([env.umtrace, "report", "--json", "--libcuda", env.fake, "-d", "3s",
                        "-p", str(job.pid)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    sites = [json.loads(l) for l in p.stdout.splitlines() if '"callsite"' in l]
    assert len(sites) == 1, sites
    s = sites[0]
    assert s["held"] == 2 and abs(s["held_host_bytes"] - 16 * MIB) <= 16 * MIB * 0.02, s
    assert s["growth_bytes_per_hour"] > 0, s
    assert s["holds_host_bytes"] == 16 * MIB, s    # pinned memory holds its size
    job.wait(timeout=30)


KHUGEPAGED = "/sys/kernel/mm/transparent_hugepage/khugepaged/"

# Touches every other 4 KiB page of 64 MiB as small pages, then lets
# khugepaged collapse them (a kernel thread allocating 2 MiB pages for this
# process); prints how much of it became huge pages once khugepaged is
# done, then exits.
COLLAPSE = r"""
import mmap, os, re, time
m = mmap.mmap(-1, 64 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
m.madvise(mmap.MADV_NOHUGEPAGE)
for off in range(0, len(m), 8192):
    m[off] = 1
m.madvise(mmap.MADV_HUGEPAGE)
# Until khugepaged is done with it: the same figure for a second.
deadline = time.monotonic() + 30
huge, same = -1, 0
while time.monotonic() < deadline and same < 10:
    time.sleep(0.1)
    with open("/proc/self/smaps_rollup") as f:
        now = int(re.search(r"AnonHugePages:\s+(\d+)", f.read()).group(1)) * 1024
    same = same + 1 if now == huge and now else 0
    huge = now
print("anon_huge", huge, os.getpid(), flush=True)
"""


def test_report_kernel_thread_pages(env):
    """Pages a kernel thread takes for a process are shown by the thread's
    name and tied to that process: khugepaged's huge pages for a job are
    found under khugepaged, for the job's pid, within one huge page of what
    the job's smaps counts."""
    import harness
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            if "[never]" in f.read():
                raise harness.Skip("transparent huge pages are off on this kernel")
        with open(KHUGEPAGED + "scan_sleep_millisecs") as f:
            old_sleep = f.read().strip()
    except FileNotFoundError:
        raise harness.Skip("no khugepaged on this kernel")
    with open(KHUGEPAGED + "scan_sleep_millisecs", "w") as f:
        f.write("10")
    try:
        p = subprocess.run([env.umtrace, "report", "--json", "--libcuda", env.fake, "--",
                            "python3", "-c", COLLAPSE],
                           capture_output=True, text=True, timeout=120)
    finally:
        with open(KHUGEPAGED + "scan_sleep_millisecs", "w") as f:
            f.write(old_sleep)
    assert p.returncode == 0, p.stderr
    huge = [l.split()[1:] for l in p.stdout.splitlines() if l.startswith("anon_huge")]
    assert huge, p.stdout[-2000:]
    huge, pid = int(huge[0][0]), int(huge[0][1])
    assert huge >= 32 * MIB, f"khugepaged collapsed only {huge >> 20} MiB"
    objs = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    rows = [o for o in objs if o["event"] == "kernel_thread" and o["comm"] == "khugepaged"]
    assert rows, p.stdout[-2000:]
    tied = sum(o["host_bytes"] for o in rows if o["for_pid"] == pid)
    assert abs(tied - huge) <= 2 * MIB, f"tied {tied >> 20} MiB, smaps {huge >> 20} MiB: {rows}"


def test_report_time_to_floor(env):
    """--floor: a job taking 32 MiB every 250 ms, reported on for 4 s: at the
    pace its hold grew over the report and alone, when MemAvailable reaches
    the floor (text and --json); a job that holds nothing gets no line."""
    import os
    import re
    mib = 1 << 20
    with open("/proc/meminfo") as f:
        avail = next(int(l.split()[1]) * 1024 for l in f if l.startswith("MemAvailable:"))
    floor = avail - 8192 * mib
    job = env.popen([env.alloc_mix, "-n", "60", "-s", "32M", "-a", "alloc", "-k", "-w", "30000",
                     "-o", "/dev/null"], env={**os.environ, "FAKECUDA_DELAY_MS": "250"})
    try:
        outs = [subprocess.run([env.umtrace, "report", *json_arg, "-p", str(job.pid), "-d", "4s",
                                "--floor", str(floor), "--libcuda", env.fake],
                               capture_output=True, text=True, timeout=120)
                for json_arg in ([], ["--json"])]
    finally:
        job.kill()
        job.wait(timeout=30)
    text, js = outs
    assert text.returncode == 0 and js.returncode == 0, text.stderr + js.stderr
    m = re.search(r"^  pid %d \(alloc_mix\): the floor in about (\d+) (s|min) at \+(\S+)/h$"
                  % job.pid, text.stdout, re.M)
    assert m and re.search(r"^floor \S+ \(--floor\): MemAvailable \S+ now$", text.stdout,
                           re.M), text.stdout[-1500:]
    ev = [json.loads(l) for l in js.stdout.splitlines() if '"time_to_floor"' in l]
    assert len(ev) == 1 and ev[0]["pid"] == job.pid and ev[0]["floor"] == floor, ev
    per_s = ev[0]["bytes_per_hour"] / 3600
    assert 64 * mib < per_s < 200 * mib, ev	# 128 MiB/s, less on a busy host
    left = ev[0]["mem_available"] - floor
    assert abs(ev[0]["seconds"] - left / per_s) < 1, ev
    print(f"    +{per_s / mib:.0f} MiB/s: the floor in about {ev[0]['seconds']:.0f} s")


def test_report_floor_percent_of_host_ram(env):
    """--floor N% is of host RAM as the guard takes its own: MemTotal less
    the device nodes', resolved once the session knows them (top the same),
    not of the whole MemTotal. This VM has one node: naming it with
    --device-nodes leaves MemTotal less that node's, nothing once its memory
    is all initialised, and a percentage of nothing is refused, as the
    guard refuses it."""
    import os
    from test_guard import node_total
    with open("/proc/meminfo") as f:
        total = next(int(l.split()[1]) * 1024 for l in f if l.startswith("MemTotal:"))
    job = env.popen([env.alloc_mix, "-n", "60", "-s", "32M", "-a", "alloc", "-k", "-w", "30000",
                     "-o", "/dev/null"], env={**os.environ, "FAKECUDA_DELAY_MS": "250"})
    try:
        for nodes, ram in (("none", total), ("0", total - node_total())):
            argv = ["--floor", "50%", "--device-nodes", nodes, "--libcuda", env.fake]
            r = subprocess.run([env.umtrace, "report", "--json", "-p", str(job.pid), "-d", "2s",
                                *argv], capture_output=True, text=True, timeout=120)
            t = subprocess.run([env.umtrace, "top", "--once", "-i", "1s", *argv],
                               capture_output=True, text=True, timeout=60)
            if ram // 2 < 1 * MIB:
                for p in (r, t):
                    assert p.returncode == 1 and \
                        "invalid --floor '50%': must be above 0" in p.stderr, (nodes, p.stderr)
                print(f"    --device-nodes {nodes}: host RAM {ram / MIB:.0f} MiB, 50% refused")
                continue
            assert r.returncode == 0 and t.returncode == 0, r.stderr + t.stderr
            ev = [json.loads(l) for l in r.stdout.splitlines() if '"time_to_floor"' in l]
            assert len(ev) == 1 and abs(ev[0]["floor"] - ram / 2) <= 0.01 * ram, (nodes, ram, ev)
            print(f"    --device-nodes {nodes}: floor {ev[0]['floor'] / MIB:.0f} MiB, "
                  f"half of {ram / MIB:.0f} MiB")
    finally:
        job.kill()
        job.wait(timeout=30)
