# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""umtrace record and umtrace report FILE: a recording reports what a live
report of the same run reports, survives damage and a killed recorder,
stays small, and its reader survives a fuzzer."""
import glob
import json
import os
import resource
import shutil
import signal
import struct
import subprocess
import time
import zlib

from harness import Skip, wait_line

MIB = 1 << 20
HDR_SIZE = 172
CHUNK_HDR = 24


def _attached(p, what, timeout=30):
    """Wait for the one line saying the probes are attached."""
    wait_line(p.stderr, "probing", timeout, f"'probing' line: {what} did not attach")


def _objs(text):
    return [json.loads(l) for l in text.splitlines() if l.startswith("{")]


def _report_file(env, path, extra=(), timeout=60):
    p = subprocess.run([env.umtrace, "report", "--json", *extra, path],
                       capture_output=True, text=True, timeout=timeout)
    objs = _objs(p.stdout)
    return p, [o for o in objs if o["event"] == "callsite"], \
        next((o for o in objs if o["event"] == "totals"), None), \
        next((o for o in objs if o["event"] == "recording"), None)


def _record_cmd(env, path, workload, extra=(), timeout=120):
    p = subprocess.run([env.umtrace, "record", "-o", path, "--libcuda", env.fake, *extra, "--",
                        *workload], capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stderr[-800:]
    return p


def _chunks(data):
    """(offset, total size, flags) of each chunk, as the format says."""
    out, off = [], HDR_SIZE
    while off + CHUNK_HDR <= len(data):
        magic, seq, raw, comp, flags, crc = struct.unpack_from("<4sIIIII", data, off)
        assert magic == b"UMTC" and seq == len(out), (off, magic, seq)
        out.append((off, CHUNK_HDR + comp, flags))
        off += CHUNK_HDR + comp
    assert off == len(data), "trailing bytes"
    return out


def test_record_matches_live_report(env):
    """record -p and report -p on the same run: report FILE says exactly
    what the live report said (every call site, totals)."""
    path = env.tmpfile("rt.umt")
    job = env.popen([env.alloc_mix, "-d", "1500", "-t", "2", "-n", "25", "-s", "1M",
                     "-a", "alloc,hostalloc,vmm,managed,register,async", "-k", "-o", "/dev/null"])
    t0 = time.monotonic()
    rec = env.popen([env.umtrace, "record", "-o", path, "--libcuda", env.fake,
                     "-p", str(job.pid), "-i", "100ms"])
    live = env.popen([env.umtrace, "report", "--json", "--libcuda", env.fake,
                      "-p", str(job.pid)])
    _attached(rec, "record")
    _attached(live, "report")
    assert time.monotonic() - t0 < 1.4, "attached too late for the workload's first call"
    job.wait(timeout=60)
    rout, rerr = rec.communicate(timeout=60)
    lout, lerr = live.communicate(timeout=60)
    assert rec.returncode == 0, rerr
    assert live.returncode == 0, lerr
    lobjs = _objs(lout)
    lsites = [o for o in lobjs if o["event"] == "callsite"]
    ltotals = [o for o in lobjs if o["event"] == "totals"][0]
    p, fsites, ftotals, info = _report_file(env, path)
    assert p.returncode == 0 and not p.stderr, p.stderr
    assert ltotals["records"] == sum(s["calls"] for s in lsites) >= 2 * 25 * 8, ltotals
    assert fsites == lsites, "call sites differ:\n%s\n%s" % (fsites[:2], lsites[:2])
    assert ftotals == ltotals, (ftotals, ltotals)
    assert sum(s["freed_at_exit"] for s in fsites) > 0, "the leak shows"
    assert info["complete"] and info["exits"] == 1 and info["samples"] >= 10, info
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    # the text form reads the same file
    p = subprocess.run([env.umtrace, "report", path], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and p.stdout.startswith(f"recording {path}: host "), p.stdout[:300]
    assert "am_alloc_vmm" in p.stdout


def test_record_keeps_device_node_bytes(env):
    """Pages from --device-nodes survive a recording: report FILE gives the
    site the device-node bytes the live report gives, none as host bytes.
    Node 0 is this VM's only node: every page of the calls is on it."""
    wl = [env.alloc_mix, "-n", "3", "-s", "8M", "-a", "alloc", "-F", "-o", "/dev/null"]
    path = env.tmpfile("dev.umt")
    _record_cmd(env, path, wl, extra=["--device-nodes", "0"])
    p, fsites, _, _ = _report_file(env, path)
    assert p.returncode == 0, p.stderr
    live = subprocess.run([env.umtrace, "report", "--json", "--libcuda", env.fake,
                           "--device-nodes", "0", "--", *wl],
                          capture_output=True, text=True, timeout=60)
    assert live.returncode == 0, live.stderr
    lsites = [o for o in _objs(live.stdout) if o["event"] == "callsite"]
    for sites in (fsites, lsites):
        s = [s for s in sites if s["api"] == "cuMemAlloc_v2"]
        assert len(s) == 1, sites
        assert s[0]["host_bytes"] == 0, s
        assert abs(s[0]["device_node_bytes"] - 24 * MIB) <= 24 * MIB * 0.02, s
    txt = subprocess.run([env.umtrace, "report", path], capture_output=True, text=True,
                         timeout=60)
    assert "from device nodes (not host RAM)" in txt.stdout, txt.stdout[:600]


