"""report.html: one self-contained page a person can read to see what went wrong.

Guarantees: `render_report(result, series)` returns a complete HTML document
with no network references (no scripts, stylesheets, fonts or images from
anywhere; charts are inline SVG from checker.report_svg, collapsible parts
are <details>), every history-derived string escaped. It shows: the verdict;
for a lab-error verdict (checker.result), first a banner saying the verdict
is not about Kafka, each lab error with its log lines, and what the checker
found listed as unconfirmed anomalies, never as anomalies;
the anomalies that make a history invalid, each with its meaning and its
witnesses (facts first, the ops as JSON on demand); what was found but is
allowed by Kafka's model; for a linearizability failure, the op where it
breaks and the longest linearizable prefix, drawn per process on a timeline
of the failing key (checker.report_linear); the plots of
checker.report_plots (downsampled, so size does not grow with the history);
the fault intervals; and the statistics. `write_report(path, ...)` writes it.
"""
from __future__ import annotations

import json
from html import escape
from typing import Any

from checker.report_linear import failure_svg, prefix_list
from checker.report_plots import charts, fault_rows
from checker.report_series import SeriesCollector

WITNESSES_SHOWN = 32

MEANING = {
    "inconsistent-offsets": "two ops saw different values at the same offset of a partition",
    "duplicate": "one value sits at more than one offset of a partition",
    "lost-write": "an acknowledged record below the highest offset anyone polled was never polled",
    "G1a": "an ok poll returned a record whose send failed (aborted read)",
    "precommitted-read": "a transaction polled a record it sent itself, before committing",
    "poll-skip": "a consumer's next poll skipped records after where its last poll ended",
    "nonmonotonic-poll": "a consumer's next poll went back to (or repeated) an offset it had passed",
    "nonmonotonic-send": "a process's send landed at or before its previous send to that partition",
    "int-poll-skip": "within one op, consecutive polled records skipped records in between",
    "int-nonmonotonic-poll": "within one op, polled records went backwards",
    "int-send-skip": "within one op, other records landed between two consecutive sends",
    "int-nonmonotonic-send": "within one op, a later send landed at or before an earlier one",
    "G0": "a cycle of write-write dependencies between ops",
    "G1c": "a cycle of dependencies with at least one write-read edge",
    "producer-order": "records of one producer session are in the log out of the producer's order",
    "pid-reuse": "one producer id was handed to two producers",
    "zombie-write": "a fenced producer epoch's record became visible to a read_committed consumer",
    "unseen": "acknowledged records no ok poll ever returned",
    "nonlinearizable": "no linearization of the history is consistent with the model",
}

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;padding-bottom:3px}
.verdict{display:inline-block;padding:6px 14px;border-radius:6px;font-weight:700;font-size:18px;color:#fff}
.valid{background:#3c8c3c}.invalid{background:#c9302c}.unknown{background:#8a6d3b}.laberror{background:#5b4a8a}
.labbanner{border:3px solid #5b4a8a;background:#f3f0fa;padding:10px 14px;margin:12px 0;border-radius:6px}
.labbanner b{font-size:16px}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f6f6f6}code,pre{font:12px/1.35 ui-monospace,Menlo,Consolas,monospace}
pre{background:#f8f8f8;border:1px solid #eee;padding:6px;overflow:auto;max-height:420px}
details{margin:2px 0}summary{cursor:pointer}.muted{color:#777}.warn{background:#fff4e0;border-left:4px solid #f0ad4e;padding:6px 10px}.t{font:600 12px sans-serif}
.l{font:12px sans-serif;fill:#444}.k{font:10px sans-serif;fill:#555}svg{display:block;margin:6px 0}
"""


def _e(x: Any) -> str:
    return escape(str(x), quote=True)


def _j(x: Any) -> str:
    """JSON a person can scan: one line per field, one line per op or step."""
    if not isinstance(x, dict):
        return escape(json.dumps(x, indent=1, default=str))
    lines = []
    for k, v in x.items():
        if isinstance(v, list) and v and all(isinstance(e, dict) for e in v):
            inner = ",\n".join("   " + json.dumps(e, default=str) for e in v)
            lines.append(f" {json.dumps(str(k))}: [\n{inner}\n ]")
        else:
            lines.append(f" {json.dumps(str(k))}: {json.dumps(v, default=str)}")
    return escape("{\n" + ",\n".join(lines) + "\n}")


def _brief(w: dict) -> str:
    """One line of facts for a witness: the fields a reader scans first."""
    parts = []
    for k in ("key", "value", "values", "offset", "offsets", "delta", "count", "pid", "epoch",
              "kind", "writer", "reader", "max_read_offset", "op", "ops", "cycle"):
        if k in w and w[k] is not None:
            v = w[k]
            if k == "ops" and isinstance(v, list) and v and isinstance(v[0], dict):
                v = [o.get("index") for o in v]
            parts.append(f"{k}={json.dumps(v, default=str)}")
    if "steps" in w:
        parts.append(" → ".join(f"{s['from']} -{s['type']}({s.get('key')})" for s in w["steps"])
                     + f" → {w['steps'][0]['from']}")
    return ", ".join(parts)[:400]


def _witness_table(table: dict, counts: dict | None = None) -> str:
    if not table:
        return "<p class='muted'>none</p>"
    rows = []
    for kind, ws in table.items():
        ws = ws if isinstance(ws, list) else [ws]
        items = []
        for w in ws[:WITNESSES_SHOWN]:
            summary = _e(_brief(w)) if isinstance(w, dict) else _e(w)
            why = f"<br><span class='muted'>allowed: {_e(w['allowed'])}</span>" if isinstance(w, dict) and w.get("allowed") else ""
            items.append(f"<details><summary>{summary}</summary><pre>{_j(w)}</pre></details>{why}")
        total = (counts or {}).get(kind, len(ws))
        shown = min(len(ws), WITNESSES_SHOWN)
        n = f"{total}" + (f" ({shown} listed)" if shown < total else "")
        rows.append(f"<tr><th id='{_e(kind)}'>{_e(kind)}</th><td>{_e(MEANING.get(kind, ''))}</td>"
                    f"<td>{_e(n)}</td><td>{''.join(items)}</td></tr>")
    return ("<table><tr><th>anomaly</th><th>meaning</th><th>found</th><th>witnesses (click for the ops)</th></tr>"
            + "".join(rows) + "</table>")


def _nonlinearizable(result: dict) -> str:
    nl = (result.get("anomalies") or {}).get("nonlinearizable")
    if isinstance(nl, list):
        nl = nl[0] if nl else None
    if not isinstance(nl, dict):
        return ""
    op = nl.get("op") or {}
    prefix = nl.get("prefix") or []
    tail = prefix[-12:]
    states = nl.get("states") or []
    return (f"<h2>Where linearizability breaks</h2>"
            f"<p>No linearization gets past op <b>{_e(op.get('index'))}</b> "
            f"(invoked at {_e(op.get('invoke_index'))}, process {_e(op.get('process'))}, "
            f"<code>{_e(op.get('f'))} {_e(json.dumps(op.get('value'), default=str))}</code>, {_e(op.get('type'))})"
            + (f" on key <code>{_e(nl.get('key'))}</code>" if nl.get("key") is not None else "")
            + f". The longest linearizable prefix found has {len(prefix)} ops; its last ones "
            f"(invoke indices): <code>{_e(', '.join(map(str, tail)))}</code>.</p>"
            + (f"<p>Model states reachable just before it: <code>{_e(json.dumps(states[:8], default=str))}</code></p>"
               if states else "")
            + failure_svg(nl)
            + (f"<details open><summary>The longest linearizable prefix found, in order</summary>"
               f"{prefix_list(nl)}</details>" if nl.get("timeline") else "")
            + "<p class='muted'>The red dashed line in the plots marks this op.</p>")


def _stats_table(stats: dict) -> str:
    rows = []
    for k, v in stats.items():
        if isinstance(v, dict) and v and all(not isinstance(x, (dict, list)) for x in v.values()):
            val = ", ".join(f"{_e(a)}: {_e(b)}" for a, b in v.items())
        elif isinstance(v, (dict, list)):
            val = f"<details><summary>{len(v)} entries</summary><pre>{_j(v)}</pre></details>" if v else "—"
        else:
            val = _e(v)
        rows.append(f"<tr><th>{_e(k)}</th><td>{val}</td></tr>")
    return "<table>" + "".join(rows) + "</table>"


def _lab_errors(errors: list) -> str:
    """The banner of a lab-error verdict and every lab error with its log lines."""
    items = []
    for e in errors:
        e = e if isinstance(e, dict) else {"kind": "?", "message": str(e)}
        where = next((f"{k} {e[k]}" for k in ("node", "thread", "process") if e.get(k)), "")
        log = e.get("log") or []
        lines = log if isinstance(log, list) else [str(log)]
        items.append(f"<li><b>{_e(e.get('kind', '?'))}</b>{' — ' + _e(where) if where else ''}: "
                     f"<code>{_e(e.get('message', ''))}</code>"
                     + (f"<details open><summary>log ({len(lines)} lines)</summary><pre>"
                        f"{_e(chr(10).join(map(str, lines)))}</pre></details>" if lines else "") + "</li>")
    return ("<div class='labbanner' id='lab-errors'><b>LAB ERROR: this run's verdict is not about Kafka.</b> "
            f"The lab itself failed ({len(errors)} lab error{'s' if len(errors) != 1 else ''}: a harness or client "
            "thread, a service or the nemesis failed for a reason that is not an injected fault), so the history "
            "cannot show whether Kafka lost, duplicated or reordered anything. Anything the checker found in it "
            "is listed below as unconfirmed.<ul>" + "".join(items) + "</ul></div>")


def why_section(why: dict) -> str:
    """The settings in force that permit each anomaly (checker.explain), with the scenario that shows it."""
    if not why:
        return ""
    rows = "".join(f"<tr><td>{_e(t)}</td><td><code>{_e(r['setting'])}={_e(r['value'])}</code> "
                   f"<span class='muted'>({_e(r['source'])})</span></td><td>{_e(r['why'])}</td>"
                   f"<td>{'<code>eoslab scenario run ' + _e(r['scenario']) + '</code>' if r.get('scenario') else ''}"
                   f"</td></tr>" for t, rs in why.items() for r in rs)
    return ("<h2>Why these settings permit it</h2><table><tr><th>anomaly</th><th>setting in force</th>"
            f"<th>why</th><th>shown by</th></tr>{rows}</table>")


def render_report(result: dict, series: SeriesCollector | None = None, title: str = "history") -> str:
    valid = result.get("valid")
    lab = result.get("lab_errors") or []
    cls, word = ({True: ("valid", "VALID"), False: ("invalid", "INVALID")}
                 .get(valid, ("unknown", "UNKNOWN")))
    if lab or result.get("verdict") == "lab-error":
        cls, word = "laberror", "LAB ERROR"
    anomalies = result.get("anomalies") or {}
    allowed = result.get("allowed") or {}
    stats = result.get("stats") or {}
    names = ", ".join(f"<a href='#{_e(k)}'>{_e(k)}</a>" for k in anomalies)
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>eoslab check: {_e(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>eoslab check — {_e(title)}</h1>",
        f"<p><span class='verdict {cls}'>{word}</span> "
        + (f"&nbsp;anomalies: {names}" if anomalies else "")
        + (f"&nbsp;<span class='muted'>{_e(stats.get('reason', ''))}</span>" if valid == "unknown" else "")
        + "</p>",
    ]
    behind = stats.get("lso_behind_at_end") or []
    if behind:                         # consumers held back at the end: never a plain "valid" without it
        parts.append("<p class='warn'>At the end, read_committed consumers were held back: "
                     + "; ".join(f"partition {_e(b.get('key'))} LSO {_e(b.get('lso'))} under high watermark "
                                 f"{_e(b.get('high_watermark'))} for {_e(b.get('stood_s'))} s" for b in behind)
                     + ".</p>")
    if cls == "laberror":
        parts.append(_lab_errors(lab))
        unconfirmed = result.get("unconfirmed") or {}
        parts.append("<h2>Unconfirmed anomalies</h2><p class='muted'>Found in a history the lab broke: not "
                     "evidence about Kafka until a run without lab errors shows them again.</p>"
                     + _witness_table(unconfirmed, stats.get("unconfirmed_counts")))
    counts = stats.get("anomaly_counts") or {}
    if counts:
        parts.append("<p>Found: " + ", ".join(f"{_e(k)} × {_e(v)}" for k, v in counts.items()) + "</p>")
    if cls != "laberror" or anomalies:
        parts.append("<h2>Anomalies</h2>" + _witness_table(anomalies, counts))
    parts.append(why_section(result.get("why") or {}))
    parts.append(_nonlinearizable(result))
    for heading, svg, caption in charts(series, result):
        parts.append(f"<h2>{_e(heading)}</h2>{svg}<p class='muted'>{_e(caption)}</p>")
    if allowed:
        parts.append("<h2>Found, but allowed by Kafka's model</h2>"
                     "<p class='muted'>These do not make the history invalid; each says why.</p>"
                     + _witness_table(allowed, stats.get("allowed_counts")))
    faults = fault_rows(series)
    if faults:
        parts.append("<h2>Faults</h2><table><tr><th>fault</th><th>start</th><th>end</th></tr>"
                     + "".join(f"<tr><td>{_e(f['fault'])}</td><td>{f['start']}</td><td>{f['end']}"
                               f"{' (still active)' if f['open_at_end'] else ''}</td></tr>" for f in faults)
                     + "</table>")
    parts.append("<h2>Statistics</h2>" + _stats_table(stats))
    parts.append("</body></html>\n")
    return "\n".join(p for p in parts if p)


def write_report(path: str, result: dict, series: SeriesCollector | None = None,
                 title: str = "history") -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(render_report(result, series, title))
