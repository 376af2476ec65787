# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The binaries users copy onto GPU hosts: a static x86 build and the arm64
cross-build for DGX Spark and Grace."""
import shutil
import subprocess


def _skip_sanitized(env):
    from harness import Skip
    if env.out.endswith("-san"):
        raise Skip("sanitizer build: a static binary cannot carry ASan/UBSan")


def _make(env, *args):
    p = subprocess.run(["make", "-C", env.root, *args], capture_output=True, text=True,
                       timeout=900)
    assert p.returncode == 0, p.stdout[-1500:] + p.stderr[-1500:]


def _file(path):
    return subprocess.run(["file", "-b", path], capture_output=True, text=True).stdout


def test_static_build_runs(env):
    _skip_sanitized(env)
    _make(env, "static")
    binary = f"{env.out}/umtrace-static"
    info = _file(binary)
    assert "statically linked" in info, info
    p = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=20)
    assert p.returncode == 0 and p.stdout.startswith("umtrace "), p


def test_arm64_cross_build(env):
    from harness import Skip
    _skip_sanitized(env)
    if not shutil.which("aarch64-linux-gnu-gcc"):
        raise Skip("no arm64 cross compiler: run scripts/install-deps.sh --cross")
    _make(env, "ARCH=arm64")
    info = _file(f"{env.root}/build/arm64/umtrace-static")
    assert "ARM aarch64" in info and "statically linked" in info, info