def test_record_verbose_says_what_symbols_cost(env):
    """-v says how the call sites' frames were named: from the per-file
    cache, looked up, evicted to stay under the cache's cap, and how often
    a process's maps were read; the same frames again come from the cache."""
    import re
    path = env.tmpfile("sym.umt")
    p = _record_cmd(env, path, [env.alloc_mix, "-n", "20", "-s", "1M", "-a", "alloc",
                                "-o", "/dev/null"], extra=["-v"])
    assert p.returncode == 0, p.stderr
    m = re.search(r"^umtrace: symbols: (\d+) frames answered from the cache, (\d+) looked "
                  r"up, (\d+) evicted, (\d+) reads of a process's maps$", p.stderr, re.M)
    assert m, p.stderr[-2000:]
    hits, misses, evicted, reads = map(int, m.groups())
    # 20 calls from one site: its frames are looked up once, then cached.
    assert misses >= 1 and hits >= misses and evicted == 0 and reads >= 1, m.group(0)


def test_record_damaged_files(env):
    """Cut or flipped: the good prefix is read with a one-line warning
    (exit 0); not a recording, or a future version: one-line error (exit 1)."""
    full = env.tmpfile("full.umt")
    # ~3 s of calls: a chunk a second
    _record_cmd(env, full, [env.alloc_mix, "-n", "30000", "-s", "64K", "-a", "alloc", "-F",
                            "-o", "/dev/null"], extra=["--stack", "fp"])
    data = open(full, "rb").read()
    chunks = _chunks(data)
    assert len(chunks) >= 3 and chunks[-1][2] == 1, chunks
    _, _, totals, info = _report_file(env, full)
    all_calls = totals["records"]
    # a slow build (SANITIZE=1) may lose records to a full ring buffer
    assert info["complete"] and all_calls + totals["dropped"] >= 60000, (info, totals)

    work = env.tmpfile("damaged.umt")
    second = chunks[1][0]
    flipped = bytearray(data)
    flipped[second + CHUNK_HDR + 5] ^= 0x10
    cases = [
        # name, bytes, exit code, text on stderr, calls at most
        ("header cut", data[:100], 1, "cut short inside its header", 0),
        ("chunk boundary", data[:second], 0, "no end mark", all_calls),
        ("inside a chunk", data[:second + 40], 0, "lost", all_calls),
        ("before the end mark", data[:chunks[-1][0]], 0, "no end mark", all_calls),
        ("flipped byte", bytes(flipped), 0, "checksum mismatch", all_calls),
        ("empty", b"", 1, "empty file", 0),
        ("not a recording", b"hello, I am a text file\n" * 20, 1, "not a umtrace recording", 0),
        ("future version", data[:8] + struct.pack("<I", 7) + data[12:], 1,
         "format version 7", 0),
    ]
    failures = []
    for name, blob, code, text, most in cases:
        with open(work, "wb") as f:
            f.write(blob)
        try:
            p, sites, totals, info = _report_file(env, work, timeout=30)
        except subprocess.TimeoutExpired:
            failures.append(f"{name}: hung")
            continue
        err = p.stderr.strip().splitlines()
        if p.returncode != code:
            failures.append(f"{name}: exit {p.returncode}, expected {code}: {p.stderr}")
        elif len(err) != 1 or text not in err[0] or not err[0].startswith("umtrace: "):
            failures.append(f"{name}: stderr {err!r}, expected one line with {text!r}")
        elif code == 0:
            n = sum(s["calls"] for s in sites)
            if n != totals["records"] or n > most or info["complete"]:
                failures.append(f"{name}: {n} calls, totals {totals}, {info}")
            if info["bytes"] + info["lost_bytes"] != len(blob):
                failures.append(f"{name}: bytes not all accounted for: {info}")
            print(f"    {name}: {n} of {all_calls} calls read; {err[0]}")
        elif p.stdout:
            failures.append(f"{name}: wrote to stdout on error: {p.stdout[:200]!r}")
    assert not failures, "\n".join(failures)


