# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""A hostile job through every command and output format.

tests/workloads/hostile makes cuMemAlloc_v2 calls from one function whose
48-byte name is a placeholder. Each test copies it into a directory of
nobody's (0700), patches the placeholder in .strtab and .debug_str into an
attacker's bytes of the same length (newline, '"', '=', ESC, ';', '<script>',
'../', '\\', a space, DEL, invalid UTF-8, a C1 control and U+202E), and
runs the copy as nobody under a file name that is as hostile: its comm, the
first 15 bytes of that name, holds a newline, '"', ESC, ';', '\\' and
invalid UTF-8 (NAME_CTRL), or '<script>', '..', invalid UTF-8, a C1 control
and a UTF-8 character cut in two (NAME_HTML).

What it proves, for trace, report (live and from a recording), record,
flamegraph (folded, svg, pprof, speedscope), timeline, top, and the guard
(its log, status, metrics, post-mortem bundle, --on-stop hook, resume):
- every output is read back by its real reader: Python's json, the folded
  format's line rule, xml.etree and xmllint, protoc, promtool;
- every output for a terminal holds no raw control byte, C1 control, bidi
  override or invalid UTF-8 (assert_terminal_safe);
- the name is there, in the exact form user/lib/escape.c gives each format
  (reimplemented here: term, kv, prom, clean, folded), so a test that lost
  the name fails as one that let it through raw.

A test checks all it can and then fails with every problem it found.
"""
import gzip
import json
import os
import pwd
import re
import select
import shutil
import signal
import subprocess
import time
import xml.etree.ElementTree as ET

import svgcheck
from harness import Skip, meminfo
from test_export import SPEEDSCOPE_SCHEMA, SVG_NS, fields
from test_guard import to_cross, wait_holding

MIB = 1 << 20
GIB = 1 << 30
NOBODY = pwd.getpwnam("nobody")

# The function's name in tests/workloads/hostile.c, and what it becomes.
PLACEHOLDER = b"umt_hostile_frame_placeholder_0123456789abcdef_x"
SYMBOL = b'a\n"b=1\x1b[31m;<script>../\\ \x7f\xff\xfe\xc2\x9b\xe2\x80\xae'
SYMBOL += b"x" * (len(PLACEHOLDER) - len(SYMBOL))
# File names: '/' and NUL are the only bytes a name cannot hold.
NAME_CTRL = b'a\n"b=1\x1b[31m;\\\x9b\xff'			# 15 bytes: all of it is the comm
NAME_HTML = b"<script>..\xff\xfe\xc2\x9b\xe2\x80\xae"	# 17: the comm cuts U+202E

# ---- the forms of user/lib/escape.c and text__clean(), in Python ----


def utf8_len(b, i):
    """utf8__len(): the length of the valid UTF-8 character at b[i], or 0."""
    c, lo, hi = b[i], 0x80, 0xbf
    if c < 0x80:
        return 1
    if 0xc2 <= c <= 0xdf:
        n = 2
    elif 0xe0 <= c <= 0xef:
        n, lo, hi = 3, 0xa0 if c == 0xe0 else 0x80, 0x9f if c == 0xed else 0xbf
    elif 0xf0 <= c <= 0xf4:
        n, lo, hi = 4, 0x90 if c == 0xf0 else 0x80, 0x8f if c == 0xf4 else 0xbf
    else:
        return 0
    if i + n > len(b) or not lo <= b[i + 1] <= hi:
        return 0
    return n if all(b[i + k] & 0xc0 == 0x80 for k in range(2, n)) else 0


def is_control(ch):
    """C0, DEL, C1, and the bidi embeddings, overrides and isolates."""
    if len(ch) == 1:
        return ch[0] < 0x20 or ch[0] == 0x7f
    if len(ch) == 2:
        return ch[0] == 0xc2 and ch[1] < 0xa0
    if len(ch) == 3 and ch[:2] == b"\xe2\x80":
        return 0xaa <= ch[2] <= 0xae
    return len(ch) == 3 and ch[:2] == b"\xe2\x81" and 0xa6 <= ch[2] <= 0xa9


def term(b, form="plain"):
    """esc__term() (form "kv": esc__kv()'s inside, without its quotes)."""
    out, i = bytearray(), 0
    while i < len(b):
        n = utf8_len(b, i)
        if b[i] == 0x5c or (form == "kv" and b[i] == 0x22):
            out += b"\\" + b[i:i + 1]
            n = 1
        elif not n:
            out += b"\\x%02x" % b[i]
            n = 1
        elif is_control(b[i:i + n]):
            out += b"".join(b"\\x%02x" % x for x in b[i:i + n])
        else:
            out += b[i:i + n]
        i += n
    return bytes(out)


def kv(b):
    """esc__kv(): a key=value log value."""
    return b'"' + term(b, "kv") + b'"'


def prom(b):
    """esc__prom_label(): the terminal form, '\\' and '"' escaped again."""
    return term(b).replace(b"\\", b"\\\\").replace(b'"', b'\\"')


def clean(b):
    """text__clean(): a control character (is_control) as a space, invalid
    UTF-8 (and U+FFFE, U+FFFF) as U+FFFD."""
    out, i = bytearray(), 0
    while i < len(b):
        n = utf8_len(b, i)
        if n == 3 and b[i] == 0xef and b[i + 1] == 0xbf and b[i + 2] >= 0xbe:
            n = 0
        if n and is_control(b[i:i + n]):
            out += b" "
        elif not n:
            out += "\ufffd".encode()
            n = 1
        else:
            out += b[i:i + n]
        i += n
    return bytes(out)


def frame(b):
    """A call site's frame as the exporters get it (callsites.c: ';' as ':')."""
    return clean(b).replace(b";", b":")


def jbytes(s):
    """The bytes a json__string() string stands for: one code point a byte."""
    return s.encode("latin-1")


# ---- what every output must be ----

TERMINAL_BAD = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]|"
                          rb"\xe2\x80[\xaa-\xae]|\xe2\x81[\xa6-\xa9]")


