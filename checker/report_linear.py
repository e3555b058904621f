"""A linearizability failure drawn, as Porcupine's visualisation draws one, in inline SVG.

Guarantees: `failure_svg(witness)` turns the `nonlinearizable` witness of
checker.linear (its `timeline`) into one self-contained <svg> (no scripts, no
external references, every history string escaped): one lane per process,
each op of the failing key a bar from its invoke to its completion (an
indeterminate op runs to the right edge, dashed); ops of the longest
linearizable prefix found are green and numbered in linearization order, the
op that cannot be placed is red with a line at its completion, the others
grey. Hovering a bar shows the op (an SVG <title>). `prefix_list(witness)`
is the prefix as an ordered list of ops (the last PREFIX_SHOWN). Returns ""
when the witness has no timeline.
"""
from __future__ import annotations

import json
from html import escape
from typing import Any

WIDTH = 960
LEFT, RIGHT, TOP, BOTTOM = 70, 16, 34, 40
LANE = 26
PREFIX_SHOWN = 16
COLORS = {"prefix": "#5cb85c", "failed": "#d9534f", "other": "#c8c8c8"}
CHAR_PX = 6.2            # width of one character of the 10px label font, roughly


def _value(v: Any) -> str:
    return json.dumps(v, default=str, separators=(",", ":"))


def _label(op: dict) -> str:
    return f"{op.get('f')}({_value(op.get('value'))})"


def _fit(text: str, px: float) -> str:
    n = int(px / CHAR_PX)
    if n <= 1:
        return ""
    return text if len(text) <= n else text[:max(n - 1, 1)] + "…"


def failure_svg(w: dict) -> str:
    ops = w.get("timeline") or []
    if not ops:
        return ""
    procs = sorted({op["process"] for op in ops}, key=lambda p: (not isinstance(p, int), str(p)))
    lane_of = {p: i for i, p in enumerate(procs)}
    x0 = min(op["start"] for op in ops)
    x1 = max([op["end"] for op in ops if op["end"] is not None] + [op["start"] for op in ops]) + 1
    pw = WIDTH - LEFT - RIGHT
    height = TOP + BOTTOM + LANE * len(procs)

    def x(v: float) -> float:
        return LEFT + (v - x0) / max(x1 - x0, 1) * pw

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
             f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="linearizability failure">',
             f'<text x="{LEFT}" y="16" class="t">ops of key {escape(_value(w.get("key")))} by process: '
             f'green = linearizable prefix (in order), red = the op that cannot be placed</text>']
    for p, i in lane_of.items():
        y = TOP + i * LANE
        parts.append(f'<text x="{LEFT - 6}" y="{y + LANE / 2 + 4:.1f}" class="k" text-anchor="end">'
                     f'process {escape(str(p))}</text>')
        parts.append(f'<line x1="{LEFT}" y1="{y + LANE - 1}" x2="{LEFT + pw}" y2="{y + LANE - 1}" '
                     f'stroke="#eee"/>')
    fail_x = None
    for op in ops:
        y = TOP + lane_of[op["process"]] * LANE + 4
        a = x(op["start"])
        b = x(op["end"]) if op["end"] is not None else LEFT + pw
        kind = "failed" if op.get("failed") else ("prefix" if op.get("order") is not None else "other")
        dash = ' stroke-dasharray="4 3"' if op["end"] is None else ""
        stroke = "#8b0000" if kind == "failed" else "#666"
        text = _label(op)
        if op.get("order") is not None:
            text = f"{op['order'] + 1}. {text}"
        title = (f"op {op.get('index')} · process {op['process']} · {op.get('type')} · {_label(op)}"
                 + (f" · #{op['order'] + 1} in the linearizable prefix" if op.get("order") is not None else "")
                 + (" · cannot be linearized" if op.get("failed") else "")
                 + (" · indeterminate" if op["end"] is None else ""))
        parts.append(f'<g class="op {kind}"><title>{escape(title)}</title>'
                     f'<rect x="{a:.1f}" y="{y}" width="{max(b - a, 2):.1f}" height="{LANE - 9}" rx="3" '
                     f'fill="{COLORS[kind]}" stroke="{stroke}" stroke-width="{2 if kind == "failed" else 1}"'
                     f'{dash}/>'
                     f'<text x="{a + 3:.1f}" y="{y + LANE / 2}" class="k">{escape(_fit(text, b - a - 4))}</text></g>')
        if op.get("failed") and op["end"] is not None:
            fail_x = b
    if fail_x is not None:
        parts.append(f'<line x1="{fail_x:.1f}" y1="{TOP - 6}" x2="{fail_x:.1f}" y2="{height - BOTTOM + 6}" '
                     f'stroke="#c00" stroke-dasharray="5 3"/>')
    ly = height - 12
    lx = LEFT
    for name, label in (("prefix", "linearized (prefix)"), ("failed", "cannot be placed"),
                        ("other", "not in the prefix")):
        parts.append(f'<rect x="{lx}" y="{ly - 9}" width="12" height="10" fill="{COLORS[name]}"/>'
                     f'<text x="{lx + 16}" y="{ly}" class="k">{label}</text>')
        lx += 150
    parts.append(f'<text x="{LEFT + pw}" y="{ly}" class="k" text-anchor="end">x: position in the history '
                 f'(ops {x0}–{x1 - 1})</text>')
    parts.append("</svg>")
    return "".join(parts)


def prefix_list(w: dict) -> str:
    """The linearizable prefix as an ordered list (the last PREFIX_SHOWN ops), then the failing op."""
    ops = {op["index"]: op for op in w.get("timeline") or []}
    prefix = w.get("prefix") or []
    start = max(0, len(prefix) - PREFIX_SHOWN)
    items = []
    for n, idx in enumerate(prefix[start:], start + 1):
        op = ops.get(idx)
        what = f"{escape(_label(op))}, process {escape(str(op['process']))}" if op else "(outside the drawing)"
        items.append(f"<li value='{n}'>op {escape(str(idx))}: <code>{what}</code></li>")
    fail = w.get("op") or {}
    items.append(f"<li style='color:#c00;list-style:none'>✗ op {escape(str(fail.get('invoke_index')))}: "
                 f"<code>{escape(str(fail.get('f')))}({escape(_value(fail.get('value')))})</code>, process "
                 f"{escape(str(fail.get('process')))}: no linearization places it</li>")
    more = f"<p class='muted'>{start} earlier ops of the prefix not listed.</p>" if start else ""
    return more + "<ol>" + "".join(items) + "</ol>"