def test_record_survives_kill9(env):
    """kill -9 the recorder mid-run: the file reads, up to about a second
    before the kill."""
    path = env.tmpfile("killed.umt")
    # Calls until it is killed, however fast this machine makes them.
    job = env.popen([env.alloc_mix, "-d", "500", "-n", "100000000", "-s", "64K", "-a",
                     "alloc", "-F", "-o", "/dev/null"])
    rec = env.popen([env.umtrace, "record", "-o", path, "--libcuda", env.fake,
                     "-p", str(job.pid)])
    _attached(rec, "record")
    # Mid-run: the recorder has written a chunk, and another since.
    deadline = time.monotonic() + 60
    sizes = set()
    while len(sizes - {0}) < 2:
        assert time.monotonic() < deadline, f"the recording did not grow: sizes {sizes}"
        assert job.poll() is None, "the workload ended before the kill"
        sizes.add(os.path.getsize(path) if os.path.exists(path) else 0)
        time.sleep(0.05)
    rec.send_signal(signal.SIGKILL)
    killed_ns = time.monotonic_ns()
    rec.wait(timeout=10)
    job.kill()
    job.wait(timeout=30)
    p, sites, totals, info = _report_file(env, path)
    assert p.returncode == 0, p.stderr
    assert "no end mark" in p.stderr or "lost" in p.stderr, p.stderr
    assert totals["records"] > 1000, totals
    gap = (killed_ns - info["last_ns"]) / 1e9
    print(f"    {totals['records']} calls read; the last record {gap:.2f} s before the kill")
    assert 0 <= gap < 1.5, f"last record {gap:.2f} s before the kill"


