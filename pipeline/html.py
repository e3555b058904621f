"""DIR/index.html of `eoslab analyze`: the matrix as heat maps, and every run with its report.

Guarantees: one self-contained page (no scripts, stylesheets, fonts or
images from anywhere; plots are inline SVG drawn here; every string from the
store is escaped). It shows: the job summary; per workload (and client,
and Kafka version, each when the store has runs of more than one: headed
"workload, client X, Kafka V"), a heat map of
configuration x fault package coloured by the share of invalid runs; per
workload and fault package, a heat map of configuration x anomaly type (the
types found anywhere in that workload, then unseen and "(any)"), each cell
labelled runs_with/runs and titled with the rate's 95% interval and the
finding count; when the store has runs of more than one client, per workload
and configuration a heat map of client and Kafka version x fault package
(the share of invalid runs: which client loses or duplicates on which
release under which fault); the unseen, latency and real-time lag summaries
per cell (with its client and version); and a table of every run (client,
Kafka version, verdict, anomalies, ops) linking to its report.html by a path
relative to the page (runs without a report say so). Lab errors (runs the lab
broke, pipeline.matrix) are counted apart, never as valid or invalid runs:
in the summary, in a "lab errors" column of the cell table, in a heat map of
their share per workload when there are any, and as the verdict lab-error in
the run table; a cell whose every run was a lab error is grey, marked "lab".
"""
from __future__ import annotations

import os
from html import escape

from checker.report import CSS as REPORT_CSS
from pipeline.matrix import ANY, DEFAULT_CLIENT, LAB_ERROR, UNKNOWN_VERSION, UNSEEN

CSS = REPORT_CSS + """
.hm text{font:11px sans-serif}.hm .v{font:10px sans-serif;text-anchor:middle}
td.num{text-align:right;font-variant-numeric:tabular-nums}.scroll{overflow-x:auto}
"""
CELL_W, CELL_H, LEFT_PAD = 74, 22, 12


def _e(x) -> str:
    return escape("" if x is None else str(x), quote=True)


def _color(rate: float) -> str:
    """White (0) through yellow to dark red (1); zero stays pale grey so 'never' reads at a glance."""
    if rate <= 0:
        return "#f3f5f3"
    r = min(max(rate, 0.0), 1.0)
    stops = [(0.0, (255, 237, 160)), (0.3, (253, 141, 60)), (1.0, (165, 0, 38))]
    for (a, ca), (b, cb) in zip(stops, stops[1:]):
        if r <= b:
            t = (r - a) / (b - a)
            c = tuple(round(x + (y - x) * t) for x, y in zip(ca, cb))
            return "#%02x%02x%02x" % c
    return "#a50026"  # pragma: no cover


def heatmap(row_labels: list[str], col_labels: list[str], cells: dict, title: str) -> str:
    """cells[(row, col)] = matrix row (runs, runs_with, rate, ci_low, ci_high, count) or absent."""
    label_w = max([len(r) for r in row_labels] + [10]) * 6.4 + LEFT_PAD
    longest = max([len(c) for c in col_labels] + [4]) * 6.2          # rotated labels: 40 degrees up-right
    top = int(28 + longest * 0.65)
    w = int(label_w + CELL_W * len(col_labels) + max(10, longest * 0.77 - CELL_W / 2))
    h = top + CELL_H * len(row_labels) + 10
    parts = [f'<div class="scroll"><svg class="hm" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img">',
             f'<text x="4" y="14" class="t">{_e(title)}</text>']
    for j, c in enumerate(col_labels):
        x = label_w + CELL_W * j + CELL_W / 2
        parts.append(f'<text x="{x:.0f}" y="{top - 6}" transform="rotate(-40 {x:.0f} {top - 6})">'
                     f'{_e(c)}</text>')
    for i, r in enumerate(row_labels):
        y = top + CELL_H * i
        parts.append(f'<text x="{label_w - 6:.0f}" y="{y + 15}" text-anchor="end">{_e(r)}</text>')
        for j, c in enumerate(col_labels):
            x = label_w + CELL_W * j
            m = cells.get((r, c))
            if m is None:
                parts.append(f'<rect x="{x:.0f}" y="{y}" width="{CELL_W - 2}" height="{CELL_H - 2}" '
                             f'fill="#fff" stroke="#ddd"><title>no runs</title></rect>')
                continue
            if not m["runs"]:
                tip = f"{r} | {c}: no run judged, {m.get('lab_errors', 0)} lab errors"
                parts.append(f'<rect x="{x:.0f}" y="{y}" width="{CELL_W - 2}" height="{CELL_H - 2}" '
                             f'fill="#d9d4e6"><title>{_e(tip)}</title></rect>'
                             f'<text class="v" x="{x + CELL_W / 2 - 1:.0f}" y="{y + 15}">lab</text>')
                continue
            tip = (f"{r} | {c}: {m['runs_with']} of {m['runs']} runs ({100 * m['rate']:.1f}%, "
                   f"95% CI {100 * m['ci_low']:.1f}-{100 * m['ci_high']:.1f}%), {m['count']} found")
            fg = "#fff" if m["rate"] > 0.45 else "#222"
            parts.append(f'<rect x="{x:.0f}" y="{y}" width="{CELL_W - 2}" height="{CELL_H - 2}" '
                         f'fill="{_color(m["rate"])}"><title>{_e(tip)}</title></rect>'
                         f'<text class="v" x="{x + CELL_W / 2 - 1:.0f}" y="{y + 15}" fill="{fg}">'
                         f'{m["runs_with"]}/{m["runs"]}</text>')
    parts.append("</svg></div>")
    return "".join(parts)