def terminal_problem(name, data):
    """Why data may not go to a terminal, or None: raw C0 controls (tab and
    newline aside), DEL, C1 controls, bidi overrides, invalid UTF-8."""
    found = [m for m in TERMINAL_BAD.finditer(data)]
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        found.append(re.compile(re.escape(data[e.start:e.end])).search(data, e.start))
    if not found:
        return None
    at = found[0].start()
    return (f"{name}: raw {sorted({m.group() for m in found})} ({len(found)} in all); "
            f"the first at byte {at}: {data[max(0, at - 60):at + 40]!r}")


def assert_terminal_safe(name, data: bytes):
    problem = terminal_problem(name, data)
    assert not problem, problem


class Checks:
    """Every check of a test, failed ones collected: a sink that writes raw
    bytes does not hide what the others do."""

    def __init__(self):
        self.problems = []

    def __call__(self, ok, what):
        if not ok:
            self.problems.append(what if isinstance(what, str) else repr(what))
        return ok

    def terminal(self, name, data):
        problem = terminal_problem(name, data)
        self(not problem, problem)

    def done(self):
        """Fail with every problem (each printed whole: the runner shows
        only the end of a failure's message)."""
        for p in self.problems:
            print("    problem: " + p[:900])
        assert not self.problems, f"{len(self.problems)} problems, the first: " + \
            self.problems[0][:300]


def json_lines(c, name, out):
    """Each line of out as JSON (json.loads), in plain ASCII."""
    c.terminal(name, out)
    c(out.isascii(), f"{name}: not ASCII")
    objs = []
    for line in out.splitlines():
        try:
            objs.append(json.loads(line))
        except ValueError as e:
            c(False, f"{name}: not JSON ({e}): {line!r}")
    return objs


FOLDED_LINE = re.compile(rb"^[^\n]*( \d+)$")


def folded_stacks(c, name, data):
    """Folded lines ("frame;...;frame count"), each checked by the format's
    rule: [(frames, count)]."""
    c(data.endswith(b"\n"), f"{name}: unterminated")
    out = []
    for line in data.split(b"\n")[:-1]:
        if c(FOLDED_LINE.match(line), f"{name}: not a folded line: {line!r}"):
            stack, _, count = line.rpartition(b" ")
            out.append((stack.split(b";"), int(count)))
    return out


# ---- the hostile job ----


def as_nobody():
    os.setgroups([])
    os.setgid(NOBODY.pw_gid)
    os.setuid(NOBODY.pw_uid)


def setpriv():
    """A command prefix that runs what follows as nobody, for `umtrace CMD --`."""
    if not shutil.which("setpriv"):
        raise Skip("setpriv (util-linux) not found")
    return [b"setpriv", b"--reuid", b"%d" % NOBODY.pw_uid, b"--regid", b"%d" % NOBODY.pw_gid,
            b"--clear-groups"]


def section_of(path, offset):
    p = subprocess.run(["readelf", "-W", "-S", path], capture_output=True, text=True,
                       timeout=30)
    for m in re.finditer(r"\]\s+(\S+)\s+(\S+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)",
                         p.stdout):
        start, size = int(m.group(3), 16), int(m.group(4), 16)
        if m.group(2) != "NOBITS" and start <= offset < start + size:
            return m.group(1)
    return None


