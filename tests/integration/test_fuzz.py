# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The libFuzzer targets over the parsers of input umtrace does not
control (tests/fuzz/): the guard's config file and flags, the /proc files
it reads, and the ELF files it takes entry points from. Each runs for a
bounded time (FUZZ_SECONDS, 10 by default) from its seeds plus a few made
here from this host; a crash, a sanitizer report, a leak or a timeout
fails. The recording reader's target runs in test_record.py."""
import os
import shutil
import subprocess

from harness import Skip

SECONDS = int(os.environ.get("FUZZ_SECONDS", "10"))


def build_fuzz_target(env, name):
    """tests/fuzz/fuzz.mk's build of fuzz_NAME; Skip where clang cannot."""
    if not shutil.which("clang"):
        raise Skip("clang not installed")
    binary = os.path.join(env.out, "tests", "fuzz", f"fuzz_{name}")
    p = subprocess.run(["make", "-s", "-C", env.root, "-f", "tests/fuzz/fuzz.mk",
                        f"OUT={env.out}", binary], capture_output=True, text=True, timeout=300)
    if p.returncode and "fuzzer" in p.stderr and "cannot find" in p.stderr:
        raise Skip(f"no libFuzzer (install libclang-rt-14-dev): {p.stderr.strip()[-200:]}")
    assert p.returncode == 0, p.stderr[-1500:]
    return binary


def run_fuzz_target(env, name, seconds, extra_seeds=()):
    """Build fuzz_NAME, run it seconds over a copy of tests/fuzz/corpus-NAME
    plus extra_seeds ((file name, bytes) pairs); assert it found nothing.
    Returns (executions, corpus entries at the end)."""
    binary = build_fuzz_target(env, name)
    corpus = env.tmpfile(f"fuzz-{name}")
    artifacts = env.tmpfile(f"fuzz-{name}-artifacts")
    for d in (corpus, artifacts):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    seeds = os.path.join(env.root, "tests", "fuzz", f"corpus-{name}")
    for f in os.listdir(seeds):
        shutil.copy(os.path.join(seeds, f), corpus)
    for fname, data in extra_seeds:
        with open(os.path.join(corpus, fname), "wb") as f:
            f.write(data)
    p = subprocess.run([binary, f"-max_total_time={seconds}", "-timeout=10",
                        "-rss_limit_mb=2048", "-print_final_stats=1",
                        f"-artifact_prefix={artifacts}/", corpus],
                       capture_output=True, text=True, timeout=seconds + 120, cwd=corpus)
    err = p.stderr.splitlines()
    found = [l for l in err if "ERROR:" in l or "runtime error" in l or "deadly signal" in l]
    kept = os.listdir(artifacts)
    assert p.returncode == 0 and not found and not kept, \
        f"fuzz_{name} found something (kept: {kept}):\n" + "\n".join(err[-40:])
    runs = [l.split(":")[-1].strip() for l in err if "number_of_executed_units" in l]
    n = int(runs[0]) if runs else 0
    assert n > 0, "\n".join(err[-20:])
    size = len(os.listdir(corpus))
    print(f"    fuzz_{name}: {n} inputs in {seconds} s, corpus {size}, no crash")
    return n, size


def _read(path, limit=1 << 20):
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError:
        return b""


def test_fuzz_config(env):
    """guard_config__load() on any file, guard_config__set() on any flag."""
    run_fuzz_target(env, "config", SECONDS)


def test_fuzz_proc(env):
    """meminfo__parse(), meminfo__parse_pcp() and libcuda.c's maps reader,
    seeded with this host's own files (the first byte picks the parser)."""
    run_fuzz_target(env, "proc", SECONDS, [
        ("host-meminfo", b"\0" + _read("/proc/meminfo")),
        ("host-zoneinfo", b"\1" + _read("/proc/zoneinfo")),
        ("host-maps", b"\2" + _read("/proc/self/maps")),
    ])


def test_fuzz_elf(env):
    """elf_syms__resolve() on broken ELF files, from the fake libcuda as
    built and /bin/true, whole and cut short."""
    fake = _read(env.fake, 1 << 22)
    true = _read("/bin/true", 1 << 22)
    seeds = [("fakecuda-built.so", fake)]
    for cut in (64, 1024, 4096, 16384):
        seeds.append((f"true-cut-{cut}", true[:cut]))
    seeds.append(("fakecuda-cut-half", fake[:len(fake) // 2]))
    run_fuzz_target(env, "elf", SECONDS, seeds)
