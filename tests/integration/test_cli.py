# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Bad input gets one clear line on stderr and the right exit code, never a
crash or a hang. One row per case: adding a case is one line."""
import os
import re
import shutil
import struct
import subprocess

from harness import Skip


def elf32_file(path):
    """A 32-bit x86 ELF header: valid, but not a library umtrace can probe."""
    ident = b"\x7fELF" + bytes([1, 1, 1, 0]) + bytes(8)
    hdr = ident + struct.pack("<HHIIIIIHHHHHH", 3, 3, 1, 0, 0, 0, 0, 52, 0, 0, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(hdr)


def cases(env, tmp32):
    gone = _free_pid()
    return [
        # argv, exit code, text expected on stderr
        (["bogus"], 2, "unknown command 'bogus'"),
        (["trace", "--bogus"], 2, "unknown option '--bogus'"),
        (["trace", "-x"], 2, "unknown option '-x'"),
        (["trace", "-p"], 2, "needs a value"),
        (["trace", "--libcuda"], 2, "needs a value"),
        (["trace", "-p", "abc"], 2, "invalid pid 'abc'"),
        (["trace", "-p", "-5"], 2, "invalid pid '-5'"),
        (["trace", "-p", "0"], 2, "invalid pid '0'"),
        (["trace", "-p", "1,,x"], 2, "invalid pid 'x'"),
        (["trace", "-p", "99999999999999999999"], 2, "invalid pid"),
        (["trace", "--ringbuf-size", "12Q"], 2, "invalid --ringbuf-size '12Q'"),
        (["trace", "--ringbuf-size", "2T"], 2, "invalid --ringbuf-size '2T'"),
        (["trace", "--ringbuf-size", "-4K"], 2, "invalid --ringbuf-size"),
        (["trace", "--rescan", "5x"], 2, "invalid --rescan '5x'"),
        (["trace", "--rescan", "10ms"], 2, "invalid --rescan '10ms'"),
        (["trace", "-p", "1", "--", "true"], 2, "either -p PID or a COMMAND"),
        (["trace", "-p", str(gone)], 1, f"no process with pid {gone}"),
        (["trace", "--libcuda", "/nonexistent/libcuda.so.1"], 1, "No such file"),
        (["trace", "--libcuda", "/tmp"], 1, "not a regular file"),
        (["trace", "--libcuda", "/etc/passwd"], 1, "not an ELF file"),
        (["trace", "--libcuda", "/bin/true"], 1, "defines none of the CUDA"),
        (["trace", "--libcuda", tmp32], 1, "32-bit ELF"),
        (["help", "nosuch"], 2, "unknown command 'nosuch'"),
        (["top", "--sort", "size"], 2, "invalid --sort 'size'"),
        (["report", "-d", "0"], 2, "invalid --duration '0'"),
        (["report", "-d", "soon"], 2, "invalid --duration 'soon'"),
        (["report", "--bogus"], 2, "unknown option '--bogus'"),
        (["report", "-p", "1", "--", "true"], 2, "either -p PID or a COMMAND"),
        (["top", "-i", "10ms"], 2, "invalid --interval '10ms'"),
        (["top", "-i"], 2, "needs a value"),
        (["top", "extra"], 2, "unexpected argument 'extra'"),
        (["top", "--bogus"], 2, "unknown option '--bogus'"),
    ]


def _free_pid():
    pid_max = int(open("/proc/sys/kernel/pid_max").read())
    for pid in range(pid_max - 1, 1, -1):
        if not os.path.exists(f"/proc/{pid}"):
            return pid
    raise Skip("no free pid")


def test_bad_input_table(env):
    tmp32 = env.tmpfile("elf32.so")
    elf32_file(tmp32)
    failures = []
    for argv, code, text in cases(env, tmp32):
        try:
            p = subprocess.run([env.umtrace, *argv], capture_output=True, text=True,
                               timeout=20, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            failures.append(f"{argv}: hung")
            continue
        err = p.stderr.strip().splitlines()
        if p.returncode != code:
            failures.append(f"{argv}: exit {p.returncode}, expected {code}: {p.stderr.strip()}")
        elif len(err) != 1 or text not in err[0] or not err[0].startswith("umtrace: "):
            failures.append(f"{argv}: stderr {err!r}, expected one line with {text!r}")
        elif p.stdout:
            failures.append(f"{argv}: wrote to stdout: {p.stdout[:200]!r}")
    assert not failures, "\n".join(failures)


def test_help_and_version(env):
    for argv, want in ((["--help"], "usage: umtrace"), (["help"], "usage: umtrace"),
                       (["help", "trace"], "usage: umtrace trace"),
                       (["trace", "--help"], "usage: umtrace trace"),
                       (["top", "--help"], "usage: umtrace top"),
                       (["report", "--help"], "usage: umtrace report"),
                       (["help", "top"], "usage: umtrace top"),
                       (["--version"], "umtrace ")):
        p = subprocess.run([env.umtrace, *argv], capture_output=True, text=True, timeout=20)
        assert p.returncode == 0, (argv, p.returncode)
        assert p.stdout.startswith(want), (argv, p.stdout[:100])
        assert not p.stderr, (argv, p.stderr)
    p = subprocess.run([env.umtrace], capture_output=True, text=True, timeout=20)
    assert p.returncode == 2 and "usage: umtrace" in p.stderr


def test_not_root(env):
    """Without privileges: one line saying what is needed."""
    setpriv = shutil.which("setpriv")
    if not setpriv:
        raise Skip("setpriv (util-linux) not installed")
    p = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
                        "--inh-caps=-all", env.umtrace, "trace", "--libcuda", env.fake],
                       capture_output=True, text=True, timeout=20)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert p.stderr.strip() == \
        "umtrace: permission denied: run as root, or with CAP_BPF and CAP_PERFMON", p.stderr


def test_check_loads_every_configuration(env):
    """`umtrace check` loads the BPF object the way each attaching command
    does, on this kernel: every line ok (or n/a with a reason), exit 0;
    every command that loads programs has its line."""
    p = subprocess.run([env.umtrace, "check"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    for line in lines:
        assert re.search(r"\s(ok \(\d+ programs|ok$|n/a \(.+\))", line), line
    for cmd in ("trace", "record", "top", "report", "guard --scope gpu",
                "guard --scope comm:", "guard --device-nodes"):
        assert any(l.startswith(cmd + " ") for l in lines), (cmd, p.stdout)
    q = subprocess.run([env.umtrace, "check", "extra"], capture_output=True, text=True,
                       timeout=30)
    assert q.returncode == 2 and q.stderr.count("\n") == 1, q.stderr