def _lab_cell(r: dict) -> dict:
    """A heat-map cell of the lab errors among all the runs of a matrix cell."""
    from pipeline.matrix import wilson
    n, k = r["runs"] + (r.get("lab_errors") or 0), r.get("lab_errors") or 0
    lo, hi = wilson(k, n)
    return {"runs": n, "runs_with": k, "rate": k / n if n else 0.0, "ci_low": lo, "ci_high": hi, "count": k}


def _fmt(v, digits=2) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _client(r: dict) -> str:
    """A row's client, followed by its version when known."""
    c, v = r.get("client") or DEFAULT_CLIENT, r.get("client_version")
    return f"{c} {v}" if v else c


def _cell_table(rows: list[dict]) -> str:
    head = ("<tr><th>workload</th><th>configuration</th><th>faults</th><th>Kafka</th><th>client</th><th>runs</th>"
            "<th>lab errors</th><th>ops</th>"
            "<th>unseen</th><th>unseen share</th><th>send p50 / p99 / max (ms)</th>"
            "<th>poll p50 / p99 / max (ms)</th><th>max real-time lag (ms)</th></tr>")
    body = []
    for r in rows:
        if r["kind"] != "anomaly" or r["anomaly"] != ANY:
            continue
        share = "" if r["unseen_share"] is None else f"{100 * r['unseen_share']:.3f}%"
        body.append(
            f"<tr><td>{_e(r['workload'])}</td><td>{_e(r['config'])}</td><td>{_e(r['fault'])}</td>"
            f"<td>{_e(r.get('kafka_version'))}</td><td>{_e(_client(r))}</td><td class=num>{r['runs']}</td>"
            f"<td class=num>{r.get('lab_errors') or 0}</td><td class=num>{r['ops']}</td>"
            f"<td class=num>{r['unseen_records']}</td><td class=num>{share}</td>"
            f"<td class=num>{_fmt(r['send_p50_ms'])} / {_fmt(r['send_p99_ms'])} / {_fmt(r['send_max_ms'])}</td>"
            f"<td class=num>{_fmt(r['poll_p50_ms'])} / {_fmt(r['poll_p99_ms'])} / {_fmt(r['poll_max_ms'])}</td>"
            f"<td class=num>{_fmt(r.get('max_realtime_lag_ms'))}</td></tr>")
    return f"<table>{head}{''.join(body)}</table>"


def _runs_table(run_rows: list[dict], out_dir: str) -> str:
    body = []
    for r in run_rows:
        found = dict(r.get("anomaly_counts") or {})
        anomalies = ", ".join(f"{k} ×{v}" for k, v in sorted(found.items())) or "—"
        verdict = r.get("verdict") or {"true": "valid", "false": "invalid"}.get(r["valid"], r["valid"] or "?")
        if verdict == LAB_ERROR:
            verdict = f"lab-error ({r.get('lab_errors') or '?'}): not about Kafka"
            anomalies = "—"
        if r.get("report"):
            href = os.path.relpath(r["report"], out_dir).replace(os.sep, "/")
            link = f'<a href="{_e(href)}">report</a>'
        else:
            link = "<span class=muted>no report</span>"
        body.append(f"<tr><td>{_e(r['run'])}</td><td>{_e(r['config'])}</td><td>{_e(r['fault'])}</td>"
                    f"<td>{_e(r.get('kafka_version'))}</td><td>{_e(_client(r))}</td>"
                    f"<td class=num>{_e(r['seed'])}</td><td>{_e(verdict)}</td><td>{_e(anomalies)}</td>"
                    f"<td class=num>{r['ops']}</td><td>{link}</td></tr>")
    head = ("<tr><th>run</th><th>configuration</th><th>faults</th><th>Kafka</th><th>client</th><th>seed</th>"
            "<th>verdict</th>"
            "<th>anomalies</th><th>ops</th><th></th></tr>")
    table = f"<table>{head}{''.join(body)}</table>"
    if len(run_rows) > 200:
        return f"<details><summary>{len(run_rows)} runs</summary>{table}</details>"
    return table


