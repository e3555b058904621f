"""The report's plots: downsampled views of a SeriesCollector, as inline SVG.

Guarantees: every plot is built from at most BINS (or LINE_BINS) time bins (and at most
MAX_LANES process lanes), so a 1,000,000-op history gives the same small
page as a 100-op one; each time plot shades the fault intervals and marks
where a linearizability check broke (the failing op's time), when there is
one. Plots: op timeline per process (in-flight spans, share of failed and
indefinite ops per bin), latency (p50 solid, p99 dashed, per f, log scale, ms), throughput
(completions per second by type), unseen records over time and realtime lag
(Kafka: the largest lag of any poll per time bin, from the result's
`realtime_lag.series`, at most checker.kafka.lag.SERIES_BINS points).
"""
from __future__ import annotations

from typing import Any

from checker.report_series import SeriesCollector
from checker.report_svg import SERIES_COLORS, TYPE_COLORS, lane_chart, line_chart

BINS = 480            # unseen bins
TIMELINE_BINS = 300
LINE_BINS = 240       # latency / throughput bins at most
MAX_LANES = 32


def fault_shading(s: SeriesCollector) -> list[tuple[float, float, str]]:
    out = []
    for a, b, name, open_ended in s.all_faults():
        label = f"{name}: {s.seconds(a):.3f}–{s.seconds(b):.3f}" + (" (still active at the end)" if open_ended else "")
        out.append((s.seconds(a), s.seconds(b), label))
    return out


def break_markers(s: SeriesCollector, result: dict) -> list[tuple[float, str, str]]:
    nl = (result.get("anomalies") or {}).get("nonlinearizable")
    if isinstance(nl, list):
        nl = nl[0] if nl else None
    if not isinstance(nl, dict):
        return []
    op = nl.get("op") or {}
    idx = op.get("index", op.get("invoke_index"))
    if idx is None:
        return []
    t = s.time_of_index(idx)
    if t is None and op.get("invoke_index") is not None:
        t = s.time_of_index(op["invoke_index"])
    return [] if t is None else [(t, f"breaks at op {idx}", "#c00")]


def _bins(s: SeriesCollector) -> tuple[float, float, int]:
    x_max = max(s.seconds(s.t_last or 0), 1e-9)
    return x_max, x_max / BINS, BINS


def _timeline(s: SeriesCollector, x_max: float) -> list:
    """Lanes of TIMELINE_BINS bins: a green span where the process had ops in
    flight, and per bin a mark whose height is the share of its ops that
    failed or were indefinite (colored by the commoner of the two)."""
    nb = TIMELINE_BINS
    width = x_max / nb
    counts = [0] * len(s.procs)
    for r in s.row:
        counts[r] += 1
    names = {row: p for p, row in s.procs.items()}
    order = sorted(range(len(counts)), key=lambda r: (-counts[r], str(names[r])))
    shown = sorted(order[:MAX_LANES], key=lambda r: ((0, names[r], "") if isinstance(names[r], int)
                                                     else (1, 0, str(names[r]))))
    lane_of = {r: i for i, r in enumerate(shown)}
    other = len(shown) if len(order) > MAX_LANES else None
    n_lanes = len(shown) + (1 if other is not None else 0)
    tallies = [[[0] * nb for _ in range(3)] for _ in range(n_lanes)]   # lane -> kind -> bin
    sec = s.seconds
    for i in range(len(s.end)):
        lane = lane_of.get(s.row[i], other)
        if lane is None:
            continue
        b0 = min(max(int(sec(s.start[i]) / width), 0), nb - 1)
        b1 = min(max(int(sec(s.end[i]) / width), 0), nb - 1)
        t = tallies[lane][s.kind[i]]
        for b in range(b0, b1 + 1):
            t[b] += 1
    labels = [f"p{names[r]}" if isinstance(names[r], int) else str(names[r]) for r in shown]
    if other is not None:
        labels.append(f"{len(order) - MAX_LANES} more")
    rows = []
    for label, (ok, fail, info) in zip(labels, tallies):
        spans, marks, b = [], [], 0
        while b < nb:
            if not (ok[b] or fail[b] or info[b]):
                b += 1
                continue
            e = b
            while e + 1 < nb and (ok[e + 1] or fail[e + 1] or info[e + 1]):
                e += 1
            spans.append((b * width, (e + 1) * width, "ok"))
            b = e + 1
        for b in range(nb):
            bad = fail[b] + info[b]
            if bad:
                share = bad / (bad + ok[b])
                marks.append((b * width, (b + 1) * width, "fail" if fail[b] >= info[b] else "info", share))
        rows.append((label, spans, marks))
    return rows