def test_record_size_and_cost(env):
    """100,000 calls: bytes per call on disk, the recorder's CPU, and how
    long report takes on the file."""
    path = env.tmpfile("size.umt")
    job = env.popen([env.alloc_mix, "-d", "1000", "-n", "50000", "-s", "64K", "-a", "alloc",
                     "-F", "-o", "/dev/null"])
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    rec = env.popen([env.umtrace, "record", "-o", path, "--libcuda", env.fake,
                     "-p", str(job.pid)])
    _attached(rec, "record")
    # the workload is not reaped before the recorder: the rusage delta is the recorder's
    out, err = rec.communicate(timeout=120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    job.wait(timeout=30)
    assert rec.returncode == 0, err
    cpu_user = after.ru_utime - before.ru_utime
    cpu_sys = after.ru_stime - before.ru_stime
    t = time.monotonic()
    p, sites, totals, info = _report_file(env, path)
    report_s = time.monotonic() - t
    assert p.returncode == 0, p.stderr
    size = os.path.getsize(path)
    calls = totals["records"]
    # dropped counts raw stack records too; a slow build (SANITIZE=1) loses some
    assert calls <= 100000 <= calls + totals["dropped"], totals
    per_call = size / calls
    print(f"    {calls} calls, {size} bytes: {per_call:.1f} bytes per call")
    print(f"    recorder CPU: {cpu_user:.2f} s user + {cpu_sys:.2f} s system "
          f"({(cpu_user + cpu_sys) * 1e6 / calls:.1f} us per call)")
    print(f"    report on the file: {report_s:.2f} s")
    assert per_call < 64, f"{per_call:.1f} bytes per call"


def test_record_disk_full(env):
    """ENOSPC: one warning, the file reads up to its last chunk, exit 1."""
    if not shutil.which("unshare") or not shutil.which("mount"):
        raise Skip("unshare(1) or mount(8) missing")
    out = env.tmpfile("full-disk.umt")
    script = (f"mount -t tmpfs -o size=128k umt-test /mnt && "
              f"{env.umtrace} record -o /mnt/r.umt --libcuda {env.fake} -- "
              f"{env.alloc_mix} -n 50000 -s 64K -a alloc -F -o /dev/null; rc=$?; "
              f"cp /mnt/r.umt {out}; exit $rc")
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                       capture_output=True, text=True, timeout=120)
    if "mount:" in p.stderr and not os.path.exists(out):
        raise Skip(f"cannot mount a tmpfs here: {p.stderr.strip()[:200]}")
    assert p.returncode == 1, (p.returncode, p.stderr)
    warnings = [l for l in p.stderr.splitlines() if "No space left on device" in l]
    assert len(warnings) == 1 and "warning: /mnt/r.umt" in warnings[0], p.stderr
    p, sites, totals, info = _report_file(env, out)
    assert p.returncode == 0 and totals["records"] > 1000, (p.stderr, totals)
    assert not info["lost_bytes"], info
    print(f"    {totals['records']} calls in {info['bytes']} bytes before the disk was full")


def test_record_cli(env):
    """Usage errors: one line, exit 2; an existing file: exit 1 without --force."""
    path = env.tmpfile("cli.umt")
    with open(path, "w") as f:
        f.write("precious")
    nothing = env.tmpfile("never.umt")
    gone = _gone_pid()
    cases = [
        (["record"], 2, "-o FILE is required"),
        (["record", "-o", path, "extra"], 2, "unexpected argument 'extra'"),
        (["record", "-o", path, "-i", "10ms"], 2, "invalid --interval '10ms'"),
        (["record", "-o", path, "--stack", "x"], 2, "invalid --stack 'x'"),
        (["record", "-o", path, "-p", "1", "--", "true"], 2, "either -p PID or a COMMAND"),
        (["record", "-o", path, "--bogus"], 2, "unknown option '--bogus'"),
        (["record", "-o", path, "--libcuda", env.fake, "--", "true"], 1, "file exists"),
        (["record", "-o", nothing, "--libcuda", env.fake, "-p", str(gone)], 1,
         f"no process with pid {gone}"),
        (["report", "--libcuda", env.fake, path], 2, "--libcuda applies to tracing"),
        (["report", "-d", "5s", path], 2, "--duration applies to tracing"),
        (["report", path, "other"], 2, "unexpected argument 'other'"),
        (["report", path], 1, "not a umtrace recording"),
        (["report", env.tmpfile("missing.umt")], 1, "No such file"),
    ]
    failures = []
    for argv, code, text in cases:
        p = subprocess.run([env.umtrace, *argv], capture_output=True, text=True, timeout=20,
                           stdin=subprocess.DEVNULL)
        err = p.stderr.strip().splitlines()
        if p.returncode != code or len(err) != 1 or text not in err[0]:
            failures.append(f"{argv}: exit {p.returncode}, stderr {err!r}; expected {code}, {text!r}")
    assert open(path).read() == "precious", "overwritten without --force"
    if os.path.exists(nothing):
        failures.append("a recording that never started was left behind")
    p = subprocess.run([env.umtrace, "record", "--help"], capture_output=True, text=True)
    if not p.stdout.startswith("usage: umtrace record"):
        failures.append(f"record --help: {p.stdout[:100]!r}")
    # --force replaces it, atomically, with a recording
    _record_cmd(env, path, [env.alloc_mix, "-n", "2", "-s", "1M", "-a", "alloc", "-F", "-o",
                            "/dev/null"], extra=["--force"])
    p, sites, totals, info = _report_file(env, path)
    if p.returncode or totals["records"] != 4 or not info["complete"]:
        failures.append(f"--force: {p.stderr} {totals}")
    if glob.glob(path + ".*"):
        failures.append(f"temporary files left: {glob.glob(path + '.*')}")
    assert not failures, "\n".join(failures)


