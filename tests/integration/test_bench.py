# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The benchmark's own instrument: tests/bench/interleave, which times
slices of a page-fault storm with a tracer's programs attached for every
other slice. Its figures are only worth something if it attaches exactly
what it says, one link per program at a time, detaches between slices,
copies a running tracer's set-up, and refuses bad input clearly."""
import json
import os
import signal
import subprocess
import threading
import time

from harness import readline, wait_line


def _paths(env):
    from harness import Skip
    tool = f"{env.out}/bench/interleave"
    empty = f"{env.out}/bench/empty_tp.bpf.o"
    for p in (tool, empty):
        if not os.path.exists(p):
            raise Skip(f"{p} not built (make bench-progs)")
    return tool, empty


def _pairs(stdout, n):
    lines = stdout.splitlines()
    assert lines and lines[0] == "ready", stdout[:300]
    res = json.loads(lines[1])
    assert len(res["pairs"]) == n, res
    for off, on in res["pairs"]:
        assert off > 0 and on > 0, res
    return res


def _raw_tp_links(pid):
    """The raw tracepoint links PID holds open now."""
    n = 0
    try:
        fds = os.listdir(f"/proc/{pid}/fdinfo")
    except FileNotFoundError:
        return 0
    for fd in fds:
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                n += "link_type:\traw_tracepoint" in f.read()
        except OSError:
            pass
    return n


def test_interleave_bad_input(env):
    tool, empty = _paths(env)
    for args in ([], ["-n", "0", empty], ["-m", "x", empty], [empty, empty]):
        p = subprocess.run([tool, *args], capture_output=True, text=True, timeout=30)
        assert p.returncode == 2 and p.stderr.startswith("usage: interleave"), (args, p)
    cases = ((["-P", "nosuch", empty], "is not one of its tracing programs"),
             (["/nonexistent.o"], "/nonexistent.o: No such file"),
             (["-p", "999999999", empty], "process 999999999: "))
    for args, msg in cases:
        p = subprocess.run([tool, *args], capture_output=True, text=True, timeout=30)
        assert p.returncode == 1 and msg in p.stderr, (args, p)
        assert "ready" not in p.stdout, p.stdout


def test_interleave_control_attaches_nothing(env):
    tool, empty = _paths(env)
    p = subprocess.run([tool, "-A", "-n", "6", "-m", "4", empty], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    res = _pairs(p.stdout, 6)
    assert res["programs"] == 0, res
    assert "loaded, never attached: empty_alloc" in p.stderr, p.stderr


def test_interleave_toggles_one_link_at_a_time(env):
    """Watched from outside through its fdinfo: the program is attached
    (one link) and detached (none) in turn, never twice at once; a pair
    that keeps the state it finds must not attach again on top."""
    tool, empty = _paths(env)
    p = env.popen([tool, "-P", "empty_alloc", "-n", "30", "-m", "4", empty])
    seen, stop = set(), threading.Event()

    def watch():
        while not stop.is_set():
            seen.add(_raw_tp_links(p.pid))
            time.sleep(0.002)
    w = threading.Thread(target=watch)
    w.start()
    try:
        out, err = p.communicate(timeout=120)
    finally:
        stop.set()
        w.join()
    assert p.returncode == 0, err
    _pairs(out, 30)
    assert "toggling empty_alloc" in err and "empty_free" not in err, err
    assert seen <= {0, 1} and 1 in seen, seen


def test_interleave_clones_a_running_guard(env):
    """Started against a running guard, it takes the programs the guard
    attached and its data, says ready, and times nothing until the guard
    is gone."""
    tool, _ = _paths(env)
    state = env.tmpfile("guard.state")
    # Attached all the time: far from the floor the guard has none.
    g = env.popen([env.umtrace, "guard", "--floor", "1%", "--no-pin", "--libcuda", env.fake,
                   "--state-file", state, "--page-programs", "always"])
    wait_line(g.stderr, "armed", 30)
    p = env.popen([tool, "-p", str(g.pid), "-n", "4", "-m", "4", f"{env.out}/umtrace.bpf.o"])
    assert readline(p.stdout, 30, "'ready'") == "ready\n"
    time.sleep(0.3)
    # Nothing timed while the guard's own programs run beside the copy.
    assert p.poll() is None
    g.send_signal(signal.SIGINT)
    g.communicate(timeout=30)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    _pairs("ready\n" + out, 4)
    for prog in ("page_alloc", "page_free"):
        assert f"toggling {prog}\n" in err, err
