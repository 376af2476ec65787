# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The guard's files as their readers see them: the metrics file through
promtool (what node_exporter accepts), the example config through umtrace's
own parser, the systemd unit through systemd-analyze."""
import os
import re
import shutil
import subprocess

import harness

# Every key guard_config knows (user/guardd/config.c).
CONFIG_KEYS = {"floor", "low", "drop", "metric", "action", "scope", "protect", "dry_run",
               "auto_resume", "on_stop", "postmortem_dir", "metrics_file", "libcuda", "torch",
               "page_programs", "warn_eta", "on_warn", "warn_signal"}


def unit_test_bin(env, name):
    path = os.path.join(env.out, "tests", "unit", name)
    assert os.path.exists(path), f"{path} not built (make {path})"
    return path


def repo_file(env, *parts):
    return os.path.join(env.root, *parts)


def load_config(env, text, name):
    """Load text with `test_guard_config --load`: (ok, message)."""
    path = env.tmpfile(name)
    # A file of our own: the loader refuses one that root does not own.
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o644)
    p = subprocess.run([unit_test_bin(env, "test_guard_config"), "--load", path],
                       capture_output=True, text=True, timeout=30)
    return p.returncode == 0 and p.stdout.strip() == "ok", p.stdout.strip()


def promtool_check(text):
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=60)
    return p.returncode, (p.stdout + p.stderr).strip()


def test_guard_files_metrics_promtool(env):
    """The metrics file passes promtool's parser and linter, escaped labels and all."""
    if not shutil.which("promtool"):
        raise harness.Skip("promtool not installed (Debian package prometheus)")
    path = env.tmpfile("guard.prom")
    p = subprocess.run([unit_test_bin(env, "test_metrics"), "--write", path],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    with open(path) as f:
        text = f.read()
    # a"b\c<newline>d: its terminal form a"b\\c\x0ad, then the format's escapes.
    assert 'comm="a\\"b\\\\\\\\c\\\\x0ad"' in text, "the sample should carry escaped labels"
    assert oct(os.stat(path).st_mode & 0o777) == oct(0o644)
    rc, out = promtool_check(text)
    assert rc == 0 and not out, f"promtool: rc {rc}: {out}"
    names = set(re.findall(r"^# TYPE (\S+) ", text, re.M))
    assert all(n.startswith(("umtrace_guard_", "umtrace_torch_")) or
               n == "umtrace_seconds_to_floor" for n in names), names
    assert {"umtrace_torch_allocated_bytes", "umtrace_torch_reserved_bytes"} <= names, names
    # The check has teeth: an unescaped quote in a label is refused.
    rc, out = promtool_check(text.replace('a\\"b', 'a"b'))
    assert rc != 0, "promtool accepted a broken label"


def test_guard_files_example_config(env):
    """scripts/guard.conf.example loads as shipped, documents every key, and
    every example value in it is valid."""
    with open(repo_file(env, "scripts", "guard.conf.example")) as f:
        text = f.read()
    ok, msg = load_config(env, text, "example.conf")
    assert ok, f"as shipped: {msg}"
    example = re.compile(r"^#([a-z_]+) = ")
    keys = {m.group(1) for m in map(example.match, text.splitlines()) if m}
    assert keys == CONFIG_KEYS, f"undocumented: {CONFIG_KEYS - keys}, unknown: {keys - CONFIG_KEYS}"
    # Uncomment every example line: each value must be one the parser takes.
    live = "\n".join(l[1:] if example.match(l) else l for l in text.splitlines()) + "\n"
    ok, msg = load_config(env, live, "example-live.conf")
    assert ok, f"with the examples on: {msg}"
    # And a mistake in it is caught with its line number.
    bad = live.replace("floor = 2500M", "floor = 2500Q")
    line = bad.splitlines().index("floor = 2500Q") + 1
    ok, msg = load_config(env, bad, "example-bad.conf")
    assert not ok and f":{line}: invalid floor '2500Q'" in msg, msg


def test_guard_files_systemd_unit(env):
    """The unit verifies, runs the config the example installs as, and keeps
    the capability set to what the guard needs."""
    with open(repo_file(env, "scripts", "umtrace-guard.service")) as f:
        text = f.read()
    assert re.search(r"^ExecStart=/usr/local/sbin/umtrace guard --config /etc/umtrace/guard.conf$",
                     text, re.M), "ExecStart"
    caps = re.search(r"^CapabilityBoundingSet=(.*)$", text, re.M).group(1).split()
    assert set(caps) == {"CAP_BPF", "CAP_PERFMON", "CAP_SYS_ADMIN", "CAP_KILL",
                         "CAP_SYS_PTRACE", "CAP_DAC_READ_SEARCH", "CAP_SYS_NICE",
                         "CAP_IPC_LOCK"}, caps
    for line in ("OOMScoreAdjust=-1000", "MemoryMax=64M", "ProtectSystem=strict",
                 "Documentation=man:umtrace-guard(8)",
                 "NoNewPrivileges=yes", "PrivateTmp=yes", "Restart=on-failure"):
        assert re.search(rf"^{re.escape(line)}$", text, re.M), line
    if not shutil.which("systemd-analyze"):
        raise harness.Skip("systemd-analyze not installed")
    # verify checks that ExecStart's binary exists: point it at this build.
    path = env.tmpfile("umtrace-guard.service")
    with open(path, "w") as f:
        f.write(text.replace("/usr/local/sbin/umtrace", env.umtrace))
    # Documentation=man:umtrace-guard(8): verify runs man for it, so point
    # man at this build's pages (make man).
    menv = dict(os.environ, MANPATH=os.path.join(env.out, "man"))
    p = subprocess.run(["systemd-analyze", "verify", path], capture_output=True, text=True,
                       timeout=60, env=menv)
    out = (p.stdout + p.stderr).strip()
    assert p.returncode == 0 and not out, f"systemd-analyze verify: rc {p.returncode}: {out}"
