# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""umtrace top: per-process rows of what GPU allocations hold, live."""
import os
import re
import subprocess
import time

from harness import readline, wait_line

MIB = 1 << 20


def parse_rows(text):
    rows, in_table = [], False
    for line in text.splitlines():
        if line.startswith("PID "):
            in_table = "KERNEL THREAD" not in line	# that table comes after
            continue
        if line.startswith("floor "):	# when the growing ones reach the floor
            in_table = False
            continue
        if in_table and line.strip():
            f = line.split()
            rows.append({"pid": int(f[0]), "comm": f[1], "gpu": f[2], "holds": f[3],
                         "host": f[4], "outside": f[5], "growth": f[6],
                         "allocs": int(f[7])})
    return rows


def to_bytes(s):
    units = {"B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    return float(s[:-1]) * units[s[-1]]


def test_top_once_two_workloads(env):
    """Two jobs holding different amounts: right rows, right order, right bytes."""
    top = env.popen([env.umtrace, "top", "--once", "-i", "3s", "--libcuda", env.fake])
    wait_line(top.stderr, "probing", 30)
    big = env.popen([env.alloc_mix, "-t", "2", "-n", "4", "-s", "16M", "-a", "alloc,hostalloc",
                     "-w", "4000", "-o", "/dev/null"])
    small = env.popen([env.alloc_mix, "-t", "1", "-n", "2", "-s", "8M", "-a", "vmm",
                       "-w", "4000", "-o", "/dev/null"])
    out, err = top.communicate(timeout=30)
    assert top.returncode == 0, err
    rows = parse_rows(out)
    assert [r["pid"] for r in rows] == [big.pid, small.pid], out
    b, s = rows
    assert b["comm"] == "alloc_mix", b
    assert to_bytes(b["gpu"]) == 256 * MIB and b["allocs"] == 16, b
    assert abs(to_bytes(b["host"]) - 256 * MIB) <= 256 * MIB * 0.02, b
    # VMM: the physical memory counts, the reservation and the mapping do not.
    assert to_bytes(s["gpu"]) == 16 * MIB and s["allocs"] == 6, s
    assert abs(to_bytes(s["host"]) - 16 * MIB) <= 16 * MIB * 0.02, s
    assert "held by GPU allocations: 272M" in out or "held by GPU allocations: 273M" in out, out
    # The fake takes device memory from host pages: unified, so holds = size.
    assert "platform unified" in out, out
    assert to_bytes(b["holds"]) == 256 * MIB and to_bytes(s["holds"]) == 16 * MIB, rows
    big.wait(timeout=30)
    small.wait(timeout=30)


def test_top_pid_filter(env):
    """-p keeps only that process."""
    jobs = [env.popen([env.alloc_mix, "-d", "800", "-n", "1", "-s", f"{m}M", "-a", "alloc",
                       "-w", "4000", "-o", "/dev/null"]) for m in (4, 32)]
    top = env.popen([env.umtrace, "top", "--once", "-i", "3s", "--libcuda", env.fake,
                     "-p", str(jobs[0].pid)])
    out, err = top.communicate(timeout=30)
    assert top.returncode == 0, err
    rows = parse_rows(out)
    assert [r["pid"] for r in rows] == [jobs[0].pid], out
    for j in jobs:
        j.wait(timeout=30)


def test_top_exited_processes_leave(env):
    """A process that exits leaves the view: the driver freed what it held."""
    top = env.popen([env.umtrace, "top", "--once", "-i", "2500ms", "--libcuda", env.fake])
    wait_line(top.stderr, "probing", 30)
    job = env.popen([env.alloc_mix, "-n", "2", "-s", "8M", "-a", "alloc", "-k", "-o", "/dev/null"])
    job.wait(timeout=30)
    out, err = top.communicate(timeout=30)
    assert top.returncode == 0, err
    assert parse_rows(out) == [], out
    assert "held by GPU allocations: 0B observed" in out, out


def test_top_interactive_quits_on_q(env):
    """In a terminal: the screen is redrawn within 80 columns, q quits, and the
    terminal is left as it was found (canonical mode, echo)."""
    _interactive(env, quit_with_q=True)


def test_top_interactive_ctrl_c_restores_terminal(env):
    """Interrupted (Ctrl-C sends SIGINT): the terminal is restored too."""
    _interactive(env, quit_with_q=False)


def _interactive(env, quit_with_q):
    import os
    import signal
    import pty
    import select
    import struct
    import termios
    import fcntl

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    before = termios.tcgetattr(slave)
    p = subprocess.Popen([env.umtrace, "top", "-i", "300ms", "--libcuda", env.fake],
                         stdin=slave, stdout=slave, stderr=subprocess.PIPE,
                         start_new_session=True)
    env._procs.append(p)
    screen = b""
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and screen.count(b"\033[2J") < 3:
            r, _, _ = select.select([master], [], [], 0.5)
            if r:
                screen += os.read(master, 65536)
        assert screen.count(b"\033[2J") >= 3, f"no redraws: {screen[-400:]!r}"
        # The frame before the last clear is complete; the last may not be yet.
        text = screen.decode(errors="replace").split("\033[2J")[-2]
        assert "umtrace top" in text and "PID" in text, text
        assert max(len(l) for l in text.replace("\033[H", "").splitlines()) <= 80, text
        # Raw while running: no echo, no line editing.
        during = termios.tcgetattr(slave)
        assert not during[3] & (termios.ICANON | termios.ECHO), during[3]
        if quit_with_q:
            os.write(master, b"q")
        else:
            p.send_signal(signal.SIGINT)
        assert p.wait(timeout=10) == 0, p.stderr.read()
        after = termios.tcgetattr(slave)
        assert after[3] == before[3], (before[3], after[3])
    finally:
        os.close(master)
        os.close(slave)


def test_top_discrete_platform(env):
    """A discrete GPU: device allocations take ~0 host pages, so the model
    says discrete and holds only the pinned memory; GPU memory still shows."""
    import os
    top = env.popen([env.umtrace, "top", "--once", "-i", "3s", "--libcuda", env.fake])
    wait_line(top.stderr, "probing", 30)
    job = env.popen([env.alloc_mix, "-n", "4", "-s", "32M", "-a", "alloc,hostalloc",
                     "-w", "4000", "-o", "/dev/null"],
                    env=dict(os.environ, FAKECUDA_MODE="discrete"))
    out, err = top.communicate(timeout=30)
    assert top.returncode == 0, err
    assert "platform discrete (device allocs took almost no host pages)" in out, out
    rows = parse_rows(out)
    assert [r["pid"] for r in rows] == [job.pid], out
    r = rows[0]
    assert to_bytes(r["gpu"]) == 256 * MIB, r
    # Pinned memory holds its size; device memory only the pages seen.
    assert 128 * MIB <= to_bytes(r["holds"]) <= 128 * MIB * 1.02, r
    assert abs(to_bytes(r["host"]) - to_bytes(r["holds"])) <= 2 * MIB, r
    job.wait(timeout=30)


def test_top_forced_unified_counts_pooled_memory(env):
    """--platform unified: device memory holds its size even when its calls
    took no host pages in their windows (as when the driver serves them
    from its pool); the observed figure stays what was seen."""
    import os
    top = env.popen([env.umtrace, "top", "--once", "-i", "3s", "--platform", "unified",
                     "--libcuda", env.fake])
    wait_line(top.stderr, "probing", 30)
    job = env.popen([env.alloc_mix, "-n", "4", "-s", "32M", "-a", "alloc", "-w", "4000",
                     "-o", "/dev/null"],
                    env=dict(os.environ, FAKECUDA_MODE="discrete"))
    out, err = top.communicate(timeout=30)
    assert top.returncode == 0, err
    assert "platform unified (--platform)" in out, out
    r = parse_rows(out)[0]
    assert to_bytes(r["holds"]) == 128 * MIB and to_bytes(r["host"]) < MIB, r
    job.wait(timeout=30)


def test_top_outside_gpu_calls(env):
    """Host memory a GPU job takes outside its GPU calls is its own column."""
    top = env.popen([env.umtrace, "top", "--once", "-i", "3s", "--libcuda", env.fake])
    wait_line(top.stderr, "probing", 30)
    job = env.popen([env.alloc_mix, "-t", "2", "-n", "2", "-s", "8M", "-a", "alloc",
                     "-m", "64M", "-w", "4000", "-o", "/dev/null"])
    out, err = top.communicate(timeout=30)
    assert top.returncode == 0, err
    r = parse_rows(out)[0]
    assert r["pid"] == job.pid, out
    assert 64 * MIB <= to_bytes(r["outside"]) <= 64 * MIB * 1.05, r
    assert abs(to_bytes(r["host"]) - 32 * MIB) <= 32 * MIB * 0.02, r
    job.wait(timeout=30)


def test_top_managed_pages_live(env):
    """With --managed-faults, pages CPU faults bring into a managed
    allocation show in its process's row while the allocation lives, not
    only at its free (x86: the fault address comes from page_fault_user)."""
    import platform
    if platform.machine() != "x86_64":
        raise __import__("harness").Skip("only x86 has a tracepoint with the fault address")
    seen = {}
    for extra in ([], ["--managed-faults"]):
        top = env.popen([env.umtrace, "top", "--once", "-i", "3s", "--libcuda", env.fake,
                         *extra])
        wait_line(top.stderr, "probing", 30)
        job = env.popen([env.alloc_mix, "-t", "1", "-n", "2", "-s", "32M", "-a", "managed",
                         "-w", "4000", "-o", "/dev/null"])
        out, err = top.communicate(timeout=30)
        assert top.returncode == 0, err
        r = [r for r in parse_rows(out) if r["pid"] == job.pid]
        assert r, out
        seen[bool(extra)] = r[0]
        job.wait(timeout=30)
    # alloc_mix touches half of each: 2 x 16 MiB.
    live = seen[True]
    assert 0.95 * 32 * MIB <= to_bytes(live["host"]) <= 1.02 * 32 * MIB, live
    assert 0.95 * 32 * MIB <= to_bytes(live["holds"]) <= 1.02 * 32 * MIB, live
    assert to_bytes(seen[False]["host"]) < 1 * MIB, seen[False]


def _node_memtotal(node=0):
    with open(f"/sys/devices/system/node/node{node}/meminfo") as f:
        for line in f:
            w = line.split()
            if w[2] == "MemTotal:":
                return int(w[3]) * 1024
    raise AssertionError("no MemTotal")


def test_top_device_nodes(env):
    """--device-nodes: the header's host figures leave the node out, a line
    says what GPU calls took there, and no row counts it as host memory.
    Node 0 is this VM's only node: every page of the job is on it."""
    top = env.popen([env.umtrace, "top", "--once", "-i", "3s", "--libcuda", env.fake,
                     "--device-nodes", "0"])
    while "probing" not in (line := readline(top.stderr, 30, "'probing'")):
        assert line, "top did not attach"
    job = env.popen([env.alloc_mix, "-n", "2", "-s", "8M", "-a", "alloc", "-w", "4000",
                     "-o", "/dev/null"])
    out, err = top.communicate(timeout=30)
    job.wait(timeout=30)
    assert top.returncode == 0, err
    assert "not host RAM: node(s) 0; GPU calls took 16M there" in out, out
    with open("/proc/meminfo") as f:
        total = int(f.readline().split()[1]) * 1024
    m = re.search(r"host (\S+), available", out)
    # "13G": whole units at this size, so within 5%
    assert m and abs(to_bytes(m.group(1)) - (total - _node_memtotal())) <= 0.05 * total, out
    r = [r for r in parse_rows(out) if r["pid"] == job.pid]
    assert r and to_bytes(r[0]["gpu"]) == 16 * MIB, out
    assert to_bytes(r[0]["host"]) < 1 * MIB, r


def test_top_time_to_floor(env):
    """--floor: a job taking 32 MiB every 250 ms gets a line saying when, at
    its pace over the last minute and alone, MemAvailable reaches the floor;
    the figure is what MemAvailable less the floor, over that pace, says."""
    with open("/proc/meminfo") as f:
        avail = next(int(l.split()[1]) * 1024 for l in f if l.startswith("MemAvailable:"))
    floor = avail - 4096 * MIB
    top = env.popen([env.umtrace, "top", "-b", "-i", "1s", "--floor", str(floor),
                     "--libcuda", env.fake])
    wait_line(top.stderr, "probing", 30)
    job = env.popen([env.alloc_mix, "-n", "40", "-s", "32M", "-a", "alloc", "-k", "-w", "30000",
                     "-o", "/dev/null"], env={**os.environ, "FAKECUDA_DELAY_MS": "250"})
    pat = re.compile(r"^%-7d alloc_mix    the floor in about (\d+) (s|min) at \+(\S+)/h$"
                     % job.pid, re.M)
    head = re.compile(r"^floor (\S+) \(--floor\): MemAvailable (\S+)$", re.M)
    try:
        line, seen = wait_line(top.stdout, f"{job.pid} ", 30)
        deadline = time.monotonic() + 30
        m = None
        while not m:
            assert time.monotonic() < deadline, seen[-2000:]
            line = readline(top.stdout, max(0.1, deadline - time.monotonic()))
            seen += line
            m = pat.search(line)
    finally:
        job.kill()
        job.wait(timeout=30)
        top.kill()
        top.wait(timeout=30)
    h = head.findall(seen)
    assert h, seen[-2000:]
    eta = int(m.group(1)) * (60 if m.group(2) == "min" else 1)
    per_s = to_bytes(m.group(3)) / 3600
    left = to_bytes(h[-1][1]) - floor
    # Up to 128 MiB/s; MemAvailable in 0.1 GiB steps as top prints it.
    assert 8 * MIB < per_s < 160 * MIB, m.group(0)
    assert abs(eta - left / per_s) <= 2 + 0.15 * left / per_s, (m.group(0), h[-1])
    print(f"    +{per_s / MIB:.0f} MiB/s: the floor in about {eta} s")


def test_top_floor_refused(env):
    """--floor takes what the guard's does: one line and exit 2 on anything else."""
    for arg, want in (("junk", "--floor"), ("0", "above 0"), ("200%", "--floor")):
        p = subprocess.run([env.umtrace, "top", "--once", "--floor", arg], capture_output=True,
                           text=True, timeout=30)
        assert p.returncode == 2 and want in p.stderr, (arg, p.returncode, p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1, (arg, p.stderr)
