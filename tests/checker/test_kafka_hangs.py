"""Hanging transactions: an LSO that stands below the high watermark, from a run's offsets samples."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from checker.kafka import check_kafka
from checker.kafka.hangs import HANGING

pytestmark = pytest.mark.fast
ROOT = Path(__file__).resolve().parents[2]
S = 1_000_000_000


def history(samples, sends=True):
    """A txn that wrote offsets 0 and 1 of key 0 (process 0), a poll, then monitor samples
    (t seconds, [[key, lso, hw], ...])."""
    ops = []
    if sends:
        ops += [{"process": 0, "type": "invoke", "f": "send", "value": [["send", 0, 10], ["send", 0, 11]], "time": 0},
                {"process": 0, "type": "ok", "f": "send", "value": [["send", 0, [0, 10]], ["send", 0, [1, 11]]],
                 "time": 1000},
                {"process": 1, "type": "invoke", "f": "poll", "value": [["poll"]], "time": 2000},
                {"process": 1, "type": "ok", "f": "poll", "value": [["poll", {"0": [[0, 10], [1, 11]]}]],
                 "time": 3000}]
    ops += [{"process": "monitor", "type": "info", "f": "offsets", "value": v, "time": int(t * S)}
            for t, v in samples]
    return [dict(o, index=i) for i, o in enumerate(ops)]


def test_an_lso_standing_below_the_high_watermark_past_the_threshold_is_a_hanging_transaction():
    samples = [(t, [[0, 1, 2 + int(t)]]) for t in range(0, 12)]       # the LSO stands at 1, the HW moves
    r = check_kafka(history(samples), hang_threshold_s=10)
    assert r["valid"] is False
    (w,) = r["anomalies"][HANGING]
    assert w["key"] == 0 and w["offset"] == 1 and w["stood_s"] == 11.0 and w["standing_at_end"] is True
    assert w["high_watermark"] == [2, 13]
    assert w["writer"] == 1 and [o["index"] for o in w["ops"]] == [1]     # the send that wrote offset 1
    assert r["stats"]["lso_behind_at_end"] == [{"key": 0, "lso": 1, "high_watermark": 13, "stood_s": 11.0}]


def test_a_shorter_stand_or_a_moving_lso_is_not_one_but_a_stall_at_the_end_is_said():
    short = [(t, [[0, 1, 5]]) for t in range(0, 9)]                   # 8 s < 10 s
    r = check_kafka(history(short), hang_threshold_s=10)
    assert r["valid"] is True and HANGING not in r["anomalies"]
    assert r["stats"]["lso_behind_at_end"][0]["stood_s"] == 8.0
    moving = [(t, [[0, t, t + 1]]) for t in range(0, 30)]             # an open transaction at each sample, never the same
    r = check_kafka(history(moving), hang_threshold_s=10)
    assert r["valid"] is True and HANGING not in r["anomalies"]
    caught_up = [(t, [[0, 1, 5]]) for t in range(0, 20)] + [(20, [[0, 5, 5]])]
    r = check_kafka(history(caught_up), hang_threshold_s=10)
    (w,) = r["anomalies"][HANGING]                                    # it hung 19 s, then was fixed
    assert w["stood_s"] == 19.0 and w["standing_at_end"] is False
    assert "lso_behind_at_end" not in r["stats"]


def test_samples_only_from_the_monitor_and_the_default_threshold_is_kafkas_max_transaction_timeout():
    samples = [(t, [[0, 1, 5]]) for t in range(0, 100, 10)]
    h = history(samples)
    for o in h[4:]:
        o["process"] = 7                                               # not the monitor: ignored
    assert "offset_samples" not in check_kafka(h)["stats"]
    r = check_kafka(history(samples))                                   # 90 s < 900 s
    assert r["valid"] is True and r["stats"]["hang_threshold_s"] == 900.0


def test_the_command_line_takes_the_threshold_from_run_json(tmp_path):
    samples = [(t, [[0, 1, 5]]) for t in range(0, 31)]
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in history(samples)))
    cmd = [sys.executable, "-m", "eoslab", "check", str(path)]

    def verdict(*extra):
        r = subprocess.run(cmd + list(extra), capture_output=True, text=True, cwd=ROOT)
        return r.returncode, json.loads(r.stdout)
    assert verdict()[0] == 0                                            # 30 s < 900 s
    (tmp_path / "run.json").write_text(json.dumps({"hang_threshold_s": 20}))
    code, res = verdict()
    assert code == 1 and res["anomalies"][HANGING][0]["stood_s"] == 30.0
    assert verdict("--hang-threshold-s", "60")[0] == 0                  # the flag wins


def test_only_the_stand_outside_the_faults_counts():
    """A fault can hold the markers back while it lasts: 30 s of standing LSO of which only 5 s were
    outside a fault is no hang at a 10 s threshold; 15 s outside one is, wherever they lie; a fault
    that never stopped lasts to the end; a heal (an instant) is no fault."""
    def with_faults(*ops):
        h = history([(t, [[0, 1, 5]]) for t in range(0, 31)])
        for f, at in ops:               # each nemesis op as Jepsen writes it: an info pair
            h += [{"process": "nemesis", "type": "info", "f": f, "value": None, "time": int(at * S)}] * 2
        h.sort(key=lambda o: o["time"])
        return [dict(o, index=i) for i, o in enumerate(h)]
    assert check_kafka(with_faults(("start-partition", 0), ("stop-partition", 25)), hang_threshold_s=10)["valid"]
    r = check_kafka(with_faults(("start-partition", 0), ("stop-partition", 15)), hang_threshold_s=10)
    (w,) = r["anomalies"][HANGING]
    assert w["stood_s"] == 30.0 and w["stood_after_faults_s"] == 15.0
    r = check_kafka(with_faults(("start-kill", 8), ("stop-kill", 14), ("start-pause", 27), ("stop-pause", 40)),
                    hang_threshold_s=10)
    assert r["anomalies"][HANGING][0]["stood_after_faults_s"] == 13.0       # 14..27, the longest quiet part
    assert check_kafka(with_faults(("start-kill", 12)), hang_threshold_s=15)["valid"] is True    # 0..12 only
    r = check_kafka(with_faults(("heal", 10)), hang_threshold_s=10)
    assert r["anomalies"][HANGING][0]["stood_after_faults_s"] == 30.0
