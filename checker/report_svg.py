"""Inline SVG charts for the report, drawn by hand: no scripts, no fetches.

Guarantees: every function returns one self-contained `<svg>` element as a
string (text escaped, no external references), sized in CSS pixels, whose
cost is bounded by the number of points given — callers downsample first.
`line_chart` draws time series (linear or log y), `lane_chart` one lane of
colored spans per row (the op timeline); both shade fault intervals and can
draw labelled vertical markers.
"""
from __future__ import annotations

import math
from html import escape

FAULT_FILL = "#f4b183"
TYPE_COLORS = {"ok": "#5b9f5b", "fail": "#d9534f", "info": "#f0ad4e"}
SERIES_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                 "#17becf", "#bcbd22", "#ff7f0e"]
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 40, 34


def _nice_step(span: float, ticks: int = 6) -> float:
    if span <= 0:
        return 1.0
    raw = span / ticks
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1e6 or a < 1e-3:
        return f"{v:.0e}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 1:
        return f"{v:.3g}"
    return f"{v:.3g}"


class _Frame:
    """Plot area geometry: data -> pixel transforms."""

    def __init__(self, width: int, height: int, x0: float, x1: float, y0: float, y1: float,
                 log_y: bool = False):
        self.w, self.h = width, height
        self.x0, self.x1 = x0, (x1 if x1 > x0 else x0 + 1)
        self.log_y = log_y
        if log_y:
            y0, y1 = math.log10(max(y0, 1e-9)), math.log10(max(y1, 1e-9))
        self.y0, self.y1 = y0, (y1 if y1 > y0 else y0 + 1)
        self.pw = width - LEFT - RIGHT
        self.ph = height - TOP - BOTTOM

    def x(self, v: float) -> float:
        return LEFT + (v - self.x0) / (self.x1 - self.x0) * self.pw

    def y(self, v: float) -> float:
        if self.log_y:
            v = math.log10(max(v, 1e-9))
        v = min(max(v, self.y0), self.y1)
        return TOP + self.ph - (v - self.y0) / (self.y1 - self.y0) * self.ph


def _axes(fr: _Frame, title: str, x_label: str, y_label: str) -> list[str]:
    out = [f'<rect x="{LEFT}" y="{TOP}" width="{fr.pw}" height="{fr.ph}" fill="#fff" stroke="#999"/>',
           f'<text x="{LEFT}" y="16" class="t">{escape(title)}</text>',
           f'<text x="{LEFT + fr.pw / 2:.0f}" y="{fr.h - 4}" class="l" text-anchor="middle">'
           f'{escape(x_label)}</text>',
           f'<text x="12" y="{TOP + fr.ph / 2:.0f}" class="l" text-anchor="middle" '
           f'transform="rotate(-90 12 {TOP + fr.ph / 2:.0f})">{escape(y_label)}</text>']
    step = _nice_step(fr.x1 - fr.x0)
    v = math.ceil(fr.x0 / step) * step
    while v <= fr.x1 + 1e-9:
        px = fr.x(v)
        out.append(f'<line x1="{px:.1f}" y1="{TOP + fr.ph}" x2="{px:.1f}" y2="{TOP + fr.ph + 4}" stroke="#666"/>'
                   f'<text x="{px:.1f}" y="{TOP + fr.ph + 15}" class="k" text-anchor="middle">{_fmt(v)}</text>')
        v += step
    if fr.log_y:
        e = math.floor(fr.y0)
        while e <= fr.y1 + 1e-9:
            py = fr.y(10 ** e)
            out.append(f'<line x1="{LEFT}" y1="{py:.1f}" x2="{LEFT + fr.pw}" y2="{py:.1f}" stroke="#eee"/>'
                       f'<text x="{LEFT - 4}" y="{py + 4:.1f}" class="k" text-anchor="end">{_fmt(10 ** e)}</text>')
            e += 1
    else:
        step = _nice_step(fr.y1 - fr.y0, 4)
        v = math.ceil(fr.y0 / step) * step
        while v <= fr.y1 + 1e-9:
            py = fr.y(v)
            out.append(f'<line x1="{LEFT}" y1="{py:.1f}" x2="{LEFT + fr.pw}" y2="{py:.1f}" stroke="#eee"/>'
                       f'<text x="{LEFT - 4}" y="{py + 4:.1f}" class="k" text-anchor="end">{_fmt(v)}</text>')
            v += step
    return out


def _shading(fr: _Frame, shading: list, over: bool = False) -> list[str]:
    """Fault bands; `over` draws them above opaque content: lighter, outlined, with a top bar."""
    out = []
    for x0, x1, label in shading:
        a, b = fr.x(max(x0, fr.x0)), fr.x(min(max(x1, x0), fr.x1))
        w = max(b - a, 1.5)
        style = ('fill="#b35900" fill-opacity="0.18" stroke="#b35900" stroke-opacity="0.6"' if over
                 else f'fill="{FAULT_FILL}" fill-opacity="0.35"')
        out.append(f'<rect x="{a:.1f}" y="{TOP}" width="{w:.1f}" height="{fr.ph}" {style}>'
                   f'<title>{escape(label)}</title></rect>')
        if over:
            out.append(f'<rect x="{a:.1f}" y="{TOP - 5}" width="{w:.1f}" height="4" fill="{FAULT_FILL}"/>')
    return out


