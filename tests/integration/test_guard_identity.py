# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The guard protects by who a process is, never by the name it chose.

On a shared host any user can name a job anything: a copy of a GPU hog
called sshd or umtrace, run as nobody, must be stopped at the floor like
any other, while the real sshd (root's /usr/sbin/sshd, and its
privilege-separated child) is never stopped, even in scope below the
floor. Both halves decide: the kernel side at the allocation, the
sampled rule from /proc."""
import os
import pwd
import shutil
import socket
import subprocess
import time

from harness import Skip, meminfo, readline
from test_guard import Guard, state_of, to_cross, wait_state, wait_told

MIB = 1 << 20
SSHD = "/usr/sbin/sshd"
NOBODY = pwd.getpwnam("nobody")


def as_nobody():
    os.setgroups([])
    os.setgid(NOBODY.pw_gid)
    os.setuid(NOBODY.pw_uid)


def users_copy(env, src, name):
    """src copied to a directory of nobody's as name, owned by nobody:
    what any user of the host can make."""
    d = env.tmpfile("nobody-bin")
    os.makedirs(d, exist_ok=True)
    os.chown(d, NOBODY.pw_uid, NOBODY.pw_gid)
    os.chmod(d, 0o755)
    path = os.path.join(d, name)
    shutil.copy(src, path)
    os.chown(path, NOBODY.pw_uid, NOBODY.pw_gid)
    return path


def roots_copy(env, src, name):
    """src copied as name into a directory of root's."""
    d = env.tmpfile("root-bin")
    os.makedirs(d, mode=0o755, exist_ok=True)
    path = os.path.join(d, name)
    shutil.copy(src, path)
    os.chmod(path, 0o755)
    return path


BALLAST = 512 * MIB


def below_the_floor(env):
    """Out of scope, take BALLAST more once the stopped page hog holds
    the host at the floor: well under it, by more than a VM's free page
    reporting can take off the free lists for a moment (128 MiB here), so
    no crossing is told apart as one that did not last."""
    prog = ("import mmap, sys\n"
            f"m = mmap.mmap(-1, {BALLAST})\n"
            f"for i in range(0, {BALLAST}, 4096): m[i] = 1\n"
            "sys.stdout.write('held\\n'); sys.stdout.flush()\n"
            "sys.stdin.read()\n")
    p = env.popen(["python3", "-c", prog], stdin=subprocess.PIPE)
    assert readline(p.stdout, 120, "'held' from the ballast") == "held\n"
    return p


def stop_lines(err, pid):
    return [line for line in err.splitlines()
            if "guard: stop " in line and f" pid={pid} " in line]


def descendants(pid):
    """pid and every process below it."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def start_sshd(env):
    """The real sshd on a loopback port of its own, with a throwaway key."""
    if not os.path.exists(SSHD) or not shutil.which("ssh-keygen"):
        raise Skip("openssh-server is not installed")
    key = env.tmpfile("sshd-key")
    env._tmp.append(key + ".pub")	# ssh-keygen writes both
    for p in (key, key + ".pub"):
        if os.path.exists(p):
            os.unlink(p)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key], check=True,
                   capture_output=True, timeout=30)
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)	# its privilege separation root
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = env.popen([SSHD, "-D", "-e", "-f", "/dev/null", "-h", key, "-p", str(port),
                   "-o", "ListenAddress=127.0.0.1", "-o", "PidFile=none"])
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return p, port
        except OSError:
            assert p.poll() is None, p.stderr.read()
            assert time.monotonic() < deadline, "sshd did not listen"
            time.sleep(0.05)


def ssh_handshake(port):
    """An SSH session, left open, that got far enough for sshd to fork,
    re-exec and hand it to its privilege-separated child: sshd's banner
    and its key exchange offer, which that child sends."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"SSH-2.0-umtrace-test\r\n")
    got = b""
    deadline = time.monotonic() + 10
    while b"SSH-2.0-" not in got or len(got) < 64:
        assert time.monotonic() < deadline, f"sshd answered {got!r}"
        chunk = s.recv(4096)
        assert chunk, f"sshd closed the connection after {got!r}"
        got += chunk
    return s


