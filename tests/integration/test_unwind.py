# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""DWARF unwinding: call stacks through code built without frame pointers.

nofp_chain calls main -> chain_a -> chain_b -> chain_c -> cuMemAlloc_v2,
all built with -O2 -fomit-frame-pointer. A frame-pointer walk cannot get
past chain_c; unwinding the stack copied at the entry probe with the call
frame information must name all four callers, in order."""
import json
import os
import re
import shutil
import subprocess

from harness import Skip

CHAIN = ["cuMemAlloc_v2", "chain_c", "chain_b", "chain_a", "main"]
FUNCS = ("chain_a", "chain_b", "chain_c", "main")


def _workload(env):
    path = os.path.join(env.tests, "nofp_chain")
    if not os.path.exists(path):
        raise Skip(f"{path} not built (run make test)")
    return path


def _report(env, extra, n=3):
    # -w: the process must still be there when its records are read
    argv = [env.umtrace, "report", "--json", "--libcuda", env.fake, *extra, "--",
            _workload(env), "-n", str(n), "-w", "300"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-800:]
    sites, totals = [], None
    for line in p.stdout.splitlines():
        if not line.startswith("{"):
            continue
        obj = json.loads(line)
        if obj["event"] == "callsite":
            sites.append(obj)
        elif obj["event"] == "totals":
            totals = obj
    return sites, totals, p.stderr


def _alloc_frames(sites):
    allocs = [s for s in sites if s["api"] == "cuMemAlloc_v2"]
    assert len(allocs) == 1, [s["stack"] for s in allocs]
    return allocs[0], [f.split("+")[0] for f in allocs[0]["stack"]]


def _symbols(path):
    out = subprocess.run(["readelf", "-sW", path], capture_output=True, text=True).stdout
    syms = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 8 and f[3] == "FUNC" and f[7] in FUNCS:
            syms[f[7]] = int(f[1], 16)
    return syms


def _cfa_rules(path):
    """{(lo, hi): [CFA rule, ...]} for every FDE, from readelf's table."""
    out = subprocess.run(["readelf", "-wF", path], capture_output=True, text=True).stdout
    fdes, cur = {}, None
    for line in out.splitlines():
        m = re.search(r"FDE cie=\w+ pc=([0-9a-f]+)\.\.([0-9a-f]+)", line)
        if m:
            cur = fdes.setdefault((int(m.group(1), 16), int(m.group(2), 16)), [])
            continue
        f = line.split()
        if not f:
            cur = None
        elif cur is not None and len(f) >= 2 and re.fullmatch(r"[0-9a-f]{16}", f[0]):
            cur.append(f[1])    # a row: LOC, then the CFA rule
    return fdes


def test_unwind_workload_has_no_frame_pointer(env):
    """The workload is what the test needs: CFI for every function of the
    chain, none of them using rbp as the frame base (readelf)."""
    path = _workload(env)
    if not shutil.which("readelf"):
        raise Skip("no readelf (binutils)")
    if os.uname().machine != "x86_64":
        raise Skip("the frame-pointer check reads x86-64 CFA rules")
    syms, fdes = _symbols(path), _cfa_rules(path)
    assert set(syms) == set(FUNCS), syms
    for name, addr in syms.items():
        rules = [r for (lo, hi), rs in fdes.items() if lo <= addr < hi for r in rs]
        assert rules, f"{name}: no CFI in .eh_frame"
        assert all(r.startswith("rsp+") for r in rules), f"{name} uses a frame pointer: {rules}"


def test_unwind_dwarf_names_every_caller(env):
    """--stack dwarf: cuMemAlloc_v2, chain_c, chain_b, chain_a, main, in
    that order, for every call."""
    sites, totals, err = _report(env, ["--stack", "dwarf"])
    site, frames = _alloc_frames(sites)
    assert frames[:len(CHAIN)] == CHAIN, site["stack"]
    assert site["calls"] == 3, site
    assert totals["dropped"] == 0, totals


def test_unwind_auto_is_default(env):
    """Without --stack, auto picks the DWARF stack where it says more."""
    sites, totals, _ = _report(env, [])
    site, frames = _alloc_frames(sites)
    assert frames[:len(CHAIN)] == CHAIN, site["stack"]
    # the free is called from main: still the whole way out of it
    free = [s for s in sites if s["api"] == "cuMemFree_v2"][0]
    assert [f.split("+")[0] for f in free["stack"]][:2] == ["cuMemFree_v2", "main"], free


def test_unwind_fp_cannot(env):
    """--stack fp on the same workload stops short: the DWARF test above
    proves something a frame-pointer walk does not."""
    sites, _, _ = _report(env, ["--stack", "fp"])
    site, frames = _alloc_frames(sites)
    assert frames[:2] == ["cuMemAlloc_v2", "chain_c"], site["stack"]
    assert not all(f in frames for f in CHAIN[2:]), site["stack"]


def test_unwind_many_calls(env):
    """Every call gets its own stack back (pairing by thread and entry
    time): a call left with its frame-pointer stack would make a site of
    its own."""
    # Room for all 500 raw stacks even if the reader stalls (a busy host,
    # ASan): past a quarter of the buffer a call keeps only its frame-pointer
    # stack, by design, and says so; that is not what this test is about.
    sites, totals, err = _report(env, ["-v", "--stack", "dwarf", "--ringbuf-size", "64M"],
                                 n=500)
    assert "kept only their frame-pointer stack" not in err, err
    allocs = [s for s in sites if s["api"] == "cuMemAlloc_v2"]
    # -v's stacks line says whether any was unwound to nothing, or lost its slot.
    assert len(allocs) == 1, ([s["stack"] for s in allocs],
                              [l for l in err.splitlines() if "stacks:" in l])
    site, frames = _alloc_frames(sites)
    assert site["calls"] == 500, site
    assert frames[:len(CHAIN)] == CHAIN, site["stack"]
    assert totals["dropped"] == 0 and totals["records"] == 1000, totals


def test_unwind_bad_stack_mode(env):
    p = subprocess.run([env.umtrace, "report", "--stack", "frames", "--", "true"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2, p
    assert "invalid --stack 'frames'" in p.stderr, p.stderr
