# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The binaries users copy onto GPU hosts: a static x86 build, the arm64
cross-build for DGX Spark and Grace, and the BPF object against the struct
layouts of older kernels than this one."""
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


def test_loads_on_older_struct_layouts(env):
    """The BPF object loads against this kernel's BTF and against a copy
    rewritten to the struct page of kernels before 6.17 (flags a plain
    word), with a device node named so that the
    code reading page flags is live: each layout's read is relocated and
    verified. (Reading only the 6.17 layout fails the second load.)"""
    from harness import Skip
    p = subprocess.run([f"{env.tests}/core_layouts"], capture_output=True, text=True,
                       timeout=120)
    if p.returncode == 77:
        raise Skip(p.stderr.strip())
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    assert "current: loaded" in p.stdout, p.stdout
    assert "page-word: " in p.stdout and "not loaded" not in p.stdout, p.stdout


def _make_var(env, name):
    """A variable as the Makefile sets it for this host's build."""
    p = subprocess.run(["make", "-C", env.root, "-s", "--no-print-directory", "--eval",
                        f"umt-print-var:\n\t@echo $({name})", "umt-print-var"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


# The headers bpf/ shares with user space hold fixed-width types and no
# includes: each side names its own types first (vmlinux.h on this one).
BPF_SHARED_HDRS = ("umtrace.h", "cookie.h")


def test_bpf_headers_compile_alone(env):
    """Each bpf/ header compiles on its own, twice over (its include
    guard), with the BPF compile flags: it includes what it uses, so a
    program file may include it first, or alone."""
    import glob
    import os
    import shlex
    cmd = [_make_var(env, "CLANG"), *shlex.split(_make_var(env, "BPF_CFLAGS")),
           "-fsyntax-only", "-x", "c", "-"]
    headers = sorted(glob.glob(os.path.join(env.root, "bpf", "*.h")))
    assert headers
    bad = []
    for path in headers:
        name = os.path.basename(path)
        src = '#include "vmlinux.h"\n' if name in BPF_SHARED_HDRS else ""
        src += f'#include "{name}"\n#include "{name}"\n'
        p = subprocess.run(cmd, input=src, cwd=env.root, capture_output=True, text=True,
                           timeout=120)
        if p.returncode:
            bad.append(f"bpf/{name}:\n{p.stderr[-1500:]}")
    assert not bad, "headers that do not compile alone:\n" + "\n".join(bad)


# user/'s layers, lowest first: a file may include its own layer's headers
# and those of layers below it, never above (README, Layout).
LAYERS = ["lib", "model", "stacks", "rec", "attach", "export", "guard", "guardd", "cmd"]
MAX_LINES = 800
MAX_FILES = 25


def _user_files(env):
    import glob
    import os
    return sorted(glob.glob(os.path.join(env.root, "user", "*", "*.[ch]")))


def test_layers_only_point_down(env):
    """Every include in user/ names a layer at or below the includer's,
    and every file sits in a known layer. The headers bpf/ shares with
    user space (umtrace.h, cookie.h) and the generated skeletons may be
    included anywhere."""
    import os
    import re
    bad = []
    for path in _user_files(env):
        layer = os.path.basename(os.path.dirname(path))
        assert layer in LAYERS, f"{path}: not in a layer folder"
        with open(path) as f:
            for n, line in enumerate(f, 1):
                m = re.match(r'\s*#\s*include\s+"([a-z]+)/', line)
                if m and m.group(1) in LAYERS and \
                        LAYERS.index(m.group(1)) > LAYERS.index(layer):
                    bad.append(f"{os.path.relpath(path, env.root)}:{n}: {line.strip()}")
                bare = re.match(r'\s*#\s*include\s+"([^"/]+)"', line)
                if bare and not bare.group(1).endswith(".skel.h") and \
                        bare.group(1) not in ("umtrace.h", "cookie.h"):
                    bad.append(f"{os.path.relpath(path, env.root)}:{n}: no layer in "
                               f"{line.strip()}")
    assert not bad, "includes that point up or name no layer:\n" + "\n".join(bad)


def test_files_and_folders_stay_small(env):
    """No source file over 800 lines (BPF included), no folder over 25 files."""
    import glob
    import os
    files = _user_files(env) + sorted(glob.glob(os.path.join(env.root, "bpf", "*.[ch]")))
    long = []
    for path in files:
        with open(path) as f:
            n = sum(1 for _ in f)
        if n > MAX_LINES:
            long.append(f"{os.path.relpath(path, env.root)}: {n} lines")
    assert not long, "\n".join(long)
    for d in [os.path.join(env.root, "user", l) for l in LAYERS] + \
            [os.path.join(env.root, "bpf")]:
        n = len([f for f in os.listdir(d) if os.path.isfile(os.path.join(d, f))])
        assert n <= MAX_FILES, f"{d}: {n} files"