def test_guard_identity_users_sshd_stopped_real_sshd_never(env):
    """Below the floor, with sshd in scope: root's sshd and its children
    take pages and are never stopped; nobody's GPU hogs named sshd and
    umtrace are stopped before their calls run."""
    floor = meminfo() - 1024 * MIB
    g = Guard(env, floor, extra=["--scope", "comm:^(sshd|umtrace|pagehog)$"])
    # Stopped by the page that crosses the floor, it holds the host below
    # it: every page a process in scope takes now would be stopped on.
    hog = env.popen([os.path.join(env.tests, "pagehog"), "-c", "4", "-t", to_cross(floor, MIB),
                     "-w", "60000"])
    assert wait_state(hog.pid, "T", 30), "pagehog was not stopped: the floor was not reached"
    ballast = below_the_floor(env)
    sshd, port = start_sshd(env)
    conn = ssh_handshake(port)
    ours = descendants(sshd.pid)
    assert len(ours) >= 2, f"sshd made no child for the connection: {ours}"
    for p in ours:
        assert state_of(p) != "T", f"the real sshd (pid {p}) was stopped"

    users = []
    for name in ("sshd", "umtrace"):
        path = users_copy(env, env.alloc_mix, name)
        u = env.popen([path, "-n", "4", "-s", "32M", "-a", "alloc", "-k", "-o", "/dev/null"],
                      preexec_fn=as_nobody)
        users.append(u)
        assert wait_state(u.pid, "T", 30), f"nobody's {name} was not stopped: {u.poll()}"
        wait_told(g, u.pid)
    for p in ours:
        assert state_of(p) != "T", f"the real sshd (pid {p}) was stopped"

    conn.close()
    for p in (hog, sshd, ballast, *users):
        p.kill()
        p.wait(timeout=30)
    err = g.stop()
    for u, name in zip(users, ("sshd", "umtrace")):
        lines = stop_lines(err, u.pid)
        # At its first GPU call, or at a page of its start-up before it.
        assert lines and f'comm="{name}"' in lines[0] and \
            ("reason=admission" in lines[0] or "reason=floor" in lines[0]), (name, err[-2000:])
    for p in ours:
        assert not stop_lines(err, p), err[-2000:]
    assert stop_lines(err, hog.pid), err[-2000:]


def test_guard_identity_protect_name_needs_roots_file(env):
    """--protect NAME protects root's process run from root's file of that
    name: not a user's copy, and not root's own file run by a user."""
    floor = meminfo() - 1024 * MIB
    root_copy = roots_copy(env, env.alloc_mix, "gpuprot")
    users = users_copy(env, env.alloc_mix, "gpuprot")
    g = Guard(env, floor, extra=["--scope", "comm:^(pagehog|gpuprot)$", "--protect", "gpuprot"])
    hog = env.popen([os.path.join(env.tests, "pagehog"), "-c", "4", "-t", to_cross(floor, MIB),
                     "-w", "60000"])
    assert wait_state(hog.pid, "T", 30), "pagehog was not stopped: the floor was not reached"
    ballast = below_the_floor(env)
    small = ["-n", "4", "-s", "32M", "-a", "alloc", "-k", "-o", "/dev/null"]
    protected = env.popen([root_copy, *small])
    assert protected.wait(timeout=60) == 0, protected.stderr.read()
    copy = env.popen([users, *small], preexec_fn=as_nobody)
    assert wait_state(copy.pid, "T", 30), "nobody's copy named gpuprot was not stopped"
    wait_told(g, copy.pid)
    borrowed = env.popen([root_copy, *small], preexec_fn=as_nobody)
    assert wait_state(borrowed.pid, "T", 30), "root's gpuprot run by nobody was not stopped"
    wait_told(g, borrowed.pid)
    for p in (hog, copy, borrowed, ballast):
        p.kill()
        p.wait(timeout=30)
    err = g.stop()
    assert not stop_lines(err, protected.pid), err[-2000:]
    assert stop_lines(err, copy.pid) and stop_lines(err, borrowed.pid), err[-2000:]


def test_guard_identity_protect_refuses_what_a_user_can_write(env):
    """exe: names a file only root can change: one in a directory any user
    may write is refused at start, with the reason, and nothing runs."""
    # Below a directory of root's, so the walk gets as far as ours.
    d = os.path.join(env.tests, f"writable-bin-{os.getpid()}")
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o777)
    tool = os.path.join(d, "tool")
    shutil.copy(env.alloc_mix, tool)
    p = subprocess.run([env.umtrace, "guard", "--libcuda", env.fake, "--no-pin",
                        "--state-file", env.tmpfile("refused.state"), "--protect",
                        f"exe:{tool}"], capture_output=True, text=True, timeout=60)
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert p.returncode == 2 and len(lines) == 1 and \
        f"writable-bin-{os.getpid()} is writable by group or others" in lines[0], \
        (p.returncode, p.stderr)
    shutil.rmtree(d)