def _gone_pid():
    pid_max = int(open("/proc/sys/kernel/pid_max").read())
    for pid in range(pid_max - 1, 1, -1):
        if not os.path.exists(f"/proc/{pid}"):
            return pid
    raise Skip("no free pid")


def _fuzz_seeds(env, corpus):
    """A small real recording, and its chunks' raw records (inputs starting with 0)."""
    rec = env.tmpfile("seed.umt")
    _record_cmd(env, rec, [env.alloc_mix, "-t", "2", "-n", "2", "-s", "1M",
                           "-a", "alloc,hostalloc,vmm,managed", "-k", "-o", "/dev/null"])
    data = open(rec, "rb").read()
    shutil.copy(rec, os.path.join(corpus, "recording"))
    for i, (off, size, _) in enumerate(_chunks(data)):
        raw = zlib.decompress(data[off + CHUNK_HDR:off + size])
        with open(os.path.join(corpus, f"raw-chunk-{i}"), "wb") as f:
            f.write(b"\0" + raw)
    for p in glob.glob(os.path.join(env.root, "tests", "fuzz", "corpus", "*")):
        shutil.copy(p, corpus)


def test_record_fuzz(env):
    """The libFuzzer target over the recording reader, 20 s: no crash."""
    if not shutil.which("clang"):
        raise Skip("clang not installed")
    binary = os.path.join(env.out, "tests", "fuzz", "fuzz_recording")
    p = subprocess.run(["make", "-s", "-C", env.root, "-f", "tests/fuzz/fuzz.mk",
                        f"OUT={env.out}", binary], capture_output=True, text=True, timeout=300)
    if p.returncode and "fuzzer" in p.stderr and "cannot find" in p.stderr:
        raise Skip(f"no libFuzzer (install libclang-rt-14-dev): {p.stderr.strip()[-200:]}")
    assert p.returncode == 0, p.stderr[-1500:]
    corpus = env.tmpfile("fuzz-corpus")
    shutil.rmtree(corpus, ignore_errors=True)
    os.makedirs(corpus)
    try:
        _fuzz_seeds(env, corpus)
        p = subprocess.run([binary, "-max_total_time=20", "-timeout=10", "-rss_limit_mb=2048",
                            "-print_final_stats=1", corpus],
                           capture_output=True, text=True, timeout=120, cwd=corpus)
        runs = [l for l in p.stderr.splitlines() if "number_of_executed_units" in l]
        crash = [l for l in p.stderr.splitlines()
                 if "ERROR:" in l or "runtime error" in l or "deadly signal" in l]
        assert p.returncode == 0 and not crash, "\n".join(p.stderr.splitlines()[-40:])
        n = runs[0].split(":")[-1].strip() if runs else "?"
        print(f"    {n} inputs run in 20 s from {len(os.listdir(corpus))} corpus entries, no crash")
    finally:
        shutil.rmtree(corpus, ignore_errors=True)
