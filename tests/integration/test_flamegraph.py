# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""umtrace flamegraph and umtrace timeline on recordings made by `umtrace
record` of the fake libcuda: every format adds up to what `umtrace report
--json FILE` says of the same file, is read back by something that is not
umtrace, and bad input gets one line and the right exit code."""
import gzip
import json
import os
import re
import struct
import subprocess
import time
import xml.etree.ElementTree as ET
import zlib

import svgcheck
# the readers of tests/integration/test_export.py, shared
from test_export import SPEEDSCOPE_SCHEMA, SVG_NS, fields, frame_groups, ints, read_folded

PROC_RE = re.compile(r"^(.+) \((\d+)\)$")
FREE_APIS = {"cuMemFree_v2", "cuMemFree", "cuMemFreeHost", "cuMemHostUnregister",
             "cuMemFreeAsync", "cuMemFreeAsync_ptsz", "cuMemRelease", "cuMemUnmap",
             "cuMemAddressFree"}
# Address space and second views of memory: no GPU bytes of their own.
NOT_MEMORY = {"cuMemAddressReserve", "cuMemMap"}
WORKLOAD = ["-t", "2", "-n", "20", "-s", "1M", "-a", "alloc,hostalloc,vmm"]


def _objs(text):
    return [json.loads(l) for l in text.splitlines() if l.startswith("{")]


def _record(env, name, args, extra=()):
    """`umtrace record` of alloc_mix ARGS; the recording's path."""
    path = env.tmpfile(name)
    if os.path.exists(path):
        os.unlink(path)
    p = subprocess.run([env.umtrace, "record", "-o", path, "--libcuda", env.fake,
                        "--ringbuf-size", "64M", *extra, "--", env.alloc_mix, *args,
                        "-o", "/dev/null"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-800:]
    return path


def _record_held(env, name, interval="1s"):
    """A recording that ends while the workload still holds its memory."""
    path = env.tmpfile(name)
    if os.path.exists(path):
        os.unlink(path)
    job = env.popen([env.alloc_mix, "-d", "1500", *WORKLOAD, "-k", "-w", "6000",
                     "-o", "/dev/null"])
    rec = env.popen([env.umtrace, "record", "-o", path, "--libcuda", env.fake,
                     "-p", str(job.pid), "-d", "4s", "-i", interval])
    _, err = rec.communicate(timeout=60)
    assert rec.returncode == 0, err[-800:]
    job.kill()
    job.wait(timeout=30)
    return path, job.pid


def _report(env, path):
    p = subprocess.run([env.umtrace, "report", "--json", path], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    objs = _objs(p.stdout)
    sites = [o for o in objs if o["event"] == "callsite"]
    totals = next(o for o in objs if o["event"] == "totals")
    return sites, totals


def _want_total(sites):
    """What the total view must add up to, from report's call sites."""
    allocs = [s for s in sites if s["api"] not in FREE_APIS]
    return {
        "calls": sum(s["calls"] - s["failed"] for s in allocs),
        "host": sum(s["host_bytes"] for s in allocs),
        "gpu": sum(s["size"] for s in allocs if s["api"] not in NOT_MEMORY),
    }


def _run(env, cmd, *args, timeout=120):
    return subprocess.run([env.umtrace, cmd, *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def _flame(env, rec, out, *args):
    if os.path.lexists(out):
        os.unlink(out)
    p = _run(env, "flamegraph", rec, "-o", out, *args)
    assert p.returncode == 0 and not p.stderr, (args, p.returncode, p.stderr)
    return out


def _check_frames(frames, pids):
    """Root "comm (pid)" of a recorded process, leaf a GPU allocation API."""
    m = PROC_RE.match(frames[0])
    assert m and int(m.group(2)) in pids, frames
    assert frames[-1].startswith("cu") and frames[-1] not in FREE_APIS, frames
    assert len(frames) >= 3, frames


def test_flamegraph_totals_match_report(env):
    """Folded, per metric, total view: lines parse as "stack value" and add
    up to report's host bytes, calls and GPU bytes; frees are no samples."""
    for name, extra in (("keep.umt", ["-k"]), ("free.umt", ["-F"])):
        rec = _record(env, name, [*WORKLOAD, *extra])
        sites, totals = _report(env, rec)
        want = _want_total(sites)
        pids = {pid for s in sites for pid in s["pids"]}
        assert want["calls"] == 2 * 20 * 5 and want["host"] > 100 << 20, (name, want)
        if "-F" in extra:
            assert any(s["api"] in FREE_APIS for s in sites), "the frees were recorded"
        for metric in ("host", "calls", "gpu"):
            out = _flame(env, rec, env.tmpfile(f"{name}.{metric}.folded"), "-m", metric)
            stacks = read_folded(out)
            assert sum(v for _, v in stacks) == want[metric], (name, metric, want)
            for frames, v in stacks:
                _check_frames(frames, pids)
                assert v > 0
            # per entry point too
            by_api = {}
            for frames, v in stacks:
                by_api[frames[-1]] = by_api.get(frames[-1], 0) + v
            if metric == "host":
                for s in sites:
                    if s["api"] not in FREE_APIS and s["host_bytes"]:
                        assert by_api[s["api"]] == s["host_bytes"], (s["api"], by_api)
        # --view held of a run that ended: the process exit released everything
        p = _run(env, "flamegraph", rec, "-o", "-", "--view", "held")
        assert p.returncode == 0 and p.stdout == "" and totals["held_host_bytes"] == 0, p
        assert "nothing to draw" in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr
        print(f"    {name}: {want['calls']} allocation calls, {want['host']} host bytes, "
              f"{want['gpu']} GPU bytes")


def test_flamegraph_held(env):
    """A recording that ends while the job holds its memory: --view held adds
    up to report's held host bytes and outstanding allocations; -p filters."""
    rec, pid = _record_held(env, "held.umt")
    sites, totals = _report(env, rec)
    held = totals["held_host_bytes"]
    assert held > 100 << 20, totals
    host = read_folded(_flame(env, rec, env.tmpfile("held.folded"), "--view", "held"))
    assert sum(v for _, v in host) == held, (held, host)
    for frames, _ in host:
        _check_frames(frames, {pid})
    calls = read_folded(_flame(env, rec, env.tmpfile("held-calls.txt"), "--view", "held",
                               "-m", "calls"))
    assert sum(v for _, v in calls) == sum(s["held"] for s in sites) == 2 * 20 * 5
    # the total view of the same file sees the same calls
    total = read_folded(_flame(env, rec, env.tmpfile("total.folded"), "-m", "calls"))
    assert sum(v for _, v in total) == _want_total(sites)["calls"]
    p = _run(env, "flamegraph", rec, "-o", "-", "--view", "held", "-p", str(pid))
    assert p.returncode == 0 and sum(int(l.rsplit(" ", 1)[1])
                                     for l in p.stdout.splitlines()) == held, p.stderr
    p = _run(env, "flamegraph", rec, "-o", "-", "--view", "held", "-p", str(pid + 1))
    assert p.returncode == 0 and p.stdout == "" and "nothing to draw" in p.stderr, p


def test_flamegraph_formats(env):
    """SVG (xmllint, Chromium), pprof (gzip, protoc, decoded here) and
    speedscope (the schema's rules) carry report's totals; the format
    follows OUT's name; -o - writes folded to stdout."""
    protoc = svgcheck.need("protoc", "protobuf-compiler")
    rec = _record(env, "fmt.umt", [*WORKLOAD, "-k"])
    sites, _ = _report(env, rec)
    want = _want_total(sites)
    pids = {pid for s in sites for pid in s["pids"]}

    svg = _flame(env, rec, env.tmpfile("fg.svg"))
    svgcheck.xmllint(svg)
    root = ET.parse(svg).getroot()
    frames = frame_groups(root)
    top = [g for g in frames if g.get("data-d") == "0"]
    assert len(top) == 1 and int(top[0].get("data-v")) == want["host"], "root frame total"
    procs = [g.find(SVG_NS + "title").text.split("\n")[0] for g in frames
             if g.get("data-d") == "1"]
    assert procs and all(PROC_RE.match(t) for t in procs), procs
    png = env.tmpfile("fg.png")
    svgcheck.screenshot(svg, png)
    svgcheck.assert_real_picture(png, 1200, 800)

    for metric, default in (("host", "host_space"), ("calls", "calls")):
        pb = _flame(env, rec, env.tmpfile(f"fg-{metric}.pb.gz"), "-m", metric)
        with gzip.open(pb, "rb") as f:
            raw = f.read()
        p = subprocess.run([protoc, "--decode_raw"], input=raw, capture_output=True,
                           timeout=60)
        assert p.returncode == 0 and b"1 {" in p.stdout, p.stderr.decode()[-400:]
        strings, samples, default_type = [], [], None
        for fld, _, v in fields(raw):
            if fld == 6:
                strings.append(v.decode("utf-8"))
            elif fld == 2:
                samples.append(v)
            elif fld == 14:
                default_type = v
        totals = [0, 0, 0]
        for smp in samples:
            values = [x for fld, wire, v in fields(smp) if fld == 2 for x in ints(wire, v)]
            assert len(values) == 3, values
            totals = [a + b for a, b in zip(totals, values)]
        assert totals == [want["calls"], want["host"], want["gpu"]], (totals, want)
        assert strings[default_type] == default, strings[default_type]

    ss = _flame(env, rec, env.tmpfile("fg.speedscope.json"), "-m", "gpu")
    with open(ss, encoding="utf-8") as f:
        doc = json.load(f)
    try:
        import jsonschema
        jsonschema.validate(doc, SPEEDSCOPE_SCHEMA)
    except ImportError:
        pass
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    names = [fr["name"] for fr in doc["shared"]["frames"]]
    prof = doc["profiles"][0]
    assert prof["type"] == "sampled" and prof["unit"] == "bytes"
    assert len(prof["samples"]) == len(prof["weights"])
    assert prof["endValue"] == sum(prof["weights"]) == want["gpu"], (prof["endValue"], want)
    for smp in prof["samples"]:
        _check_frames([names[i] for i in smp], pids)

    magic = {"x.folded": b"alloc_mix (", "x.txt": b"alloc_mix (", "x.out": b"alloc_mix (",
             "x.svg": b"<?xml", "x.pprof": b"\x1f\x8b", "x.json": b"{"}
    for name, head in magic.items():
        out = _flame(env, rec, env.tmpfile(name))
        with open(out, "rb") as f:
            assert f.read(len(head)) == head, name
        assert oct(os.stat(out).st_mode & 0o777) == oct(0o644 & ~_umask()), name
    out = _flame(env, rec, env.tmpfile("forced.svg"), "--format", "folded")
    with open(out, "rb") as f:
        assert f.read(11) == b"alloc_mix (", "--format wins over the name"
    p = _run(env, "flamegraph", rec, "-o", "-", "-m", "calls")
    assert p.returncode == 0 and not p.stderr
    assert sum(int(l.rsplit(" ", 1)[1]) for l in p.stdout.splitlines()) == want["calls"]


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_timeline(env):
    """An SVG of a recording sampled every 100 ms: well-formed, axes with
    units, the available memory line, the process's held memory in the
    legend, its allocation bursts; Chromium renders a picture."""
    rec, pid = _record_held(env, "tl.umt", interval="100ms")
    out = env.tmpfile("tl.svg")
    p = _run(env, "timeline", rec, "-o", out, "--burst-min", "1M")
    assert p.returncode == 0 and not p.stderr, p.stderr
    svgcheck.xmllint(out)
    root = ET.parse(out).getroot()
    texts = ["".join(t.itertext()) for t in root.iter(SVG_NS + "text")]
    assert any(re.fullmatch(r"host memory \((GiB|MiB|KiB)\)", t) for t in texts), texts
    assert "time (s) since the start of the recording" in texts
    assert root.find(f".//{SVG_NS}polyline[@class='avail']") is not None
    assert any(t.startswith(f"alloc_mix ({pid})") for t in texts), "no area for the job"
    assert root.findall(f".//{SVG_NS}rect[@class='burst']"), "no burst drawn"
    sub = next(t for t in texts if " samples over " in t)
    assert int(sub.split()[0]) >= 20, sub
    png = env.tmpfile("tl.png")
    svgcheck.screenshot(out, png)
    svgcheck.assert_real_picture(png, 1200, 800)
    # another process's view: samples alone, no area, no burst
    p = _run(env, "timeline", rec, "-o", "-", "-p", str(pid + 1))
    assert p.returncode == 0 and p.stdout.startswith("<?xml"), p.stderr
    assert f"alloc_mix ({pid})" not in p.stdout and 'class="burst"' not in p.stdout


def _varint(v):
    out = bytearray()
    while True:
        b, v = v & 0x7f, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _rec(kind, *fields):
    """One record: u8 type, varint length, body (bytes as is, ints as varints)."""
    body = b"".join(f if isinstance(f, bytes) else _varint(f) for f in fields)
    return bytes([kind]) + _varint(len(body)) + body


def _write_recording(path, records, page_size=4096):
    """A recording of one chunk (the last), as user/rec/recfile.h lays it out."""
    hdr = bytearray(172)
    struct.pack_into("<8sIIIIQQ", hdr, 0, b"\x89UMTREC\n", 1, 172, page_size, 0,
                     1_700_000_000 * 10**9, 10**9)
    hdr[40:48], hdr[104:108] = b"testhost", b"6.18"
    struct.pack_into("<I", hdr, 168, zlib.crc32(bytes(hdr[:168])))
    raw = b"".join(records)
    comp = zlib.compress(raw)
    chunk = struct.pack("<4sIIII", b"UMTC", 0, len(raw), len(comp), 1)
    with open(path, "wb") as f:
        f.write(bytes(hdr) + chunk + struct.pack("<I", zlib.crc32(comp, zlib.crc32(chunk)))
                + comp)


def test_timeline_guard_stop(env):
    """A recording with a guard stop and direct reclaim (written here, record
    by record: STR 1, SAMPLE 5, STOP 6): the stop is a labelled line, the
    reclaim a mark, as report reads the same file."""
    GIB = 1 << 30
    path = env.tmpfile("stop.umt")
    sample = lambda t, avail, stalls: _rec(5, 0, t * 10**9, 16 * GIB, avail, avail // 2,
                                           stalls, stalls * 32, stalls * 30)
    _write_recording(path, [
        _rec(1, b"hog"), _rec(1, b"admission: would take the host below the floor"),
        _rec(1, b"main;train;cuMemAlloc_v2"),
        sample(1, 9 * GIB, 100), sample(2, 5 * GIB, 100), sample(3, 2 * GIB, 160),
        _rec(6, int(2.5 * 10**9), 4242, 1, 1, 2, 2 * GIB, 3 * GIB, 3),
        sample(4, 2 * GIB, 160),
    ])
    p = _run(env, "report", "--json", path)
    assert p.returncode == 0 and not p.stderr, p.stderr
    stops = [o for o in _objs(p.stdout) if o["event"] == "stop"]
    assert len(stops) == 1 and stops[0]["comm"] == "hog", p.stdout
    out = env.tmpfile("stop.svg")
    p = _run(env, "timeline", path, "-o", out)
    assert p.returncode == 0 and not p.stderr, p.stderr
    svgcheck.xmllint(out)
    root = ET.parse(out).getroot()
    texts = ["".join(t.itertext()) for t in root.iter(SVG_NS + "text")]
    assert len(root.findall(f".//{SVG_NS}g[@class='stop']")) == 1
    assert any(t.startswith("stop hog (4242): admission") for t in texts), texts
    assert len(root.findall(f".//{SVG_NS}rect[@class='reclaim']")) == 1
    assert any(re.fullmatch(r"host memory \((GiB|MiB|KiB)\)", t) for t in texts), texts
    # -p of another process: no stop drawn
    p = _run(env, "timeline", path, "-o", "-", "-p", "4243")
    assert p.returncode == 0, p.stderr
    assert not ET.fromstring(p.stdout).findall(f".//{SVG_NS}g[@class='stop']")
    # no calls: the flamegraph is empty, and says so
    p = _run(env, "flamegraph", path, "-o", "-")
    assert p.returncode == 0 and not p.stdout and "no GPU calls" in p.stderr, p


def test_flamegraph_bad_input(env):
    """Usage errors exit 2, runtime errors 1, each with one line; a damaged
    recording is read with one warning (exit 0); OUT is never clobbered."""
    rec = _record(env, "bad.umt", ["-n", "5", "-s", "1M", "-a", "alloc"])
    with open(rec, "rb") as f:
        data = f.read()
    damaged = env.tmpfile("damaged.umt")
    with open(damaged, "wb") as f:
        f.write(data[:-10])
    text = env.tmpfile("text.umt")
    with open(text, "w") as f:
        f.write("hello, I am a text file\n" * 20)
    out = env.tmpfile("out.folded")
    existing = env.tmpfile("existing.folded")
    target = env.tmpfile("target")
    link = env.tmpfile("link.folded")
    for path in (out, link):
        if os.path.lexists(path):
            os.unlink(path)
    cases = [
        # argv, exit code, text on stderr ("" for none), OUT left behind
        (["flamegraph"], 2, "no recording given", False),
        (["flamegraph", "--bogus", rec, "-o", out], 2, "unknown option '--bogus'", False),
        (["flamegraph", rec, "-o"], 2, "needs a value", False),
        (["flamegraph", rec], 2, "no output given", False),
        (["flamegraph", rec, rec, "-o", out], 2, "unexpected argument", False),
        (["flamegraph", rec, "-o", out, "--format", "png"], 2, "invalid --format 'png'", False),
        (["flamegraph", rec, "-o", out, "-m", "bytes"], 2, "invalid --metric 'bytes'", False),
        (["flamegraph", rec, "-o", out, "--view", "now"], 2, "invalid --view 'now'", False),
        (["flamegraph", rec, "-o", out, "-p", "x"], 2, "invalid pid 'x'", False),
        (["flamegraph", "/nonexistent.umt", "-o", out], 1, "No such file", False),
        (["flamegraph", text, "-o", out], 1, "not a umtrace recording", False),
        (["flamegraph", rec, "-o", "/nonexistent-dir/x.folded"], 1, "No such file", False),
        (["flamegraph", rec, "-o", existing], 1, "File exists", True),
        (["flamegraph", rec, "-o", link], 1, "File exists", True),
        (["flamegraph", damaged, "-o", out], 0, "warning: ", True),
        (["timeline"], 2, "no recording given", False),
        (["timeline", rec, "--bogus", "-o", out], 2, "unknown option '--bogus'", False),
        (["timeline", rec], 2, "no output given", False),
        (["timeline", rec, "-o", out, "--burst-min", "lots"], 2, "invalid --burst-min", False),
        (["timeline", "/nonexistent.umt", "-o", out], 1, "No such file", False),
        (["timeline", text, "-o", out], 1, "not a umtrace recording", False),
        (["timeline", rec, "-o", existing], 1, "File exists", True),
        (["timeline", damaged, "-o", out], 0, "warning: ", True),
    ]
    failures = []
    for argv, code, want, left in cases:
        with open(existing, "w") as f:
            f.write("keep me\n")
        with open(target, "w") as f:
            f.write("keep me too\n")
        if not os.path.lexists(link):
            os.symlink(target, link)
        if os.path.lexists(out):
            os.unlink(out)
        p = _run(env, *argv, timeout=60)
        err = p.stderr.strip().splitlines()
        if p.returncode != code:
            failures.append(f"{argv}: exit {p.returncode}, expected {code}: {p.stderr.strip()}")
        elif len(err) != 1 or want not in err[0] or not err[0].startswith("umtrace: "):
            failures.append(f"{argv}: stderr {err!r}, expected one line with {want!r}")
        elif p.stdout:
            failures.append(f"{argv}: wrote to stdout: {p.stdout[:200]!r}")
        elif os.path.exists(out) != (left and out in argv):
            failures.append(f"{argv}: {out} {'left' if os.path.exists(out) else 'missing'}")
        elif open(existing).read() != "keep me\n" or open(target).read() != "keep me too\n":
            failures.append(f"{argv}: clobbered an existing file")
        if code == 0:
            print(f"    {argv[0]} of a damaged file: {err[0] if err else ''}")
    assert not failures, "\n".join(failures)

    # --force replaces a file, and a symlink rather than what it points to
    for dest in (existing, link):
        p = _run(env, "flamegraph", rec, "-o", dest, "--force")
        assert p.returncode == 0 and not p.stderr, p.stderr
        assert not os.path.islink(dest) and open(dest).read().startswith("alloc_mix ("), dest
        assert open(target).read() == "keep me too\n"
    leftovers = [n for n in os.listdir("/tmp") if n.startswith(os.path.basename(existing) + ".")]
    assert not leftovers, f"temporary files left: {leftovers}"
    p = _run(env, "flamegraph", rec, "-o", "/tmp", "--force")
    assert p.returncode == 1 and len(p.stderr.splitlines()) == 1, p.stderr
    for cmd in ("flamegraph", "timeline"):
        p = _run(env, cmd, "--help")
        assert p.returncode == 0 and p.stdout.startswith(f"usage: umtrace {cmd}"), p
        assert not p.stderr
        p = _run(env, "help", cmd)
        assert p.returncode == 0 and p.stdout.startswith(f"usage: umtrace {cmd}"), p


def test_flamegraph_1m_calls(env):
    """A 1,000,000-call recording (500,000 allocations and their frees, two
    threads): how long flamegraph takes, and that every allocation is in it."""
    rec = _record(env, "1m.umt", ["-t", "2", "-n", "250000", "-s", "4K", "-a", "alloc", "-F"],
                  extra=["--stack", "fp"])
    sites, totals = _report(env, rec)
    out = env.tmpfile("1m.folded")
    if os.path.exists(out):
        os.unlink(out)
    t0 = time.monotonic()
    p = _run(env, "flamegraph", rec, "-o", out, "-m", "calls", timeout=120)
    secs = time.monotonic() - t0
    assert p.returncode == 0 and not p.stderr, p.stderr
    t0 = time.monotonic()
    p = _run(env, "timeline", rec, "-o", "-", timeout=120)
    tl_secs = time.monotonic() - t0
    assert p.returncode == 0 and not p.stderr, p.stderr
    got = sum(v for _, v in read_folded(out))
    print(f"    {totals['records']} calls recorded ({totals['dropped']} lost), "
          f"{os.path.getsize(rec) / 1e6:.1f} MB: flamegraph {secs:.2f} s, "
          f"timeline {tl_secs:.2f} s; {got} allocations in the flamegraph")
    assert totals["records"] >= 900000, totals
    assert got == _want_total(sites)["calls"], (got, totals)
    assert secs < 6, f"flamegraph took {secs:.2f} s on {totals['records']} calls"
