# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""The post-mortem formats, each read back by something that is not
umtrace: `test_export --write DIR` (tests/unit/test_export.c) writes every
format from one fixed stack set and timeline and prints the totals they must
show; each test here reads one format with an independent reader (xmllint,
Chromium, protoc, Python's gzip/json and a protobuf reader of its own) and
checks it against those totals."""
import gzip
import json
import os
import re
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET

import svgcheck

SVG_NS = "{http://www.w3.org/2000/svg}"
METRICS = ("calls", "host_bytes", "gpu_bytes")
PROC_RE = re.compile(r"^(.+) \((\d+)\)$")


class Samples:
    """The files test_export wrote, in a temporary directory of their own."""

    def __init__(self, env):
        exe = os.path.join(env.out, "tests", "unit", "test_export")
        assert os.path.exists(exe), f"{exe} not built (make {exe})"
        self.dir = tempfile.mkdtemp(prefix="umtrace-export-")
        p = subprocess.run([exe, "--write", self.dir], capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 0, f"test_export --write: {p.stderr[-800:]}"
        self.want = json.loads(p.stdout)

    def path(self, key):
        return os.path.join(self.dir, self.want["files"][key])

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.dir, ignore_errors=True)


def check_stack(frames, want):
    """Root is "comm (pid)" of a known process, leaf a GPU API."""
    assert all(frames), f"empty frame in {frames}"
    assert PROC_RE.match(frames[0]) and frames[0] in want["processes"], frames[0]
    assert frames[-1] in want["leaf_apis"], frames[-1]
    assert len(frames) <= want["max_depth"], frames


def read_folded(path):
    stacks = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            assert line.endswith("\n"), f"{path}:{n}: unterminated line"
            stack, sep, value = line[:-1].rpartition(" ")
            assert sep and value.isdigit(), f"{path}:{n}: not 'stack value': {line!r}"
            stacks.append((stack.split(";"), int(value)))
    return stacks


def test_export_folded(env):
    """Every line is "frame;...;leaf value"; per metric, the lines add up to
    the total and zero-valued stacks are left out."""
    with Samples(env) as s:
        w = s.want
        for m in METRICS:
            stacks = read_folded(os.path.join(s.dir, w["files"]["folded_by_metric"][m]))
            assert len(stacks) == w["stacks"][m], (m, len(stacks))
            assert sum(v for _, v in stacks) == w["totals"][m], m
            assert all(v > 0 for _, v in stacks), m
            for frames, _ in stacks:
                check_stack(frames, w)
            keys = [";".join(f) for f, _ in stacks]
            assert len(set(keys)) == len(keys), f"{m}: a stack printed twice"
        host = read_folded(s.path("folded"))
        assert sum(v for _, v in host) == w["totals"]["host_bytes"]
        assert any(w["special_frame"] in f for f, _ in host), "special frame lost"


def frame_groups(root):
    return [g for g in root.iter(SVG_NS + "g") if "f" in g.get("class", "").split()]


def test_export_svg(env):
    """Well-formed, self-contained; the frames parse back to the totals,
    escaped names survive; Chromium renders a real picture."""
    with Samples(env) as s:
        w, path = s.want, s.path("svg")
        svgcheck.xmllint(path)
        root = ET.parse(path).getroot()
        assert root.tag == SVG_NS + "svg" and root.get("width") == "1200", root.attrib
        for el in root.iter():
            for attr in ("href", "{http://www.w3.org/1999/xlink}href", "src"):
                assert not el.get(attr), f"external reference {el.get(attr)}"
        frames = frame_groups(root)
        titles = [g.find(SVG_NS + "title").text for g in frames]
        by_depth = {}
        for g in frames:
            by_depth.setdefault(int(g.get("data-d")), []).append(g)
        assert len(by_depth[0]) == 1 and int(by_depth[0][0].get("data-v")) == \
            w["totals"]["host_bytes"], "the root frame holds the total"
        procs = [g.find(SVG_NS + "title").text.split("\n")[0] for g in by_depth[1]]
        assert sorted(procs) == sorted(w["processes"]), procs
        assert sum(int(g.get("data-v")) for g in by_depth[1]) == w["totals"]["host_bytes"]
        width = sum(float(g.find(SVG_NS + "rect").get("width")) for g in by_depth[1])
        assert abs(width - 1180) < 1, f"processes span {width} px"
        assert any(t.split("\n")[0] == w["special_frame"] for t in titles), \
            "the name with <>&\"' did not survive escaping"
        for t in titles:
            assert re.search(r"\n[\d.]+ (B|KiB|MiB|GiB|TiB), [\d.]+% of all", t), t
        text = "".join(root.itertext())
        assert "GPU allocation call sites by host bytes" in text
        assert "Total 26.1 GiB of host bytes in 2,258 calls" in text, text[:300]

        png = os.path.join(s.dir, "sample.png")
        svgcheck.screenshot(path, png)
        svgcheck.assert_real_picture(png, 1200, 800)


# Run inside the flamegraph after its own script: click a frame, search,
# reset; the results are left in the DOM for --dump-dom.
PROBE = """<script type="text/ecmascript"><![CDATA[
(function () {
var out = {}, frames = document.querySelectorAll('g.f'), target = null;
function click(el) { el.dispatchEvent(new MouseEvent('click', {bubbles: true})); }
frames.forEach(function (f) {
  if (f.firstElementChild.textContent.split('\\n')[0] === 'cuMemCreate') target = f;
});
click(target);
out.zoomed_width = +target.querySelector('rect').getAttribute('width');
out.unzoom_shown = document.getElementById('unzoom').style.display !== 'none';
out.hidden = 0;
frames.forEach(function (f) { if (f.style.display === 'none') out.hidden++; });
window.prompt = function () { return '^cuMemAlloc'; };
click(document.getElementById('search'));
out.matched = document.getElementById('matched').textContent;
out.highlighted = document.querySelectorAll('g.f.hl').length;
click(document.getElementById('unzoom'));
out.root_width = +frames[0].querySelector('rect').getAttribute('width');
out.shown_after_reset = 0;
frames.forEach(function (f) { if (f.style.display !== 'none') out.shown_after_reset++; });
var t = document.createElementNS('http://www.w3.org/2000/svg', 'text');
t.setAttribute('id', 'probe');
t.textContent = JSON.stringify(out);
document.documentElement.appendChild(t);
})();
]]></script>
</svg>
"""


def test_export_svg_interactive(env):
    """In Chromium: clicking a frame zooms it to the full width, the search
    marks matches and reports their share, reset zoom restores the view."""
    with Samples(env) as s:
        w = s.want
        with open(s.path("svg"), encoding="utf-8") as f:
            doc = f.read()
        assert doc.rstrip().endswith("</svg>")
        probe = os.path.join(s.dir, "probe.svg")
        with open(probe, "w", encoding="utf-8") as f:
            f.write(doc.rstrip()[:-len("</svg>")] + PROBE)
        dom = svgcheck.dump_dom(probe)
        m = re.search(r'<text id="probe">([^<]*)</text>', dom)
        assert m, f"the page's script did not run: {dom[-400:]}"
        got = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))
        n_frames = len(frame_groups(ET.fromstring(doc)))
        assert abs(got["zoomed_width"] - 1180) < 0.5, got
        assert got["unzoom_shown"] and got["hidden"] > 0, got
        # ^cuMemAlloc: cuMemAlloc_v2 twice, cuMemAllocAsync, cuMemAllocManaged
        match = (13 << 30) + (6 << 30) + (5 << 30) // 4 + (384 << 20)
        pct = 100 * match / w["totals"]["host_bytes"]
        assert got["highlighted"] == 4, got
        assert f"Matched 4 frames: 20.6 GiB ({pct:.2f}%)" == got["matched"], got
        assert abs(got["root_width"] - 1180) < 0.5 and got["shown_after_reset"] == n_frames, got


def read_varint(buf, pos):
    v = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        v |= (b & 0x7f) << shift
        if not b & 0x80:
            return v, pos
        shift += 7
        assert shift < 64, "varint too long"


def fields(buf):
    """(field, wire type, value) of a protobuf message: ints or bytes."""
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, pos = read_varint(buf, pos)
        elif wire == 2:
            n, pos = read_varint(buf, pos)
            v = buf[pos:pos + n]
            assert len(v) == n, "truncated field"
            pos += n
        else:
            raise AssertionError(f"unexpected wire type {wire} for field {field}")
        yield field, wire, v


def ints(wire, v):
    """A repeated integer field, packed or not."""
    if wire == 0:
        return [v]
    out, pos = [], 0
    while pos < len(v):
        x, pos = read_varint(v, pos)
        out.append(x)
    return out


# The messages of github.com/google/pprof proto/profile.proto that umtrace
# writes, for protoc to check every field's number and type.
PROFILE_PROTO = """syntax = "proto3";
package perftools.profiles;
message Profile {
  repeated ValueType sample_type = 1;
  repeated Sample sample = 2;
  repeated Mapping mapping = 3;
  repeated Location location = 4;
  repeated Function function = 5;
  repeated string string_table = 6;
  int64 drop_frames = 7;
  int64 keep_frames = 8;
  int64 time_nanos = 9;
  int64 duration_nanos = 10;
  ValueType period_type = 11;
  int64 period = 12;
  repeated int64 comment = 13;
  int64 default_sample_type = 14;
}
message ValueType { int64 type = 1; int64 unit = 2; }
message Sample {
  repeated uint64 location_id = 1;
  repeated int64 value = 2;
  repeated Label label = 3;
}
message Label { int64 key = 1; int64 str = 2; int64 num = 3; int64 num_unit = 4; }
message Mapping {
  uint64 id = 1; uint64 memory_start = 2; uint64 memory_limit = 3;
  uint64 file_offset = 4; int64 filename = 5; int64 build_id = 6;
}
message Location {
  uint64 id = 1; uint64 mapping_id = 2; uint64 address = 3;
  repeated Line line = 4; bool is_folded = 5;
}
message Line { uint64 function_id = 1; int64 line = 2; }
message Function {
  uint64 id = 1; int64 name = 2; int64 system_name = 3;
  int64 filename = 4; int64 start_line = 5;
}
"""


def test_export_pprof(env):
    """gzip, then protoc parses it (raw, and as profile.proto); decoded here
    the three sample values add up to the totals, stacks run leaf first
    from a GPU API to the process, and the labels name that process."""
    protoc = svgcheck.need("protoc", "protobuf-compiler")
    with Samples(env) as s:
        w = s.want
        with open(s.path("pprof"), "rb") as f:
            head = f.read(2)
        assert head == b"\x1f\x8b", "not gzip"
        with gzip.open(s.path("pprof"), "rb") as f:
            raw = f.read()
        p = subprocess.run([protoc, "--decode_raw"], input=raw, capture_output=True, timeout=60)
        assert p.returncode == 0, p.stderr.decode()[-500:]
        proto = os.path.join(s.dir, "profile.proto")
        with open(proto, "w") as f:
            f.write(PROFILE_PROTO)
        p = subprocess.run([protoc, f"-I{s.dir}", "--decode=perftools.profiles.Profile",
                            proto], input=raw, capture_output=True, timeout=60)
        assert p.returncode == 0, p.stderr.decode()[-500:]
        assert b"default_sample_type:" in p.stdout and b"sample {" in p.stdout

        strings, types, samples, locs, funcs, default = [], [], [], {}, {}, None
        for f, wire, v in fields(raw):
            if f == 6:
                strings.append(v.decode("utf-8"))
            elif f == 1:
                vt = {g: x for g, _, x in fields(v)}
                types.append((vt.get(1, 0), vt.get(2, 0)))
            elif f == 2:
                samples.append(v)
            elif f == 4:
                loc = {g: x for g, _, x in fields(v) if g != 4}
                lines = [dict((g, x) for g, _, x in fields(ln)) for g, _, ln in fields(v) if g == 4]
                assert loc.get(1) and loc[1] not in locs, f"location id {loc.get(1)}"
                assert len(lines) == 1, lines
                locs[loc[1]] = lines[0][1]
            elif f == 5:
                fn = {g: x for g, _, x in fields(v)}
                assert fn.get(1) and fn[1] not in funcs, f"function id {fn.get(1)}"
                funcs[fn[1]] = fn[2]
            elif f == 14:
                default = v
        assert strings[0] == "", "string_table[0] must be empty"
        assert [(strings[a], strings[b]) for a, b in types] == \
            [("calls", "count"), ("host_space", "bytes"), ("gpu_space", "bytes")], types
        assert strings[default] == "host_space"

        totals = [0, 0, 0]
        for smp in samples:
            loc_ids, values, labels = [], [], {}
            for f, wire, v in fields(smp):
                if f == 1:
                    loc_ids += ints(wire, v)
                elif f == 2:
                    values += ints(wire, v)
                elif f == 3:
                    lab = {g: x for g, _, x in fields(v)}
                    key = strings[lab[1]]
                    labels[key] = strings[lab[2]] if key == "comm" else lab[3]
            assert len(values) == 3, values
            totals = [a + b for a, b in zip(totals, values)]
            names = [strings[funcs[locs[i]]] for i in loc_ids]
            check_stack(names[::-1], w)        # leaf first in pprof
            assert names[-1] == f"{labels['comm']} ({labels['pid']})", (names[-1], labels)
        assert totals == [w["totals"][m] for m in METRICS], totals
        assert len(samples) == w["stacks"]["calls"]


# From the rules of https://www.speedscope.app/file-format-schema.json, for
# what umtrace writes (sampled profiles).
SPEEDSCOPE_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "required": ["$schema", "shared", "profiles"],
    "properties": {
        "$schema": {"enum": ["https://www.speedscope.app/file-format-schema.json"]},
        "name": {"type": "string"},
        "exporter": {"type": "string"},
        "activeProfileIndex": {"type": ["number", "null"]},
        "shared": {
            "type": "object",
            "required": ["frames"],
            "properties": {"frames": {"type": "array", "items": {
                "type": "object", "required": ["name"],
                "properties": {"name": {"type": "string"}, "file": {"type": "string"},
                               "line": {"type": "number"}, "col": {"type": "number"}}}}},
        },
        "profiles": {"type": "array", "items": {
            "type": "object",
            "required": ["type", "name", "unit", "startValue", "endValue", "samples", "weights"],
            "properties": {
                "type": {"enum": ["sampled"]},
                "name": {"type": "string"},
                "unit": {"enum": ["none", "nanoseconds", "microseconds", "milliseconds",
                                  "seconds", "bytes"]},
                "startValue": {"type": "number"},
                "endValue": {"type": "number"},
                "samples": {"type": "array", "items": {"type": "array",
                                                       "items": {"type": "number"}}},
                "weights": {"type": "array", "items": {"type": "number"}},
            }}},
    },
}


def test_export_speedscope(env):
    """Valid by the published schema's rules, and consistent: frame indices
    in range, one weight per sample, endValue the sum of the weights."""
    with Samples(env) as s:
        w = s.want
        with open(s.path("speedscope"), encoding="utf-8") as f:
            doc = json.load(f)
        try:
            import jsonschema
        except ImportError:
            jsonschema = None
        if jsonschema:
            jsonschema.validate(doc, SPEEDSCOPE_SCHEMA)
        # The same rules by hand, so they hold without jsonschema too.
        assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
        frames = doc["shared"]["frames"]
        assert all(isinstance(fr.get("name"), str) for fr in frames)
        names = [fr["name"] for fr in frames]
        assert len(set(names)) == len(names), "a frame listed twice"
        assert len(doc["profiles"]) == 1 and doc.get("activeProfileIndex", 0) == 0
        prof = doc["profiles"][0]
        assert prof["type"] == "sampled" and prof["unit"] == "bytes", prof["unit"]
        assert len(prof["samples"]) == len(prof["weights"]) == w["stacks"]["host_bytes"]
        assert prof["startValue"] == 0
        assert prof["endValue"] == sum(prof["weights"]) == w["totals"]["host_bytes"]
        for smp in prof["samples"]:
            assert all(isinstance(i, int) and 0 <= i < len(frames) for i in smp), smp
            check_stack([names[i] for i in smp], w)
        assert w["special_frame"] in names


def test_export_timeline(env):
    """Well-formed, axes labelled with units, legend naming each process,
    the 13 GiB burst and the guard stop labelled; renders to a picture."""
    with Samples(env) as s:
        w, path = s.want["timeline"], s.path("timeline")
        svgcheck.xmllint(path)
        root = ET.parse(path).getroot()
        texts = ["".join(t.itertext()) for t in root.iter(SVG_NS + "text")]
        for label in w["axis_labels"]:
            assert any(label in t for t in texts), f"no axis label {label!r}"
        ticks = [t for t in texts if re.fullmatch(r"\d+(\.\d+)?", t)]
        assert len(ticks) >= 6, f"tick labels: {ticks}"
        for proc in w["processes"]:
            assert any(t.startswith(proc) for t in texts), f"no legend entry for {proc}"
        assert w["burst_label"] in texts, "the 13 GiB burst is not labelled"
        assert any(t.startswith(w["stop_label"]) for t in texts), "no stop label"
        assert len(root.findall(f".//{SVG_NS}g[@class='stop']")) == w["stops"]
        assert len(root.findall(f".//{SVG_NS}rect[@class='burst']")) == w["bursts"]
        assert root.find(f".//{SVG_NS}polyline[@class='avail']") is not None

        png = os.path.join(s.dir, "timeline.png")
        svgcheck.screenshot(path, png)
        svgcheck.assert_real_picture(png, 1200, 800)
