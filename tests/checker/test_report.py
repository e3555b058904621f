"""report.html: self-contained, says the verdict, names the anomalies, stays small."""
import re
from pathlib import Path

import pytest

from checker.kafka import check_kafka
from checker.report import render_report
from checker.report_series import SeriesCollector

pytestmark = pytest.mark.fast

DATA = Path(__file__).resolve().parents[1] / "data" / "kafka"
REMOTE = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", re.I)


def report_for(path, **kw):
    s = SeriesCollector()
    r = check_kafka(path, series=s, **kw)
    return r, render_report(r, s, title=Path(path).name)


def test_report_is_self_contained_and_shows_verdict_and_anomalies():
    r, html = report_for(DATA / "g1c.jsonl")
    assert r["valid"] is False
    assert not REMOTE.search(html)
    assert "http://" not in html and "https://" not in html
    assert "<script" not in html.lower() and "<link" not in html.lower()
    assert "INVALID" in html and ">G1c<" in html
    assert "<svg" in html


def test_valid_report_says_valid_and_lists_allowed_findings():
    _, html = report_for(DATA / "int-send-skip.jsonl")
    assert "VALID" in html and "INVALID" not in html
    assert "int-send-skip" in html and "allowed by Kafka" in html


def test_history_strings_are_escaped(tmp_path):
    h = tmp_path / "h.jsonl"
    h.write_text('{"index":0,"process":0,"type":"invoke","f":"send","value":[["send",0,1]]}\n'
                 '{"index":1,"process":0,"type":"fail","f":"send","value":[["send",0,1]],'
                 '"error":"<img src=x onerror=alert(1)>"}\n'
                 '{"index":2,"process":1,"type":"invoke","f":"poll","value":[["poll"]]}\n'
                 '{"index":3,"process":1,"type":"ok","f":"poll","value":[["poll",{"0":[[0,1]]}]]}\n')
    _, html = report_for(h)
    assert "<img" not in html and "&lt;img" in html


def test_faults_are_shaded_and_listed():
    _, html = report_for(DATA / "valid.jsonl")
    assert "<title>partition:" in html          # the shaded band of the start/stop-partition pair
    assert "Faults</h2>" in html


def test_linearizability_break_is_marked():
    s = SeriesCollector()
    for d in [{"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "write", "value": 1},
              {"index": 1, "time": 10**9, "process": 0, "type": "ok", "f": "write", "value": 1},
              {"index": 2, "time": 2 * 10**9, "process": 1, "type": "invoke", "f": "read", "value": None},
              {"index": 3, "time": 3 * 10**9, "process": 1, "type": "ok", "f": "read", "value": 7}]:
        s.feed(d)
    result = {"valid": False, "stats": {"model": "register"},
              "anomalies": {"nonlinearizable": {"op": {"index": 3, "invoke_index": 2, "process": 1,
                                                        "type": "ok", "f": "read", "value": 7},
                                                 "prefix": [0], "states": ["1"]}}}
    html = render_report(result, s, "reg")
    assert "breaks at op 3" in html and "Where linearizability breaks" in html
    assert "INVALID" in html and "nonlinearizable" in html


def test_a_big_history_gives_a_small_report():
    ops = []
    for i in range(20000):
        p = i % 7
        ops += [{"index": 2 * i, "time": i * 10**6, "process": p, "type": "invoke", "f": "send",
                 "value": [["send", 0, i]]},
                {"index": 2 * i + 1, "time": i * 10**6 + 5 * 10**5, "process": p,
                 "type": "ok" if i % 50 else "info", "f": "send", "value": [["send", 0, [i, i]]]}]
    s = SeriesCollector()
    r = check_kafka(ops, series=s)
    html = render_report(r, s)
    assert len(html) < 400_000
    small = SeriesCollector()
    r2 = check_kafka(ops[:2000], series=small)
    assert len(html) < 4 * len(render_report(r2, small))


def test_the_offsets_monitor_samples_are_drawn_per_partition(tmp_path):
    """A run's LSO and high-watermark samples become one chart, a dashed high watermark and a solid
    LSO per partition; a history without samples has no such chart, and the monitor is no lane."""
    import json
    ops = [{"process": 0, "type": "invoke", "f": "send", "value": [["send", 0, 1]], "time": 0},
           {"process": 0, "type": "ok", "f": "send", "value": [["send", 0, [0, 1]]], "time": 10},
           {"process": 1, "type": "invoke", "f": "poll", "value": [["poll"]], "time": 20},
           {"process": 1, "type": "ok", "f": "poll", "value": [["poll", {"0": [[0, 1]]}]], "time": 30}]
    h = tmp_path / "h.jsonl"
    h.write_text("".join(json.dumps(dict(o, index=i)) + "\n" for i, o in enumerate(ops)))
    _, plain = report_for(h)
    assert "Last stable offset and high watermark" not in plain
    samples = [{"process": "monitor", "type": "info", "f": "offsets", "time": 40 + i * 10 ** 9,
                "value": [[0, 1, 1 + i], [1, i, i]]} for i in range(5)]
    h.write_text("".join(json.dumps(dict(o, index=i)) + "\n" for i, o in enumerate(ops + samples)))
    _, html = report_for(h)
    chart = html[html.index("Last stable offset and high watermark"):]
    chart = chart[:chart.index("</svg>")]
    assert chart.count("<polyline") == 4 and chart.count('stroke-dasharray="5 3"') >= 2
    assert ">0 hw<" in chart and ">1 lso<" in chart
    assert "monitor" not in html[html.index("Operations by process"):html.index("Latency")]


def test_a_report_says_when_consumers_were_held_back_at_the_end(tmp_path):
    import json
    ops = [{"process": 0, "type": "invoke", "f": "send", "value": [["send", 0, 1]], "time": 0},
           {"process": 0, "type": "ok", "f": "send", "value": [["send", 0, [0, 1]]], "time": 10},
           {"process": 1, "type": "invoke", "f": "poll", "value": [["poll"]], "time": 20},
           {"process": 1, "type": "ok", "f": "poll", "value": [["poll", {"0": [[0, 1]]}]], "time": 30},
           {"process": "monitor", "type": "info", "f": "offsets", "value": [[0, 1, 3]], "time": 40},
           {"process": "monitor", "type": "info", "f": "offsets", "value": [[0, 1, 3]], "time": 2 * 10 ** 9}]
    h = tmp_path / "h.jsonl"
    h.write_text("".join(json.dumps(dict(o, index=i)) + "\n" for i, o in enumerate(ops)))
    r, html = report_for(h)
    assert r["valid"] is True                       # 2 s is no hang at the default threshold ...
    assert "read_committed consumers were held back" in html and "LSO 1 under high watermark 3" in html
