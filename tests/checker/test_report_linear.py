"""report.html draws a linearizability failure (Porcupine-style) and the realtime lag.

The drawing is checked as markup and, when Debian's chromium is installed, in a real
headless browser: the screenshot must show the red failing op and the green prefix.
"""
import json
import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from checker.formats import open_history
from checker.kafka import check_kafka
from checker.linear import check_linearizable
from checker.report import render_report
from checker.report_linear import COLORS
from checker.report_series import SeriesCollector

pytestmark = pytest.mark.fast

DATA = Path(__file__).resolve().parents[1] / "data"
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)


def kv_failure():
    """Porcupine's c10-bad: key 7 breaks at a get that returns "" after appends."""
    s = SeriesCollector()
    r = check_linearizable(s.tee(open_history(str(DATA / "porcupine" / "kv" / "c10-bad.txt.gz"), "auto")), "kv")
    assert r["valid"] is False
    return r, render_report(r, s, title="c10-bad")


def test_the_failing_keys_ops_are_drawn_per_process_with_prefix_and_failing_op():
    r, html = kv_failure()
    nl = r["anomalies"]["nonlinearizable"]
    tl = nl["timeline"]
    assert [op for op in tl if op["failed"]] == [op for op in tl if op["index"] == nl["op"]["invoke_index"]]
    assert sorted(op["order"] for op in tl if op["order"] is not None) == list(range(len(nl["prefix"])))
    assert html.count('class="op failed"') == 1
    assert html.count('class="op prefix"') == len(nl["prefix"])
    for p in {op["process"] for op in tl}:
        assert f">process {p}</text>" in html
    assert "1. append(" in html                            # prefix ops numbered in order
    assert "no linearization places it" in html
    assert "<script" not in html.lower() and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_a_valid_history_draws_no_failure():
    r = check_linearizable(open_history(str(DATA / "porcupine" / "kv" / "c10-ok.txt.gz"), "auto"), "kv")
    assert r["valid"] is True
    assert 'class="op' not in render_report(r, None)


def test_realtime_lag_is_plotted_with_the_fault_bands():
    ops, t = [], 0
    def add(p, type_, f, value):
        nonlocal t
        t += 10_000_000                     # 10 ms per op
        ops.append({"index": len(ops), "time": t, "process": p, "type": type_, "f": f, "value": value})
    add("nemesis", "invoke", "start-partition", None)
    add("nemesis", "info", "start-partition", None)
    pos = 0
    for i in range(20):
        add(0, "invoke", "send", [["send", 0, i]])
        add(0, "ok", "send", [["send", 0, [i, i]]])
        if i % 5 == 4:                      # every fifth send the consumer polls, two records behind
            add(1, "invoke", "poll", [["poll"]])
            add(1, "ok", "poll", [["poll", {"0": [[j, j] for j in range(pos, i - 1)]}]])
            pos = i - 1
        if i == 10:
            add("nemesis", "invoke", "stop-partition", None)
            add("nemesis", "info", "stop-partition", None)
    s = SeriesCollector()
    r = check_kafka(ops, series=s)
    assert r["realtime_lag"]["max_ms"] > 0
    html = render_report(r, s)
    section = html.split("<h2>Realtime lag</h2>", 1)[1].split("<h2>", 1)[0]
    assert "<polyline" in section and "partition" in section        # the line and the fault band


# ---------------------------------------------------------------------------- in a browser

def _png_pixels(path: Path):
    """(width, height, rows of RGB tuples) of an 8-bit RGB/RGBA PNG, with the stdlib only."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), (depth, ctype)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(h):
        ft, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if ft == 1:
                line[x] = (line[x] + a) & 255
            elif ft == 2:
                line[x] = (line[x] + b) & 255
            elif ft == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif ft == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, bpp)])
        prev = line
    return w, h, rows


def _count(rows, hex_color, tol=12):
    want = tuple(int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return sum(1 for row in rows for px in row if all(abs(p - q) <= tol for p, q in zip(px, want)))


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install chromium)")
def test_the_failure_drawing_renders_in_headless_chromium(tmp_path):
    _, html = kv_failure()
    # the drawing alone, so the screenshot is about it
    start = html.index("<h2>Where linearizability breaks</h2>")
    end = html.index("<h2>", start + 10)
    page = tmp_path / "failure.html"
    page.write_text(html[:html.index("<body>") + 6] + html[start:end] + "</body></html>")
    shot = tmp_path / "shot.png"
    args = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1000,500", f"--screenshot={shot}",
            page.as_uri()]
    out = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert shot.exists(), out.stderr[-2000:]
    w, h, rows = _png_pixels(shot)
    assert (w, h) == (1000, 500)
    assert _count(rows, COLORS["failed"]) > 40          # the op that cannot be placed, in red
    assert _count(rows, COLORS["prefix"]) > 400         # the linearizable prefix, in green
    dom = subprocess.run(args[:-2] + ["--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120).stdout
    assert dom.count('class="op failed"') == 1 and "<svg" in dom


def test_long_values_are_clipped_in_the_drawing_data():
    from checker.history import Op
    big = "v" * 5000
    ops = [Op(0, 0, "invoke", "write", big), Op(1, 0, "ok", "write", big),
           Op(2, 1, "invoke", "read", None), Op(3, 1, "ok", "read", "other")]
    r = check_linearizable(ops, "register")
    assert r["valid"] is False
    (write,) = [op for op in r["anomalies"]["nonlinearizable"]["timeline"] if op["f"] == "write"]
    assert len(write["value"]) == 200 and write["value"].endswith("…")