def _quantile(xs: list, q: float) -> float:
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def _latency_throughput(s: SeriesCollector, x_max: float) -> tuple[list, list]:
    """Quantiles need points per bin: ~40 completions per bin, 10 to LINE_BINS bins."""
    nb = max(10, min(LINE_BINS, len(s.end) // 40))
    width = x_max / nb
    fnames = {code: f for f, code in s.fs.items()}
    lat: dict[tuple[int, int], list] = {}
    thr = [[0] * nb for _ in range(3)]
    sec = s.seconds
    scale = 1e-6 if s.time_unit == "s" else 1.0
    for i in range(len(s.end)):
        b = min(max(int(sec(s.end[i]) / width), 0), nb - 1)
        thr[s.kind[i]][b] += 1
        key = (s.fcode[i], b)
        lst = lat.get(key)
        if lst is None:
            lst = lat[key] = []
        lst.append((s.end[i] - s.start[i]) * scale)
    lat_series = []
    for j, code in enumerate(sorted(fnames)):
        color = SERIES_COLORS[j % len(SERIES_COLORS)]
        p50, p99 = [], []
        for b in range(nb):
            xs = lat.get((code, b))
            if xs:
                xs.sort()
                x = (b + 0.5) * width
                p50.append((x, _quantile(xs, 0.5)))
                p99.append((x, _quantile(xs, 0.99)))
        lat_series.append({"name": f"{fnames[code]} p50", "color": color, "points": p50})
        lat_series.append({"name": f"{fnames[code]} p99", "color": color, "points": p99, "dash": True})
    thr_series = []
    per = width if s.time_unit == "s" else 1.0
    for kind, name in enumerate(("ok", "fail", "info")):
        pts = [((b + 0.5) * width, thr[kind][b] / per) for b in range(nb)]
        if any(y for _, y in pts):
            thr_series.append({"name": name, "color": TYPE_COLORS[name], "points": pts})
    return lat_series, thr_series


def _unseen(s: SeriesCollector, width: float) -> list:
    pts = s.unseen_points()
    if not pts:
        return []
    best: dict[int, tuple[float, int]] = {}
    for x, n in pts:
        b = min(max(int(x / width), 0), BINS - 1) if width > 0 else 0
        if b not in best or n >= best[b][1]:
            best[b] = (x, n)
    return [{"name": "unseen", "color": "#9467bd", "points": [best[b] for b in sorted(best)]}]


def charts(s: SeriesCollector | None, result: dict) -> list[tuple[str, str, str]]:
    """[(heading, svg, caption)] for the report."""
    if s is None or s.t_first is None:
        return []
    x_max, width, _ = _bins(s)
    unit = "time (s)" if s.time_unit == "s" else "op position"
    shade = fault_shading(s)
    marks = break_markers(s, result)
    out = []
    rows = _timeline(s, x_max)
    if rows:
        out.append(("Operations by process",
                    lane_chart(rows, title="one lane per client process: green while ops are in flight; "
                               "red/orange height = share of failed/indefinite ops",
                               x_label=unit, x_max=x_max, shading=shade, markers=marks),
                    "Shaded bands: fault intervals from the nemesis (hover for the fault)."))
    lat, thr = _latency_throughput(s, x_max)
    if lat:
        ylab = "latency (ms)" if s.time_unit == "s" else "latency (ops)"
        out.append(("Latency", line_chart(lat, title="p50 (solid) and p99 (dashed) per operation",
                                          x_label=unit, y_label=ylab, x_max=x_max, log_y=True,
                                          shading=shade, markers=marks),
                    "Completion latency of client ops, by the time they completed."))
    if thr:
        ylab = "ops/s" if s.time_unit == "s" else "ops per position"
        out.append(("Throughput", line_chart(thr, title="completions by outcome", x_label=unit,
                                             y_label=ylab, x_max=x_max, shading=shade, markers=marks),
                    "Client op completions per second."))
    un = _unseen(s, width)
    if un and any(n for _, n in un[0]["points"]):
        out.append(("Unseen records", line_chart(un, title="acknowledged, not yet returned by any ok poll",
                                                 x_label=unit, y_label="records", x_max=x_max,
                                                 shading=shade, markers=marks),
                    "A count that stays up at the end means records no consumer ever saw."))
    offs = _lso_hw(s)
    if offs:
        out.append(("Last stable offset and high watermark",
                    line_chart(offs, title="per partition: high watermark (dashed) and last stable offset "
                               "(solid), as the run's monitor sampled them", x_label=unit, y_label="offset",
                               x_max=x_max, shading=shade, markers=marks),
                    "read_committed consumers read only below the LSO: a solid line that stays flat under "
                    "a rising dashed one is a transaction holding the partition (hanging-transaction when "
                    "it stands past the threshold with no fault in force)."))
    lag = _realtime_lag(result)
    if lag:
        out.append(("Realtime lag", line_chart(lag, title="largest realtime lag of a poll (Jepsen's)",
                                               x_label=unit, y_label="lag (ms)", x_max=x_max,
                                               shading=shade, markers=marks),
                    "How long before a poll began the newest record its consumer had seen had "
                    "already been superseded in the partition (a lower bound; per key in results.json)."))
    return out


OFFSET_PARTITIONS = 6       # partitions drawn in the LSO / high-watermark chart (the first by name)
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


def _thin(points: list, n: int) -> list:
    if len(points) <= n:
        return points
    step = len(points) / n
    return [points[int(i * step)] for i in range(n)] + [points[-1]]


def _lso_hw(s: SeriesCollector) -> list:
    out = []
    keys = sorted(s.offsets, key=lambda k: (len(k), k))[:OFFSET_PARTITIONS]
    for i, k in enumerate(keys):
        pts = _thin(s.offsets[k], LINE_BINS)
        color = PALETTE[i % len(PALETTE)]
        out.append({"name": f"{k} hw", "color": color, "dash": True,
                    "points": [(s.seconds(t), hw) for t, _, hw in pts]})
        out.append({"name": f"{k} lso", "color": color, "points": [(s.seconds(t), lso) for t, lso, _ in pts]})
    return out


def _realtime_lag(result: dict) -> list:
    lag = result.get("realtime_lag")
    if not isinstance(lag, dict) or not lag.get("series"):
        return []
    return [{"name": "max lag per bin", "color": "#d62728",
             "points": [(t, ms) for t, ms in lag["series"]]}]


def fault_rows(s: SeriesCollector | None, limit: int = 200) -> list[dict[str, Any]]:
    if s is None:
        return []
    return [{"fault": name, "start": round(s.seconds(a), 6), "end": round(s.seconds(b), 6),
             "open_at_end": oe} for a, b, name, oe in s.all_faults()[:limit]]