def _group(r: dict) -> tuple[str, str, str]:
    """A matrix row's heading on the page: workload, client, Kafka version."""
    return r["workload"], r.get("client") or DEFAULT_CLIENT, r.get("kafka_version") or UNKNOWN_VERSION


def _clients_maps(rows: list[dict]) -> str:
    """Per workload and configuration: client and Kafka version x fault package, by invalid runs."""
    parts = []
    anyrows = [r for r in rows if r["kind"] == "anomaly" and r["anomaly"] == ANY]
    for wl, config in sorted({(r["workload"], r["config"]) for r in anyrows}):
        these = [r for r in anyrows if (r["workload"], r["config"]) == (wl, config)]
        lines = [f"{c}, Kafka {v}" for c, v in sorted({_group(r)[1:] for r in these})]
        cells = {("{}, Kafka {}".format(*_group(r)[1:]), r["fault"]): r for r in these}
        parts.append(f"<h2>{_e(wl)}, {_e(config)}: invalid runs by client and Kafka version × faults</h2>")
        parts.append(heatmap(lines, sorted({r["fault"] for r in these}), cells,
                             "share of runs with any anomaly, per client and release"))
    return "\n".join(parts)


def render(rows: list[dict], run_rows: list[dict], summary: dict, store: str, out_dir: str) -> str:
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>eoslab analyze: {_e(store)}</title>"
             f"<style>{CSS}</style></head><body>",
             f"<h1>Anomaly matrix</h1><p class=muted>{_e(store)}</p>",
             f"<p>{summary['runs']} runs, {summary['ops']:,} ops, {summary['cells']} cells "
             f"(workload × configuration × faults × Kafka version × client), "
             f"{summary['invalid_runs']} invalid runs, "
             f"{summary.get('lab_error_runs', 0)} lab errors (runs the lab itself broke: neither valid nor "
             f"invalid, left out of every rate). "
             f"Spark {_e(summary['master'])}, {summary['cores']} cores, {summary['seconds']} s.</p>",
             "<p class=muted>Each cell: runs with the anomaly / runs; colour: that share. "
             "Hover for the 95% Wilson interval and the number of findings. "
             "Full numbers: matrix.csv / matrix.parquet.</p>"]
    clients = {_group(r)[1] for r in rows}
    versions = {_group(r)[2] for r in rows}
    if len(clients) > 1:
        parts.append(_clients_maps(rows))
    for wl_key in sorted({_group(r) for r in rows}):
        wrows = [r for r in rows if _group(r) == wl_key]
        wl = ", ".join([wl_key[0]] + ([f"client {wl_key[1]}"] if len(clients) > 1 else [])
                       + ([f"Kafka {wl_key[2]}"] if len(versions) > 1 else []))
        configs = sorted({r["config"] for r in wrows})
        faults = sorted({r["fault"] for r in wrows})
        parts.append(f"<h2>{_e(wl)}: invalid runs by configuration × faults</h2>")
        anyc = {(r["config"], r["fault"]): r for r in wrows if r["kind"] == "anomaly" and r["anomaly"] == ANY}
        parts.append(heatmap(configs, faults, anyc, "share of runs with any anomaly"))
        if any(r.get("lab_errors") for r in anyc.values()):
            parts.append(f"<h2>{_e(wl)}: lab errors by configuration × faults</h2>")
            parts.append(heatmap(configs, faults, {k: _lab_cell(r) for k, r in anyc.items()},
                                 "share of runs the lab broke (not about Kafka)"))
        types = [t for t in dict.fromkeys(r["anomaly"] for r in wrows if r["kind"] == "anomaly"
                                          and r["anomaly"] not in (ANY, UNSEEN) and r["runs_with"] > 0)]
        for fault in faults:
            cells = {(r["config"], r["anomaly"]): r for r in wrows if r["fault"] == fault and r["kind"] == "anomaly"}
            parts.append(f"<h2>{_e(wl)} under {_e(fault)}: anomalies by configuration</h2>")
            parts.append(heatmap(configs, types + [UNSEEN, ANY], cells, f"faults: {fault}"))
            allowed = [r for r in wrows if r["fault"] == fault and r["kind"] == "allowed"]
            if allowed:
                items = ", ".join(f"{_e(r['anomaly'])} in {r['runs_with']}/{r['runs']} runs of "
                                  f"{_e(r['config'])}" for r in allowed)
                parts.append(f"<p class=muted>Found but allowed by Kafka's model: {items}.</p>")
    parts.append("<h2>Unseen records and latency per cell</h2>")
    parts.append(_cell_table(rows))
    parts.append("<h2>Runs</h2>")
    parts.append(_runs_table(run_rows, out_dir))
    parts.append("</body></html>")
    return "\n".join(parts)


def write_index(path: str, rows: list[dict], run_rows: list[dict], summary: dict, store: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(render(rows, run_rows, summary, store, os.path.dirname(os.path.abspath(path))))
