"""report.html for an `eoslab app run`: what the user's copier did and what went wrong.

Guarantees: `render_app_report(result, history, title)` returns one complete
HTML document with no network references and no scripts (charts are inline
SVG from checker.report_svg; every history-derived string is escaped). It
shows the verdict (a lab-error verdict, checker.result, first says it is
not about the app or Kafka and lists the anomalies as unconfirmed); each
anomaly of checker.kafka.app with its meaning and witnesses; a lane per app
instance with its state over time, from the "app" lifecycle ops (running;
paused; cut off the network; zombie: a replaced incarnation still alive
beside its replacement; dead or restarting; nothing drawn once the lab
stopped it for good), with the cluster's faults as shaded bands and the
app's own exits as markers; the notes on the application's own Kafka
client (result "client_faults", e.g. offsets fetched without
require_stable), beside a verdict they do not change; records acknowledged vs visible over time and
the ack-to-visibility lag, both with every fault shaded; the fault
intervals; the statistics. The history (a path or ops; None draws no lanes)
is read once; the page's size is bounded by the result's thinned series
and the number of lifecycle ops. `write_app_report(path, ...)` writes it.
"""
from __future__ import annotations

import json
import re
from typing import Any

from checker.kafka.app import op_dicts
from checker.report import CSS, WITNESSES_SHOWN, _e, _j, _lab_errors, _stats_table
from checker.report_plots import fault_rows, fault_shading
from checker.report_series import SeriesCollector
from checker.report_svg import FAULT_FILL, TYPE_COLORS, lane_chart, line_chart

MEANING = {
    "lost-write": "a value the seeder got an ok for is not in the final read_committed read of the output",
    "duplicate": "one value sits at two or more offsets of the output",
    "unexpected-value": "an output value no seeder op sent, or whose send failed definitely",
    "reordered": "two values of one record key landed in one output partition in the opposite of their input order",
    "G1a": "a read_committed read returned a record the log audit shows was aborted (aborted read)",
    "hanging-transaction": "a partition's LSO stood below its high watermark past the threshold with no fault in force",
}
# lane states -> (lane_chart span status, mark status or None, legend colour, legend text)
STATES = {
    "running": ("ok", None, TYPE_COLORS["ok"], "running"),
    "paused": ("info", None, TYPE_COLORS["info"], "paused (SIGSTOP)"),
    "cut": ("cut", None, "#999", "cut off the network"),
    "zombie": ("ok", "fail", None, "zombie: a replaced incarnation still alive (red lower half)"),
    "dead": ("fail", None, TYPE_COLORS["fail"], "dead or restarting"),
}
MAX_MARKERS = 16
_LEGEND = re.compile(r'<line x1="[\d.]+" y1="28" x2="[\d.]+" y2="28"[^>]*/><text [^>]*>[^<]*</text>')


def _lifecycle(history: Any) -> tuple[SeriesCollector, list[tuple[int, str, dict]]]:
    """The faults (a SeriesCollector fed every op) and the app ops (time ns, f, value)."""
    s, app = SeriesCollector(), []
    if history is None:
        return s, app
    for d in op_dicts(history):
        s.feed(d)
        if d["process"] == "app" and type(d.get("value")) is dict:
            tm = d.get("time")
            app.append((tm if isinstance(tm, (int, float)) else s.t_last or 0, str(d["f"]), d["value"]))
    return s, app


def _state(live: dict, current: Any) -> str:
    if len(live) > 1:
        return "zombie"
    flags = live.get(current) or next(iter(live.values()))
    return "paused" if flags["paused"] else "cut" if flags["cut"] else "running"


class _Lane:
    """One instance's incarnations as its lifecycle ops arrive, and the spans they make."""

    def __init__(self) -> None:
        self.live: dict[Any, dict] = {}            # incarnation -> {"paused", "cut"}
        self.current: Any = None                   # the incarnation started last
        self.started = False
        self.last_exit: Any = None                 # "lab" | "self" of the last exit
        self.t_prev = 0.0
        self.spans: list[tuple[float, float, str]] = []

    def close(self, t: float) -> None:
        """The state since the last op lasts until t."""
        if self.started and t > self.t_prev:
            st = "dead" if not self.live else _state(self.live, self.current)
            if self.spans and self.spans[-1][2] == st and self.spans[-1][1] == self.t_prev:
                self.spans[-1] = (self.spans[-1][0], t, st)
            else:
                self.spans.append((self.t_prev, t, st))
        self.t_prev = max(self.t_prev, t)

    def apply(self, f: str, v: dict) -> None:
        live, k = self.live, v.get("incarnation")
        if f == "app-start":
            self.started, self.current = True, k
            live.setdefault(k, {"paused": False, "cut": False})
        elif f == "app-zombie":
            self.started, self.current = True, v.get("new")
            live.setdefault(v.get("old"), {"paused": False, "cut": False})
            live.setdefault(self.current, {"paused": False, "cut": False})
        elif f == "app-exit":
            live.pop(k, None)
            self.last_exit = v.get("by")
        elif k in live and f in ("app-pause", "app-resume", "app-cut", "app-uncut"):
            live[k]["paused" if f in ("app-pause", "app-resume") else "cut"] = f in ("app-pause", "app-cut")