def _markers(fr: _Frame, markers: list) -> list[str]:
    out = []
    for x, label, color in markers:
        px = fr.x(x)
        out.append(f'<line x1="{px:.1f}" y1="{TOP}" x2="{px:.1f}" y2="{TOP + fr.ph}" stroke="{color}" '
                   f'stroke-width="2" stroke-dasharray="4 2"/>'
                   f'<text x="{px + 3:.1f}" y="{TOP + 11}" class="k" fill="{color}">{escape(label)}</text>')
    return out


def _legend(fr: _Frame, items: list[tuple[str, str, bool]]) -> list[str]:
    out, x = [], LEFT
    for name, color, dash in items:
        d = ' stroke-dasharray="5 3"' if dash else ""
        out.append(f'<line x1="{x}" y1="28" x2="{x + 18}" y2="28" stroke="{color}" stroke-width="2"{d}/>'
                   f'<text x="{x + 22}" y="32" class="k">{escape(name)}</text>')
        x += 34 + 6 * len(name)
    return out


def _svg(fr: _Frame, parts: list[str]) -> str:
    return (f'<svg width="{fr.w}" height="{fr.h}" '
            f'viewBox="0 0 {fr.w} {fr.h}" role="img">' + "".join(parts) + "</svg>")


def line_chart(series: list[dict], *, title: str, x_label: str, y_label: str, x_max: float,
               log_y: bool = False, shading: list = (), markers: list = (), width: int = 960,
               height: int = 230) -> str:
    """series: [{"name", "color", "points": [(x, y)], "dash": bool}]."""
    ys = [y for s in series for _, y in s["points"] if y is not None]
    if log_y:
        pos = [y for y in ys if y > 0]
        y0 = 10 ** math.floor(math.log10(min(pos))) if pos else 1e-3
        y1 = 10 ** math.ceil(math.log10(max(pos))) if pos else 1
    else:
        y0, y1 = 0.0, (max(ys) * 1.05 if ys and max(ys) > 0 else 1.0)
    fr = _Frame(width, height, 0.0, x_max, y0, y1, log_y)
    parts = _axes(fr, title, x_label, y_label) + _shading(fr, list(shading))
    for s in series:
        pts = [(x, y) for x, y in s["points"] if y is not None and (not log_y or y > 0)]
        if not pts:
            continue
        d = " ".join(f"{fr.x(x):.1f},{fr.y(y):.1f}" for x, y in pts)
        dash = ' stroke-dasharray="5 3"' if s.get("dash") else ""
        if len(pts) == 1:
            x, y = pts[0]
            parts.append(f'<circle cx="{fr.x(x):.1f}" cy="{fr.y(y):.1f}" r="2.5" fill="{s["color"]}"/>')
        else:
            parts.append(f'<polyline fill="none" stroke="{s["color"]}" stroke-width="1.4"{dash} points="{d}"/>')
    parts += _markers(fr, list(markers))
    parts += _legend(fr, [(s["name"], s["color"], bool(s.get("dash"))) for s in series])
    return _svg(fr, parts)


def lane_chart(rows: list[tuple], *, title: str, x_label: str, x_max: float, shading: list = (),
               markers: list = (), width: int = 960) -> str:
    """rows: [(label, spans [(x0, x1, status)], marks [(x0, x1, status, share 0..1)])]: one lane
    per row; spans fill the lane, marks rise from its bottom by `share` of its height."""
    lane = 14 if len(rows) <= 24 else 9
    height = TOP + BOTTOM + lane * max(len(rows), 1)
    fr = _Frame(width, height, 0.0, x_max, 0.0, 1.0)
    parts = _axes(fr, title, x_label, "")[:3]
    step = _nice_step(x_max)
    v = 0.0
    while v <= x_max + 1e-9:
        px = fr.x(v)
        parts.append(f'<text x="{px:.1f}" y="{TOP + fr.ph + 15}" class="k" text-anchor="middle">{_fmt(v)}</text>')
        v += step
    for i, row in enumerate(rows):
        label, spans = row[0], row[1]
        marks = row[2] if len(row) > 2 else ()
        y = TOP + i * lane
        parts.append(f'<text x="{LEFT - 4}" y="{y + lane - 3}" class="k" text-anchor="end">{escape(label)}</text>')
        for x0, x1, status in spans:
            a, b = fr.x(x0), fr.x(x1)
            parts.append(f'<rect x="{a:.1f}" y="{y + 1}" width="{max(b - a, 1):.1f}" height="{lane - 2}" '
                         f'fill="{TYPE_COLORS.get(status, "#999")}"/>')
        for x0, x1, status, share in marks:
            a, b = fr.x(x0), fr.x(x1)
            h = max((lane - 2) * min(share, 1.0), 2.0)
            parts.append(f'<rect x="{a:.1f}" y="{y + lane - 1 - h:.1f}" width="{max(b - a, 1):.1f}" '
                         f'height="{h:.1f}" fill="{TYPE_COLORS.get(status, "#999")}"/>')
    parts += _shading(fr, list(shading), over=True)
    parts += _markers(fr, list(markers))
    parts += _legend(fr, [(t, c, False) for t, c in TYPE_COLORS.items()] + [("fault", FAULT_FILL, False)])
    return _svg(fr, parts)