def hostile(env, name):
    """The patched copy of the workload, as DIR/name in a directory only
    nobody (and root) may enter; its path, bytes."""
    src = os.path.join(env.tests, "hostile")
    if not os.path.exists(src):
        raise Skip(f"{src} not built (make)")
    if not shutil.which("readelf"):
        raise Skip("readelf (binutils) not found")
    if subprocess.run(["test", "-r", env.fake], preexec_fn=as_nobody).returncode:
        raise Skip(f"nobody cannot read {env.fake}: the hostile job runs as nobody")
    with open(src, "rb") as f:
        data = f.read()
    at = [m.start() for m in re.finditer(re.escape(PLACEHOLDER), data)]
    # .strtab names the symbol, .debug_str the DWARF subprogram; never .dynstr.
    assert sorted(section_of(src, a) for a in at) == [".debug_str", ".strtab"], \
        [(a, section_of(src, a)) for a in at]
    d = os.fsencode(env.tmpfile("hostile-bin"))
    os.makedirs(d, exist_ok=True)
    os.chown(d, NOBODY.pw_uid, NOBODY.pw_gid)
    os.chmod(d, 0o700)
    path = os.path.join(d, name)
    with open(path, "wb") as f:
        f.write(data.replace(PLACEHOLDER, SYMBOL))
    os.chmod(path, 0o755)
    os.chown(path, NOBODY.pw_uid, NOBODY.pw_gid)
    return path


def comm_of(name):
    return name[:15]