def instance_states(app: list, seconds, x_max: float) -> dict[Any, list[tuple[float, float, str]]]:
    """instance -> [(start s, end s, state)], state one of STATES (no span before its first start or after
    an exit by the lab that nothing restarted)."""
    lanes: dict[Any, _Lane] = {}
    for tm, f, v in app:
        lane = lanes.setdefault(v.get("instance"), _Lane())
        lane.close(seconds(tm))
        lane.apply(f, v)
    out = {}
    for inst, lane in lanes.items():
        if lane.live or lane.last_exit != "lab":   # stopped for good by the lab: nothing after
            lane.close(x_max)
        out[inst] = lane.spans
    return out


def _lanes(app: list, s: SeriesCollector, x_max: float) -> str:
    states = instance_states(app, s.seconds, x_max)
    if not states:
        return ""
    rows = []
    for inst in sorted(states, key=lambda i: (not isinstance(i, int), str(i) if not isinstance(i, int) else i)):
        spans = [(a, b, STATES[st][0]) for a, b, st in states[inst]]
        marks = [(a, b, STATES[st][1], 0.5) for a, b, st in states[inst] if STATES[st][1]]
        rows.append((f"instance {inst}", spans, marks))
    exits = [(s.seconds(tm), f"i{v.get('instance')} exit {v.get('code')}", "#c00")
             for tm, f, v in app if f == "app-exit" and v.get("by") == "self"][:MAX_MARKERS]
    cluster = [b for b, (_, _, name, _) in zip(fault_shading(s), s.all_faults()) if not name.endswith("-app")]
    svg = lane_chart(rows, title="one lane per app instance: its state over time", x_label="time (s)",
                     x_max=x_max, shading=cluster, markers=exits)
    svg = _LEGEND.sub("", svg)                      # lane_chart's legend names op outcomes; ours is below
    legend = "".join(_swatch(c or TYPE_COLORS["ok"], "" if c else TYPE_COLORS["fail"]) + _e(text)
                     for _, _, c, text in STATES.values())
    legend += _swatch(FAULT_FILL) + "cluster fault (hover for which)"
    return (f"<h2>App instances</h2>{svg}<p class='k'>{legend}</p>"
            "<p class='muted'>Red dashed lines: the app exited by itself (its exit code). App faults "
            "(kill, pause, cut, zombie) show as the lanes' states; every fault is in the table below.</p>")


def _swatch(color: str, lower: str = "") -> str:
    """A legend square; `lower` colours its lower half."""
    under = f"border-bottom:5px solid {lower};" if lower else ""
    return (f"<span style='display:inline-block;width:12px;height:10px;margin:0 4px 0 12px;"
            f"background:{color};{under}'></span>")


def _brief(w: dict) -> str:
    keys = ("key", "value", "values", "in-p", "out-p", "offset", "offsets", "where", "input", "output",
            "read_by", "op", "reason", "since_s", "stood_s", "standing_at_end", "open_record")
    return ", ".join(f"{k}={_j_short(w[k])}" for k in keys if w.get(k) is not None)[:400]


def _j_short(v: Any) -> str:
    return json.dumps(v, default=str)


def witness_table(table: dict, counts: dict) -> str:
    if not table:
        return "<p class='muted'>none</p>"
    rows = []
    for kind, ws in table.items():
        items = "".join(f"<details><summary>{_e(_brief(w))}</summary><pre>{_j(w)}</pre></details>"
                        for w in ws[:WITNESSES_SHOWN])
        total = counts.get(kind, len(ws))
        n = f"{total}" + (f" ({min(len(ws), WITNESSES_SHOWN)} listed)" if min(len(ws), WITNESSES_SHOWN) < total else "")
        rows.append(f"<tr><th id='{_e(kind)}'>{_e(kind)}</th><td>{_e(MEANING.get(kind, ''))}</td>"
                    f"<td>{_e(n)}</td><td>{items}</td></tr>")
    return ("<table><tr><th>anomaly</th><th>meaning</th><th>found</th><th>witnesses (click for all facts)</th></tr>"
            + "".join(rows) + "</table>")


