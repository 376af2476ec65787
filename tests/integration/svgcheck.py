# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Independent readers for what umtrace writes as SVG: xmllint for
well-formedness, headless Chromium to render (a screenshot, or the DOM after
the page's scripts ran), and a small PNG decoder to tell a real picture
from a blank one. Shared by the integration tests."""
import os
import shutil
import signal
import struct
import subprocess
import tempfile
import zlib

CHROMIUMS = ("chromium", "chromium-browser", "google-chrome")


def need(tool, package):
    """The path of tool; a missing one fails the test (install-deps.sh --test installs it)."""
    path = shutil.which(tool)
    assert path, f"{tool} not found: install Debian package {package} (scripts/install-deps.sh --test)"
    return path


def xmllint(path):
    """Well-formed XML, or an AssertionError with xmllint's complaint."""
    p = subprocess.run([need("xmllint", "libxml2-utils"), "--noout", path],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, f"xmllint {path}: {p.stderr.strip()[-800:]}"


def find_chromium():
    for name in CHROMIUMS:
        path = shutil.which(name)
        if path:
            return path
    raise AssertionError("chromium not found: install Debian package chromium "
                         "(scripts/install-deps.sh --test)")


def _chromium(args, timeout):
    """Run headless Chromium with a throwaway profile; its stdout.

    Chromium wants a writable HOME and profile directory, and may leave
    helper processes behind: it runs in its own session, and on a timeout
    the whole process group is killed."""
    home = tempfile.mkdtemp(prefix="umtrace-chromium-")
    argv = [find_chromium(), "--headless", "--no-sandbox", "--disable-gpu",
            "--disable-dev-shm-usage", "--no-first-run", "--hide-scrollbars",
            f"--user-data-dir={os.path.join(home, 'profile')}", *args]
    env = dict(os.environ, HOME=home, XDG_CONFIG_HOME=home, XDG_CACHE_HOME=home)
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate(timeout=30)
        raise AssertionError(f"chromium did not finish in {timeout}s: {' '.join(args)}")
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # helpers left behind, if any
        except ProcessLookupError:
            pass
        shutil.rmtree(home, ignore_errors=True)
    assert p.returncode == 0, f"chromium exit {p.returncode}: {err.decode(errors='replace')[-800:]}"
    return out.decode(errors="replace")


def screenshot(path, png, width=1200, height=800, timeout=60):
    """Render path (an SVG or HTML file) to png at width x height."""
    if os.path.exists(png):
        os.unlink(png)
    _chromium([f"--screenshot={png}", f"--window-size={width},{height}",
               "file://" + os.path.abspath(path)], timeout)
    assert os.path.exists(png) and os.path.getsize(png) > 0, f"no screenshot of {path}"
    return png


def dump_dom(path, timeout=60):
    """The document after its scripts ran, serialized."""
    return _chromium(["--dump-dom", "file://" + os.path.abspath(path)], timeout)


def _paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def png_colors(path):
    """(width, height, {pixel bytes: count}) of an 8-bit, non-interlaced PNG,
    decoded here: chunks (CRC-checked), zlib, then each scanline's filter."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG"
    pos, idat, ihdr = 8, [], None
    while pos + 12 <= len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        crc, = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        assert zlib.crc32(kind + body) & 0xffffffff == crc, f"{path}: bad CRC in {kind}"
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + n
    assert ihdr, f"{path}: no IHDR"
    w, h, depth, ctype, _, _, interlace = ihdr
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(ctype)
    assert depth == 8 and channels and not interlace, f"{path}: unsupported PNG {ihdr}"
    raw = zlib.decompress(b"".join(idat))
    stride = w * channels
    assert len(raw) == h * (stride + 1), f"{path}: {len(raw)} bytes for {w}x{h}"
    colors = {}
    prev = bytearray(stride)
    bpp = channels
    for y in range(h):
        i = y * (stride + 1)
        ftype, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        if ftype == 1:
            for x in range(bpp, stride):
                line[x] = (line[x] + line[x - bpp]) & 0xff
        elif ftype == 2:
            line = bytearray((a + b) & 0xff for a, b in zip(line, prev))
        elif ftype == 3:
            for x in range(stride):
                left = line[x - bpp] if x >= bpp else 0
                line[x] = (line[x] + ((left + prev[x]) >> 1)) & 0xff
        elif ftype == 4:
            for x in range(stride):
                left = line[x - bpp] if x >= bpp else 0
                upleft = prev[x - bpp] if x >= bpp else 0
                line[x] = (line[x] + _paeth(left, prev[x], upleft)) & 0xff
        else:
            assert ftype == 0, f"{path}: bad filter {ftype} on row {y}"
        for x in range(0, stride, bpp):
            px = bytes(line[x:x + bpp])
            colors[px] = colors.get(px, 0) + 1
        prev = line
    return w, h, colors


def assert_real_picture(png, width, height, min_colors=8, max_share=0.97):
    """The screenshot is the size asked for, holds many colours, and no one
    colour (the background) covers nearly all of it."""
    w, h, colors = png_colors(png)
    assert (w, h) == (width, height), f"{png}: {w}x{h}, expected {width}x{height}"
    top = max(colors.values())
    assert len(colors) >= min_colors, f"{png}: only {len(colors)} colours"
    assert top / (w * h) <= max_share, \
        f"{png}: one colour covers {100 * top / (w * h):.1f}% of the picture"
    return len(colors), top / (w * h)