def run(argv, timeout=60):
    """(exit status, stdout, stderr), all bytes."""
    p = subprocess.run(argv, capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def umtrace_run(env, *args, timeout=60):
    return run([env.umtrace.encode(), *[a if isinstance(a, bytes) else str(a).encode()
                                        for a in args]], timeout)


def popen(env, argv, **kw):
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
    env._procs.append(p)
    return p


def read_until(stream, needle, timeout=30):
    """Bytes from a child's pipe up to and with the line that holds needle,
    read a byte at a time so that a later communicate() gets the rest."""
    fd, buf, line = stream.fileno(), b"", b""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        assert left > 0, f"no {needle!r} within {timeout}s: {buf[-400:]!r}"
        if not select.select([fd], [], [], left)[0]:
            continue
        b = os.read(fd, 1)
        assert b, f"the pipe ended before {needle!r}: {buf[-400:]!r}"
        buf, line = buf + b, line + b
        if b == b"\n":
            if needle in line:
                return buf
            line = b""


def proc_state(pid):
    """/proc/PID/stat's state, read as bytes: a comm may hold anything."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except FileNotFoundError:
        return None


def wait_for(what, cond, timeout=20, step=0.02):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        assert time.monotonic() < deadline, f"{what}: not within {timeout}s"
        time.sleep(step)


# ---- what each command shows of the job ----


def site_frame_re(path):
    """report's frame for the hostile function, in the terminal form."""
    return re.compile(re.escape(term(SYMBOL)) + rb"\+0x[0-9a-f]+ \(" +
                      re.escape(term(os.path.basename(path))) + rb"\)$")


def check_report_text(c, name, out, path, pid):
    """report's text: the site line names the process; the hostile
    function is one frame line of the cuMemAlloc_v2 site."""
    c.terminal(name, out)
    lines = out.split(b"\n")
    heads = [i for i, l in enumerate(lines) if l.startswith(b"#") and b" cuMemAlloc_v2: " in l]
    if not c(len(heads) == 1, f"{name}: not one cuMemAlloc_v2 site: {out[-1500:]!r}"):
        return
    c(lines[heads[0]].endswith(b"  [" + term(comm_of(os.path.basename(path))) +
                               b", pid %d]" % pid),
      f"{name}: site line does not name the process escaped: {lines[heads[0]]!r}")
    site = []
    for line in lines[heads[0] + 1:]:
        if not line.startswith(b"    "):
            break
        site.append(line[4:])
    c(site and site[0] == b"cuMemAlloc_v2+0x0 (libcuda.so.1)", f"{name}: {site!r}")
    hits = [f for f in site if site_frame_re(path).match(f)]
    c(len(hits) == 1, f"{name}: the hostile function is not one frame of the site, escaped "
      f"({term(SYMBOL)!r}+0x.. ({term(os.path.basename(path))!r})): {site!r}")


def check_report_json(c, name, out, path, pid):
    """report --json: every line an object; the site's comm and the hostile
    frame read back to the very bytes. Returns the cuMemAlloc_v2 site."""
    objs = json_lines(c, name, out)
    sites = [o for o in objs if o.get("event") == "callsite" and o["api"] == "cuMemAlloc_v2"]
    if not c(len(sites) == 1 and pid in sites[0]["pids"], f"{name}: {sites!r}"):
        return None
    s = sites[0]
    c(jbytes(s["comm"]) == comm_of(os.path.basename(path)), f"{name}: comm {s['comm']!r}")
    want = re.compile(re.escape(SYMBOL) + rb"\+0x[0-9a-f]+ \(" +
                      re.escape(os.path.basename(path)) + rb"\)$")
    hits = [f for f in s["stack"] if want.match(jbytes(f))]
    c(len(hits) == 1, f"{name}: the hostile function's frame does not read back: {s['stack']!r}")
    return s


def trace_argv(env, cmd, path, *extra, args=(b"-n", b"3", b"-s", b"1M")):
    return [env.umtrace.encode(), cmd.encode(), *[e.encode() for e in extra], b"--libcuda",
            env.fake.encode(), b"--", *setpriv(), path, *args]


def hostile_pid(out_json):
    """The job's pid, from trace's or report's JSON (setpriv execs it: one pid)."""
    for line in out_json.splitlines():
        try:
            o = json.loads(line)
        except ValueError:
            continue
        if o.get("event") in ("alloc", "callsite"):
            return o["pid"] if "pid" in o else o["pids"][0]
    raise AssertionError(f"no call in {out_json[-800:]!r}")


# ---- the tests ----


def test_hostile_trace(env):
    """trace's lines and final table, text and JSON, for both names: one
    line per call, the comm escaped in place; JSON reads back the bytes."""
    c = Checks()
    for name in (NAME_CTRL, NAME_HTML):
        path = hostile(env, name)
        comm = comm_of(name)
        rc, out, err = run(trace_argv(env, "trace", path))
        c(rc == 0, f"trace {name!r}: exit {rc}: {err[-600:]!r}")
        c.terminal(f"trace {name!r} stdout", out)
        c.terminal(f"trace {name!r} stderr", err)
        lines = out.split(b"\n")
        # header, 3 allocs, 3 frees, blank, header, 2 rows, 2 totals, ""
        c(len(lines) == 14, f"trace {name!r}: {len(lines)} lines: {out!r}")
        calls = [l for l in lines if re.match(rb"\d\d:\d\d:\d\d\.\d{3} ", l)]
        pids = {l.split()[1] for l in calls}
        rows = [l for l in lines if l.split(b" ", 1)[0] in pids]
        c(len(calls) == 6 and len(rows) == 2, f"trace {name!r}: {out!r}")
        for l in calls:
            f = l.split()
            c(len(f) == 11 and f[3] == term(comm) and f[4] in (b"cuMemAlloc_v2", b"cuMemFree_v2"),
              f"trace {name!r}: call line {l!r}, want COMM {term(comm)!r}")
        for l in rows:
            f = l.split()
            c(len(f) == 11 and f[1] == term(comm), f"trace {name!r}: summary row {l!r}")

        rc, out, err = run(trace_argv(env, "trace", path, "--json"))
        c(rc == 0, f"trace --json {name!r}: exit {rc}: {err[-600:]!r}")
        objs = json_lines(c, f"trace --json {name!r} stdout", out)
        kinds = [o.get("event") for o in objs]
        c(kinds.count("alloc") == 3 and kinds.count("free") == 3 and
          kinds.count("summary") == 2 and kinds[-1] == "totals", f"trace --json: {kinds}")
        for o in objs:
            for key in ("comm", "pcomm"):
                if key in o:
                    c(jbytes(o[key]) == comm, f"trace --json {name!r}: {key} {o[key]!r}")
    c.done()


def test_hostile_report_live(env):
    """A live report of each name: the site names the process, escaped; the
    hostile function (its file named <script>..) is one frame line, escaped,
    and its JSON frame reads back to the bytes."""
    c = Checks()
    path = hostile(env, NAME_HTML)
    rc, out, err = run(trace_argv(env, "report", path, "--json"))
    c(rc == 0, f"report --json: exit {rc}: {err[-600:]!r}")
    c.terminal("report --json stderr", err)
    check_report_json(c, "report --json", out, path, hostile_pid(out))
    rc, out, err = run(trace_argv(env, "report", path))
    c(rc == 0, f"report: exit {rc}: {err[-600:]!r}")
    c.terminal("report stderr", err)
    pid = int(re.search(rb", pid (\d+)\]", out).group(1)) if b", pid " in out else 0
    check_report_text(c, "report", out, path, pid)

    # A comm with a newline, a quote and ESC: the site line.
    path = hostile(env, NAME_CTRL)
    rc, out, err = run(trace_argv(env, "report", path))
    c(rc == 0, f"report {NAME_CTRL!r}: exit {rc}: {err[-600:]!r}")
    c.terminal(f"report {NAME_CTRL!r}", out + err)
    c(re.search(rb"^#1 cuMemAlloc_v2: .*  \[" + re.escape(term(NAME_CTRL)) + rb", pid \d+\]$",
                out, re.M), f"report {NAME_CTRL!r}: no site line naming it escaped: {out!r}")
    c.done()


def test_hostile_symbols_whatever_the_file_name(env):
    """The job's functions are named even when its file's name holds a
    newline: /proc/PID/maps writes that newline as "\\012", a path that is
    no file: the symbolizer reads it back to the file's name."""
    c = Checks()
    path = hostile(env, NAME_CTRL)
    rc, out, err = run(trace_argv(env, "report", path, "--json"))
    c(rc == 0, f"report --json: exit {rc}: {err[-600:]!r}")
    check_report_json(c, "report --json", out, path, hostile_pid(out))
    c.done()


def record(env, path, tag, *extra, args=(b"-n", b"3", b"-s", b"1M")):
    """`umtrace record` of the job as nobody; the recording's path."""
    rec = env.tmpfile(f"hostile-{tag}.umt")
    if os.path.lexists(rec):
        os.unlink(rec)
    argv = trace_argv(env, "record", path, "-o", rec, *extra, args=args)
    rc, out, err = run(argv, 120)
    assert rc == 0, f"record: exit {rc}: {err[-600:]!r}"
    assert_terminal_safe("record stdout", out)
    assert_terminal_safe("record stderr", err)
    return rec


def test_hostile_record_report_timeline(env):
    """A recording of the job: `report FILE` (text and JSON) as a live one,
    and the timeline's SVG parses, with the process in its legend."""
    c = Checks()
    path = hostile(env, NAME_HTML)
    # Samples every 100 ms while it holds: the timeline draws what it held.
    rec = record(env, path, "report", "-i", "100ms",
                 args=(b"-n", b"3", b"-s", b"1M", b"-w", b"500"))
    rc, out, err = umtrace_run(env, "report", "--json", rec)
    c(rc == 0, f"report --json FILE: exit {rc}: {err!r}")
    c.terminal("report --json FILE stderr", err)
    site = check_report_json(c, "report --json FILE", out, path, hostile_pid(out))
    pid = site["pids"][0] if site else 0
    rc, out, err = umtrace_run(env, "report", rec)
    c(rc == 0, f"report FILE: exit {rc}: {err!r}")
    c.terminal("report FILE stderr", err)
    check_report_text(c, "report FILE", out, path, pid)

    svg = env.tmpfile("hostile-timeline.svg")
    if os.path.lexists(svg):
        os.unlink(svg)
    rc, out, err = umtrace_run(env, "timeline", rec, "-o", svg)
    c(rc == 0 and not out, f"timeline: exit {rc}: {err!r}")
    c.terminal("timeline stderr", err)
    if os.path.exists(svg):
        svgcheck.xmllint(svg)
        texts = ["".join(t.itertext()) for t in ET.parse(svg).getroot().iter(SVG_NS + "text")]
        want = clean(comm_of(NAME_HTML)).decode() + f" ({pid}), peak "
        c(any(t.startswith(want) for t in texts), f"timeline: no legend for {want!r}: {texts}")
    c.done()


def test_hostile_flamegraph(env):
    """Every flamegraph format of a recording of the job, read back by its
    reader; the hostile function is one frame in each, in its cleaned form,
    and the folded text written to standard output is fit for a terminal."""
    c = Checks()
    path = hostile(env, NAME_HTML)
    rec = record(env, path, "flame")
    rc, out, _ = umtrace_run(env, "report", "--json", rec)
    site = check_report_json(c, "report --json FILE", out, path, hostile_pid(out))
    assert site, c.problems
    pid, depth = site["pids"][0], len(site["stack"])
    proc = clean(comm_of(NAME_HTML)) + b" (%d)" % pid

    rc, out, err = umtrace_run(env, "flamegraph", rec, "-o", "-")
    c(rc == 0 and not err, f"flamegraph -o -: exit {rc}: {err!r}")
    stacks = folded_stacks(c, "folded", out)
    c(len(stacks) == 1, f"folded: {len(stacks)} stacks, want the one site: {out!r}")
    for frames, _ in stacks:
        c(len(frames) == depth + 1, f"folded: {len(frames)} frames, want {depth + 1}: {frames}")
        c(frames[0] == proc.replace(b";", b":"), f"folded: root {frames[0]!r}")
        c(frames[-2:] == [frame(SYMBOL), b"cuMemAlloc_v2"] and frames[-3] == b"main",
          f"folded: want ...;main;{frame(SYMBOL)!r};cuMemAlloc_v2: {frames}")
    c.terminal("flamegraph -f folded -o - (stdout)", out)

    outs = {}
    for fmt, ext in (("svg", "svg"), ("pprof", "pb.gz"), ("speedscope", "json")):
        outs[fmt] = env.tmpfile(f"hostile-flame.{ext}")
        if os.path.lexists(outs[fmt]):
            os.unlink(outs[fmt])
        rc, out, err = umtrace_run(env, "flamegraph", rec, "-f", fmt, "-o", outs[fmt])
        c(rc == 0 and not out and not err, f"flamegraph -f {fmt}: exit {rc}: {err!r}")

    svgcheck.xmllint(outs["svg"])
    titles = [t.text.split("\n")[0] for t in ET.parse(outs["svg"]).getroot().iter(SVG_NS + "title")
              if t.text]
    c(titles.count(frame(SYMBOL).decode()) == 1, f"svg: the hostile frame {frame(SYMBOL)!r} "
      f"is not one frame: {titles}")
    c(proc.decode() in titles, f"svg: no process frame {proc!r}: {titles}")

    with gzip.open(outs["pprof"], "rb") as f:
        raw = f.read()
    p = subprocess.run([svgcheck.need("protoc", "protobuf-compiler"), "--decode_raw"], input=raw,
                       capture_output=True, timeout=60)
    c(p.returncode == 0, f"protoc --decode_raw: {p.stderr[-400:]!r}")
    strings = [v for fno, _, v in fields(raw) if fno == 6]
    c(frame(SYMBOL) in strings, f"pprof: no {frame(SYMBOL)!r} in its strings: {strings}")

    with open(outs["speedscope"], encoding="utf-8") as f:
        doc = json.load(f)
    try:
        import jsonschema
        jsonschema.validate(doc, SPEEDSCOPE_SCHEMA)
    except ImportError:
        pass
    names = [fr["name"] for fr in doc["shared"]["frames"]]
    c(names.count(frame(SYMBOL).decode()) == 1, f"speedscope: {names}")
    c.done()


def test_hostile_top(env):
    """top, one batch snapshot while the job (as nobody) holds its memory:
    its row's COMM is the terminal form, cut at a whole escape."""
    c = Checks()
    path = hostile(env, NAME_CTRL)
    top = popen(env, [env.umtrace, "top", "-b", "--once", "-i", "4s", "--libcuda", env.fake])
    early = read_until(top.stderr, b"probing")
    job = popen(env, [path, b"-n", b"4", b"-s", b"16M", b"-w", b"20000"], preexec_fn=as_nobody)
    assert wait_holding(job.pid, 10), "the job never reached its hold"
    assert top.poll() is None, "top's one interval ended before the job held its memory"
    out, err = top.communicate(timeout=30)
    job.kill()
    job.wait(timeout=30)
    c(top.returncode == 0, f"top: exit {top.returncode}: {err!r}")
    c.terminal("top stdout", out)
    c.terminal("top stderr", early + err)
    rows = [l for l in out.split(b"\n") if l.startswith(b"%d " % job.pid)]
    if c(len(rows) == 1 and len(rows[0].split()) >= 3, f"top: no one row for {job.pid}: {out!r}"):
        shown = rows[0].split()[1]
        whole = term(NAME_CTRL)
        c(whole.startswith(shown) and len(shown) >= 8 and
          (len(shown) == len(whole) or re.match(rb"\\x[0-9a-f]{2}|\\\\|[^\\]",
                                                whole[len(shown):])),
          f"top: COMM {shown!r} is not {whole!r} cut at a whole escape")
        c(rows[0].split()[2] == b"64M", f"top: {rows[0]!r}")
    c.done()


STOP_LINE = re.compile(rb'^umtrace: guard: (would-stop|stop) ((?:\w+=(?:"(?:[^"\\]|\\.)*"|'
                       rb'[^"\s]\S*)(?: |$))+)$')
KV_TOKEN = re.compile(rb'(\w+)=("(?:[^"\\]|\\.)*"|[^"\s]\S*)')
EVENT_LINE = re.compile(rb'^[a-z_]+ ("(?:[^"\\]|\\.)*"|[^"\s]\S*)$')


def rewritten(path, times=2, timeout=10):
    """Wait until path has been replaced times more (the guard writes its
    state and metrics files whole, once a second)."""
    def ident():
        try:
            st = os.stat(path)
            return st.st_ino, st.st_mtime_ns
        except FileNotFoundError:
            return None
    seen = [ident()]

    def more():
        now = ident()
        if now != seen[-1]:
            seen.append(now)
        return len(seen) > times
    wait_for(f"{path} rewritten {times} times", more, timeout, 0.05)


def guard_run(env, dry):
    """The guard (--no-pin: nothing outlives the test) against the job as
    nobody, in scope by pid, with a floor its calls cross: checks every
    sink while the job is held (or, dry, runs on), then the log."""
    c = Checks()
    path = hostile(env, NAME_CTRL)
    comm = comm_of(NAME_CTRL)
    tag = "dry" if dry else "stop"
    state, prom_path = env.tmpfile(f"hg-{tag}.state"), env.tmpfile(f"hg-{tag}.prom")
    pm, hook = env.tmpfile(f"hg-{tag}-pm"), env.tmpfile(f"hg-{tag}.env")
    for p in (state, prom_path, prom_path + ".tmp", hook, hook + ".tmp"):
        env._tmp.append(p)
        if os.path.lexists(p):
            os.unlink(p)
    shutil.rmtree(pm, ignore_errors=True)
    # Far enough that only its own calls cross it: a floor crossed before
    # it runs would stop `sh`, the name the job has until its exec.
    floor = meminfo() - 512 * MIB
    n = to_cross(floor)
    # Its pid is known before it runs anything: the scope names it.
    job = popen(env, [b"sh", b"-c", b'read go; exec "$0" "$@"', path, b"-n", n.encode(),
                      b"-s", b"64M", b"-w", b"30000"], stdin=subprocess.PIPE,
                preexec_fn=as_nobody)
    argv = [env.umtrace, "guard", "--libcuda", env.fake, "--platform", "unified", "--no-pin",
            "--state-file", state, "--floor", str(floor), "--low", str(floor + 64 * MIB),
            "--drop", str(64 * GIB // 100), "--scope", f"pid:{job.pid}",
            "--metrics-file", prom_path, "--postmortem-dir", pm,
            "--on-stop", f"env > {hook}.tmp && mv {hook}.tmp {hook}", *(["-n"] if dry else [])]
    g = popen(env, argv)
    early = read_until(g.stderr, b"guard: armed")
    job.stdin.write(b"go\n")
    job.stdin.close()
    # The hook runs once the bundle is complete.
    wait_for("the --on-stop hook", lambda: os.path.exists(hook), 30)
    if not dry:
        c(proc_state(job.pid) == "T", f"the job is not stopped: {proc_state(job.pid)}")
    rewritten(state)
    rewritten(prom_path)

    # status, text and JSON: the job listed, escaped, still held.
    rc, out, err = umtrace_run(env, "status", "--state-file", state)
    c(rc == 0, f"status: exit {rc}: {err!r}")
    c.terminal("status", out + err)
    row = re.compile(rb"^%d +" % job.pid + re.escape(term(comm)) +
                     (rb" +dry-run +" if dry else rb" +stop +") + rb"(admission|floor|policy) ",
                     re.M)
    c(row.search(out), f"status: no row for {job.pid} naming {term(comm)!r}: {out!r}")
    c(dry or b"no longer stopped" not in out, f"status: {out!r}")
    rc, out, err = umtrace_run(env, "status", "--state-file", state, "--json")
    c.terminal("status --json stderr", err)
    st = (json_lines(c, "status --json", out) or [{}])[0]
    mine = [s for s in st.get("stopped", []) if s["pid"] == job.pid]
    c(len(mine) == 1 and jbytes(mine[0]["comm"]) == comm and
      (dry or mine[0]["still_stopped"]),
      f"status --json: the {'dry-run' if dry else 'stopped'} job is not listed, with its "
      f"comm's bytes{'' if dry else ' and still_stopped'}: {st.get('stopped')} "
      f"(kernel_stops {st.get('kernel_stops')}; its state is {proc_state(job.pid)})")

    # The metrics file: promtool's reading, and the label's.
    with open(prom_path, "rb") as f:
        text = f.read()
    c.terminal("metrics file", text)
    if shutil.which("promtool"):
        p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                           timeout=30)
        c(p.returncode == 0, f"promtool: {p.stdout + p.stderr!r}")
    labels = re.findall(rb'^umtrace_guard_process_host_bytes\{pid="%d",comm="((?:[^"\\]|\\.)*)"\} '
                        rb'\d+$' % job.pid, text, re.M)
    c(labels == [prom(comm)], f"metrics: the job's label is not {prom(comm)!r}: {labels} in "
      f"{text[-700:]!r}")

    # The post-mortem bundle.
    bundles = sorted(os.listdir(pm)) if os.path.isdir(pm) else []
    if c(len(bundles) == 1, f"post-mortem bundles: {bundles}"):
        b = os.path.join(pm, bundles[0])
        with open(os.path.join(b, "event.txt"), "rb") as f:
            event = f.read()
        c.terminal("event.txt", event)
        for line in event.rstrip(b"\n").split(b"\n"):
            c(EVENT_LINE.match(line), f"event.txt: not 'key value': {line!r}")
        c(b"\ncomm " + kv(comm) + b"\n" in event, f"event.txt: no comm {kv(comm)!r}: {event!r}")
        with open(os.path.join(b, "report.txt"), "rb") as f:
            rep = f.read()
        c.terminal("report.txt", rep)
        c(re.search(rb"^%d +" % job.pid + re.escape(term(comm)) + rb" +cuMemAlloc_v2 ", rep, re.M),
          f"report.txt: no row naming {term(comm)!r}: {rep!r}")
        with open(os.path.join(b, "held.folded"), "rb") as f:
            held = f.read()
        c.terminal("held.folded", held)
        stacks = folded_stacks(c, "held.folded", held)
        want = clean(comm).replace(b";", b":") + b" (%d)" % job.pid
        c(stacks and all(s[0] == want and s[-1] == b"cuMemAlloc_v2" for s, _ in stacks),
          f"held.folded: want {want!r};...;cuMemAlloc_v2: {stacks}")
        rc, out, err = umtrace_run(env, "report", os.path.join(b, "recording.umt"))
        c(rc == 0, f"report of the bundle's recording: exit {rc}: {err!r}")
        c.terminal("report of the bundle's recording", out + err)
        c(re.search(rb"^stopped pid %d \(" % job.pid + re.escape(term(comm)) + rb"\): ",
                    out, re.M), f"report of the bundle's recording: no stop line: {out[-900:]!r}")

    # The hook's environment: one variable a line, the comm's terminal form.
    with open(hook, "rb") as f:
        said = b"\n" + f.read()
    c.terminal("--on-stop's env", said)
    ours = [line for line in said.splitlines() if line.startswith(b"UMTRACE_")]
    c(b"\nUMTRACE_COMM=" + term(comm) + b"\n" in said,
      f"hook: UMTRACE_COMM is not {term(comm)!r}: {ours}")
    c(b"\nUMTRACE_ACTION=" + (b"dry-run" if dry else b"stop") + b"\n" in said, "hook: action")
    c(b"\nUMTRACE_PID=%d\n" % job.pid in said, "hook: pid")

    if not dry:
        # The operator resumes it by pid; it is stopped again at once.
        rc, out, err = umtrace_run(env, "resume", "--state-file", state, job.pid)
        c.terminal("resume", out + err)
        c(rc == 0 and out == b"resumed %d (%s)\n" % (job.pid, term(comm)),
          f"resume {job.pid}: exit {rc}: {out!r} {err!r} (its state {proc_state(job.pid)})")
    job.kill()
    job.wait(timeout=30)

    # The log: each line one line of umtrace's, each stop line key=value
    # tokens with the comm one quoted token.
    g.send_signal(signal.SIGINT)
    _, err = g.communicate(timeout=30)
    log = early + err
    c(g.returncode == 0, f"guard: exit {g.returncode}: {log[-800:]!r}")
    c.terminal("guard stderr", log)
    lines = log.rstrip(b"\n").split(b"\n")
    c(all(l.startswith(b"umtrace: ") for l in lines),
      f"guard: a line not umtrace's: {[l for l in lines if not l.startswith(b'umtrace: ')]}")
    stops = [l for l in lines if re.match(rb"umtrace: guard: (would-)?stop ", l)]
    c(stops, f"guard: no stop line: {log[-900:]!r}")
    for line in stops:
        m = STOP_LINE.match(line)
        if not c(m, f"guard: stop line not key=value tokens: {line!r}"):
            continue
        keys = dict(KV_TOKEN.findall(m.group(2)))
        c(keys.get(b"pid") == b"%d" % job.pid and keys.get(b"comm") == kv(comm) and
          keys.get(b"reason") in (b"admission", b"floor", b"policy") and
          keys.get(b"top_site", b'"').startswith(b'"'),
          f"guard: want pid={job.pid} comm={kv(comm)!r}: {line!r}")
    c.done()


def test_hostile_guard_dry_run(env):
    """A dry run against the job: its would-stop lines, status, metrics
    (promtool), post-mortem bundle and hook all carry its name escaped."""
    guard_run(env, dry=True)


def test_hostile_guard_stop(env):
    """A real stop of the job: as the dry run, and while it is held the
    guard keeps it in its state (status, metrics) and `umtrace resume PID`
    resumes it, naming it escaped."""
    guard_run(env, dry=False)


def test_hostile_paths_in_messages(env):
    """A command or a recording whose path is hostile, in an error line:
    one line, fit for a terminal."""
    c = Checks()
    d = os.fsencode(env.tmpfile("hostile-none"))
    bad = os.path.join(d, NAME_CTRL + b"\xc2\x9b\xe2\x80\xae")
    for args in ([b"trace", b"--libcuda", env.fake.encode(), b"--", bad],
                 [b"report", bad], [b"flamegraph", bad, b"-o", b"-"],
                 [b"timeline", bad, b"-o", b"-"]):
        rc, out, err = umtrace_run(env, *args)
        what = f"umtrace {args[0].decode()} with a missing " + \
            ("command" if args[0] == b"trace" else "FILE")
        c(rc in (1, 127), f"{what}: exit {rc}")
        c.terminal(f"{what}: stderr", err)
        c(all(l.startswith(b"umtrace: ") for l in err.rstrip(b"\n").split(b"\n")),
          f"{what}: a line not umtrace's: {err!r}")
    c.done()