def _charts(result: dict, s: SeriesCollector, x_max: float) -> list[str]:
    prog = result.get("progress") or {}
    shade = fault_shading(s) if s.t_first is not None else []
    out = []
    series = prog.get("series") or []
    if series:
        lines = [{"name": "acknowledged by the seeder", "color": "#1f77b4", "points": [(t, a) for t, _, a in series]},
                 {"name": "visible to the read_committed reader", "color": "#2ca02c",
                  "points": [(t, v) for t, v, _ in series]}]
        out.append("<h2>Progress</h2>" + line_chart(lines, title="input records acknowledged vs output records "
                                                    "visible (distinct values)", x_label="time (s)",
                                                    y_label="records", x_max=x_max, shading=shade)
                   + "<p class='muted'>A gap that stays open is records the app has not (yet) copied; "
                   "shaded bands are faults.</p>")
    lag = prog.get("lag_series") or []
    stats = prog.get("lag_ms") or {}
    if lag:
        out.append("<h2>Lag</h2>" + line_chart([{"name": "lag (ms)", "color": "#d62728", "points": lag}],
                                               title="from the seeder's ack to the reader's first sight",
                                               x_label="time seen (s)", y_label="lag (ms)", x_max=x_max,
                                               shading=shade)
                   + f"<p class='muted'>p50 {_e(stats.get('p50'))} ms, p99 {_e(stats.get('p99'))} ms, max "
                   f"{_e(stats.get('max'))} ms over {_e(stats.get('count'))} records.</p>")
    elif (result.get("stats") or {}).get("no_output"):
        out.append("<h2>Lag</h2><p class='warn'>The reader never saw a record in the output.</p>")
    return out


def client_faults_section(notes: list) -> str:
    """The notes on the application's own Kafka client (results.json "client_faults"), escaped; "" without."""
    if not notes:
        return ""
    return ("<h2>The application's client</h2>"
            + "".join(f"<p class='warn'>{_e(n.get('note', ''))}</p>" for n in notes if isinstance(n, dict))
            + "<p class='muted'>Counted by the brokers' group coordinators; this explains anomalies, "
              "it does not change the verdict.</p>")


def render_app_report(result: dict, history: Any, title: str) -> str:
    s, app = _lifecycle(history)
    stats = result.get("stats") or {}
    prog = result.get("progress") or {}
    ends = [p[0] for p in (prog.get("series") or []) + (prog.get("lag_series") or [])]
    ends += [s.seconds(s.t_last)] if s.t_last is not None else [stats.get("time_span_s") or 0]
    x_max = max(max(ends), 1e-9)
    anomalies = result.get("anomalies") or {}
    lab = result.get("lab_errors") or []
    cls, word = {True: ("valid", "VALID"), False: ("invalid", "INVALID")}.get(result.get("valid"),
                                                                             ("unknown", "UNKNOWN"))
    if lab or result.get("verdict") == "lab-error":
        cls, word = "laberror", "LAB ERROR"
    names = ", ".join(f"<a href='#{_e(k)}'>{_e(k)}</a>" for k in anomalies)
    parts = ["<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
             f"<title>eoslab app: {_e(title)}</title><style>{CSS}</style></head><body>",
             f"<h1>eoslab app run — {_e(title)}</h1>",
             f"<p><span class='verdict {cls}'>{word}</span>" + (f"&nbsp;anomalies: {names}" if anomalies else "")
             + "</p>",
             (f"<p>{_e(stats.get('input_acknowledged'))} input records acknowledged, "
              f"{_e(stats.get('input_indefinite'))} indefinite; the final read found "
              f"{_e(stats.get('output_records'))} output records ({_e(stats.get('output_unique'))} distinct "
              f"values); {_e(stats.get('instances'))} instances, {_e(stats.get('restarts'))} restarts.</p>")]
    behind = stats.get("lso_behind_at_end") or []
    if behind:
        parts.append("<p class='warn'>At the end, read_committed consumers were held back: "
                     + "; ".join(f"{_e(b.get('key'))} LSO {_e(b.get('lso'))} under high watermark "
                                 f"{_e(b.get('high_watermark'))} for {_e(b.get('stood_s'))} s" for b in behind)
                     + ".</p>")
    parts.append(client_faults_section(result.get("client_faults") or []))
    if cls == "laberror":
        parts.append(_lab_errors(lab) + "<h2>Unconfirmed anomalies</h2>"
                     + witness_table(result.get("unconfirmed") or {}, stats.get("unconfirmed_counts") or {}))
    else:
        parts.append("<h2>Anomalies</h2>" + witness_table(anomalies, stats.get("anomaly_counts") or {}))
    parts.append(_lanes(app, s, x_max))
    parts += _charts(result, s, x_max)
    faults = fault_rows(s)
    if faults:
        parts.append("<h2>Faults</h2><table><tr><th>fault</th><th>start (s)</th><th>end (s)</th></tr>"
                     + "".join(f"<tr><td>{_e(f['fault'])}</td><td>{f['start']}</td><td>{f['end']}"
                               f"{' (still active)' if f['open_at_end'] else ''}</td></tr>" for f in faults)
                     + "</table>")
    parts.append("<h2>Statistics</h2>" + _stats_table(stats) + "</body></html>\n")
    return "\n".join(p for p in parts if p)


def write_app_report(path: str, result: dict, history: Any, title: str = "app run") -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(render_app_report(result, history, title))
