# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Debian's real PyTorch, not the fake libc10: bookworm's python3-torch
1.13.1 (this host's own) and trixie's 2.6.0 (CPU, in the root
scripts/fetch-torch.sh builds with mmdebstrap, run in a chroot), each a
`python3 -c 'import torch ...'` job; and the libc10 files of the 2.6 CUDA
build (amd64) and of 2.6 and 1.13 for arm64, read but not run.

No GPU here, but CPU tensors call the same hook while the memory profiler
is on (torch.profiler.profile(profile_memory=True)), with the device
{CPU, -1}: the product counts CUDA devices only and says so, and a
test-only variable (UMTRACE_TEST_ONLY_TORCH_CPU=1, no option) makes the
hook count them as device 0, so that its figures can be checked against
what the job counts itself, call for call and byte for byte.

scripts/install-deps.sh --test installs and fetches all of it; what is
missing says SKIP and why."""
import glob
import json
import os
import re
import shutil
import subprocess

from harness import Skip, interrupt, readline, wait_line

HOOK = "_ZN3c1027reportMemoryUsageToProfilerEPvl"
# The forms Debian's builds export (nm -D): int64_t totals, then size_t.
FORMS = {"1.13": HOOK + "llNS_6DeviceE", "2.6": HOOK + "mmNS_6DeviceE"}
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                     "umtrace", "torch")
TEST_CPU = "UMTRACE_TEST_ONLY_TORCH_CPU"
N, KEEP = 1000, 10		# allocations in the job, and how many outlive it

# The job: N CPU tensors of growing sizes under the memory profiler, all
# freed at once but every (N / KEEP)th; its own counts to argv[3]. With a
# 4th argument it says "ready" after `import torch` and waits for a line.
JOB = r"""
import json, os, sys, torch
from torch.profiler import profile
n, keep, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
if len(sys.argv) > 4:
    print("ready", flush=True)
    if sys.stdin.readline() != "go\n":
        sys.exit(3)
kept, c = [], dict(allocs=0, frees=0, bytes=0, live=0, peak=0)
with profile(profile_memory=True):
    for i in range(n):
        t = torch.empty(64 + i, dtype=torch.float32)
        b = t.element_size() * t.numel()
        c["allocs"] += 1
        c["bytes"] += b
        c["live"] += b
        c["peak"] = max(c["peak"], c["live"])
        if i % (n // keep) == 0:
            kept.append(t)
        else:
            c["frees"] += 1
            c["live"] -= b
        del t
c.update(pid=os.getpid(), version=torch.__version__)
with open(out, "w") as f:
    json.dump(c, f)
"""


class Build:
    """A real PyTorch that runs here: how to start its python3, where its
    libc10 is (on the host's side), the form of the hook it exports."""

    def __init__(self, version, root=None):
        self.version, self.root = version, root
        lib = "/usr/lib/x86_64-linux-gnu/libc10.so." + version + ".0"
        self.libc10 = (root or "") + lib
        self.form = FORMS[version]

    def argv(self, *args):
        py = ["/usr/bin/python3", "-c", JOB, *map(str, args)]
        if not self.root:
            return py
        # Its own mount namespace: a /proc for the root, gone with the job.
        return ["unshare", "-m", "--propagation", "private", "sh", "-c",
                'mount -t proc proc "$0/proc" && exec chroot "$0" "$@"', self.root, *py]

    def lib_re(self):
        """Its libc10 as umtrace names it: the linker cache's name
        (/lib/...so.1.13) or the file a process maps (.../usr/lib/...so.2.6.0)."""
        return r"%s(/usr)?/lib/x86_64-linux-gnu/libc10\.so\.%s(\.0)?" % (
            re.escape(self.root or ""), re.escape(self.version))

    def truth_path(self, env, name):
        """(the path the job writes, the same file seen from here)."""
        inner = env.tmpfile(name)
        return inner, (self.root or "") + inner


def build(version):
    if version == "1.13":
        b = Build("1.13")
        if not os.path.exists(b.libc10) or not os.path.exists("/usr/bin/python3"):
            raise Skip("no python3-torch 1.13 (scripts/install-deps.sh --test installs it)")
        return b
    b = Build("2.6", os.path.join(CACHE, "trixie-amd64"))
    if not os.path.exists(b.libc10):
        raise Skip(f"no trixie root with PyTorch 2.6 in {b.root} (scripts/fetch-torch.sh)")
    if not shutil.which("unshare"):
        raise Skip("unshare not installed")
    return b


def read_truth(path):
    try:
        with open(path) as f:
            return json.load(f)
    finally:
        os.unlink(path)


def run_report(env, b, extra=(), test_cpu=False, n=None):
    """`umtrace report -v [extra] -- JOB`: (stdout, stderr, the job's counts)."""
    inner, outer = b.truth_path(env, f"real-torch-{b.version}.json")
    penv = {k: v for k, v in os.environ.items() if k != TEST_CPU}
    if test_cpu:
        penv[TEST_CPU] = "1"
    p = env.popen([env.umtrace, "report", "-v", "--libcuda", env.fake, *extra, "--",
                   *b.argv(n or N, KEEP, inner)], env=penv)
    try:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-1500:]
        return out, err, read_truth(outer)
    finally:
        if os.path.exists(outer):	# in the cached root: no harness cleans it
            os.unlink(outer)


def objects(text):
    return [o for o in (json.loads(l) for l in text.splitlines() if l.startswith("{"))
            if o.get("event") == "torch_allocator"]


def check_discovery(env, version):
    """`import torch` with no --libc10: its libc10 found and probed (the
    2.6 root's in the job's maps, through /proc/PID/root, as the loader
    maps it), the form of the hook named by -v."""
    b = build(version)
    out, err, truth = run_report(env, b, ["--json"])
    assert truth["version"].startswith(version), truth
    lib = b.lib_re()
    if b.root:
        assert re.search(r"found %s mapped by pid %d" % (lib, truth["pid"]), err), err[-3000:]
    assert re.search(r"probing PyTorch's allocator hook \(1 form\) in %s\n" % lib, err), \
        err[-3000:]
    assert re.search(r"%s: PyTorch's allocator hook, %s: with the allocator's totals" %
                     (lib, re.escape(b.form)), err), err[-3000:]
    print(f"    PyTorch {truth['version']}: {b.form[len(HOOK) - 1:]} probed")


def check_figures(env, version):
    """With the test-only switch, the hook's figures for the job's CPU
    tensors equal its own counts: allocations, frees (the calls, exactly),
    the bytes live at the end and their peak; reserved 0 (the CPU
    allocator reports none)."""
    b = build(version)
    out, err, truth = run_report(env, b, ["--json", "--libc10-every-call"], test_cpu=True)
    assert f"TEST ONLY: {TEST_CPU}=1" in err, err[-1500:]
    objs = [o for o in objects(out) if o["pid"] == truth["pid"]]
    assert len(objs) == 1, (objs, err[-1500:])
    o = objs[0]
    assert (o["allocs"], o["frees"]) == (truth["allocs"], truth["frees"]), (o, truth)
    assert o["allocated"] == truth["live"] and o["peak_allocated"] == truth["peak"], (o, truth)
    assert o["reserved"] == 0 and o["exited"], o
    print(f"    PyTorch {truth['version']}: {o['allocs']} allocations and {o['frees']} frees "
          f"seen, {truth['allocs']} and {truth['frees']} made; {o['allocated']} bytes live, "
          f"peak {o['peak_allocated']}")


def check_windowed(env, version):
    """The same job with the hook in windows (the default): the real
    library's hook attached and detached by the window's calls (at least
    one window closed with its budget taken from the job's 39,990 calls),
    fewer seen than made, the counts marked as the windows'."""
    b = build(version)
    out, err, truth = run_report(env, b, ["--json"], test_cpu=True, n=20 * N)
    m = re.search(r"hook: \d+ windows \(\d+ for its segments' moves, (\d+) closed with "
                  r"their \d+ calls taken\)", err)
    assert m and int(m.group(1)) >= 1, err[-1500:]
    objs = [o for o in objects(out) if o["pid"] == truth["pid"]]
    assert len(objs) == 1, (objs, err[-1500:])
    o, made = objs[0], truth["allocs"] + truth["frees"]
    assert o["counts_windowed"] and 0 < o["allocs"] + o["frees"] < made, (o, truth)
    print(f"    PyTorch {truth['version']}: {o['allocs'] + o['frees']} of {made} calls seen "
          "in the hook's windows")


def unseen_line(b, calls):
    return re.compile(r"PyTorch's allocator hook probed in [^\n]*%s[^\n]*: %d calls, none "
                      r"for a CUDA device" % (b.lib_re(), calls))


def check_no_row(env, version):
    """Without the switch, a CPU-only job has no allocator row, object or
    verdict, and report says why: the hook probed, its N calls (every one
    the job made) none for a CUDA device."""
    b = build(version)
    out, err, truth = run_report(env, b, ["--libc10-every-call"])
    calls = truth["allocs"] + truth["frees"]
    assert "PyTorch's caching allocator, per process" not in out, out[-2000:]
    assert unseen_line(b, calls).search(out), out[-2000:]
    out, err, truth = run_report(env, b, ["--json"])
    assert not objects(out), out[-2000:]
    assert "verdict" not in out, out[-2000:]


def check_top(env, version):
    """top beside a CPU-only job (-p its pid): no allocator columns for it,
    and the line that says the hook saw only other devices."""
    b = build(version)
    inner, outer = b.truth_path(env, f"real-torch-top-{b.version}.json")
    penv = {k: v for k, v in os.environ.items() if k != TEST_CPU}
    job = env.popen(b.argv(N, KEEP, inner, "wait"), stdin=subprocess.PIPE, env=penv)
    top = None
    try:
        assert readline(job.stdout, 120, "the job's ready") == "ready\n"
        top = env.popen([env.umtrace, "top", "-b", "-i", "500ms", "-p", str(job.pid),
                         "--libcuda", env.fake, "--libc10-every-call"], env=penv)
        wait_line(top.stderr, "probing PyTorch's allocator hook", 60)
        job.stdin.write("go\n")
        job.stdin.close()
        assert job.wait(timeout=120) == 0, job.stderr.read()[-1500:]
        truth = read_truth(outer)
        line, seen = wait_line(top.stdout, "none for a CUDA device", 30)
        assert unseen_line(b, truth["allocs"] + truth["frees"]).search(line), line
        assert "ALLOCATED" not in seen, seen[-2000:]
    finally:
        interrupt(top)
        if os.path.exists(outer):
            os.unlink(outer)


def test_real_torch_discovery_1_13(env):
    check_discovery(env, "1.13")


def test_real_torch_discovery_2_6(env):
    check_discovery(env, "2.6")


def test_real_torch_cpu_figures_exact_1_13(env):
    check_figures(env, "1.13")


def test_real_torch_cpu_figures_exact_2_6(env):
    check_figures(env, "2.6")


def test_real_torch_cpu_windowed_1_13(env):
    check_windowed(env, "1.13")


def test_real_torch_cpu_windowed_2_6(env):
    check_windowed(env, "2.6")


def test_real_torch_cpu_job_has_no_row_1_13(env):
    check_no_row(env, "1.13")


def test_real_torch_cpu_job_has_no_row_2_6(env):
    check_no_row(env, "2.6")


def test_real_torch_top_says_no_cuda_device_1_13(env):
    check_top(env, "1.13")


def test_real_torch_top_says_no_cuda_device_2_6(env):
    check_top(env, "2.6")


def cached_lib(pkg, arch, name):
    paths = sorted(glob.glob(os.path.join(CACHE, "libs", f"{pkg}-{arch}", "*", "usr", "lib",
                                          "*", name)))
    if not paths:
        raise Skip(f"no {pkg}:{arch} in {CACHE}/libs (scripts/fetch-torch.sh)")
    return paths[-1]


def tool(name):
    path = shutil.which(name)
    if not path:
        raise Skip(f"{name} not installed (binutils)")
    return path


def hook_names(path, defined=True):
    """The hook's names in path's dynamic symbols (nm -D), defined or undefined."""
    p = subprocess.run([tool("nm"), "-D", "--defined-only" if defined else "--undefined-only",
                        path], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return [l.split()[-1].split("@")[0] for l in p.stdout.splitlines() if HOOK in l]


def test_real_torch_forms_every_build(env):
    """Each real libc10 exports one form of the hook, the one its version
    should (nm -D): 1.13.1 `...EPvlllNS_6DeviceE`, 2.6.0 `...EPvlmmNS_6DeviceE`,
    on amd64 and arm64, the CUDA build's too. umtrace's own ELF reader
    names that very form in every amd64 file (-v), and refuses the arm64
    files by their machine, not by their symbols."""
    files = [(cached_lib("libtorch-cuda-2.6", "amd64", "libc10.so.2.6.0"), "2.6", True),
             (cached_lib("libtorch2.6", "arm64", "libc10.so.2.6.0"), "2.6", False),
             (cached_lib("libtorch1.13", "arm64", "libc10.so.1.13.0"), "1.13", False)]
    for version in FORMS:
        try:
            files.append((build(version).libc10, version, True))
        except Skip as e:
            print(f"    {e}")
    for path, version, native in files:
        assert hook_names(path) == [FORMS[version]], (path, hook_names(path))
        p = subprocess.run([env.umtrace, "report", "-v", "-d", "200ms", "--libcuda", env.fake,
                            "--libc10", path], capture_output=True, text=True, timeout=120)
        if native:
            assert p.returncode == 0, p.stderr[-1500:]
            assert f"{path}: PyTorch's allocator hook, {FORMS[version]}: with the " \
                   "allocator's totals" in p.stderr, p.stderr[-3000:]
        else:
            assert p.returncode != 0 and f"{path}: ELF file for another architecture" in \
                p.stderr, p.stderr[-1500:]
        print(f"    {os.path.relpath(path, CACHE) if path.startswith(CACHE) else path}: "
              f"{FORMS[version][len(HOOK) - 1:]}")


def call_sites(dis, callee):
    """The instructions before each call of callee in objdump's text."""
    lines = [l.split("\t", 1)[-1].strip() for l in dis.splitlines() if "\t" in l]
    return [lines[max(0, i - 12):i] for i, l in enumerate(lines)
            if l.startswith("call") and f"<{callee}@plt>" in l]


def test_real_torch_cuda_build_calls_the_hook(env):
    """PyTorch 2.6's CUDA build (Debian's libtorch-cuda-2.6, amd64): its
    libc10 defines the form umtrace probes and libc10_cuda.so, the CUDA
    caching allocator, imports it and calls it twice, a block's
    allocation and its free (the size negated), the device in the 5th
    argument (r8) built as (index << 8) | 1: CUDA's type in the low byte,
    which is what bpf/torch.bpf.c admits."""
    c10 = cached_lib("libtorch-cuda-2.6", "amd64", "libc10.so.2.6.0")
    cuda = cached_lib("libtorch-cuda-2.6", "amd64", "libc10_cuda.so.2.6.0")
    form = FORMS["2.6"]
    assert hook_names(c10) == [form], hook_names(c10)
    assert hook_names(cuda, defined=False) == [form], hook_names(cuda, defined=False)
    p = subprocess.run([tool("objdump"), "-d", "--no-show-raw-insn", cuda],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    sites = call_sites(p.stdout, form)
    assert len(sites) == 2, [s[-3:] for s in sites]
    for before in sites:
        text = "\n".join(before)
        shifted = "shl    $0x8,%r8d" in text and "or     $0x1,%r8d" in text
        high_byte = "mov    $0x1,%eax" in text and ",%ah" in text and "mov    %eax,%r8d" in text
        assert shifted or high_byte, text
    assert sum("neg    %rsi" in "\n".join(s) for s in sites) == 1, sites
    print(f"    {os.path.basename(cuda)}: 2 calls of {form}, device (index << 8) | 1")
