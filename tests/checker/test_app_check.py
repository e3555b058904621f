"""check_app: the verdict on a user's exactly-once copier, one rule per test, on hand-built histories."""
import gzip
import json

import pytest

from checker.history import HistoryError
from checker.kafka.app import check_app
from checker.kafka.hangs import DEFAULT_THRESHOLD_S

pytestmark = pytest.mark.fast
MS = 1_000_000
S = 1_000_000_000


def value(i, keys):
    return f"k{i % keys}:{i}"


class Run:
    """Ops in the app history contract, a millisecond apart unless `at` (ns) says when."""

    def __init__(self, keys=4, partitions=2, out_partitions=2):
        self.ops, self.t = [], 0
        self.keys, self.partitions, self.out_partitions = keys, partitions, out_partitions
        self.in_off, self.out = {}, {}

    def op(self, process, type_, f, val, at=None, **extra):
        self.t = at if at is not None else self.t + MS
        self.ops.append({"index": len(self.ops), "time": self.t, "process": process, "type": type_,
                         "f": f, "value": val, **extra})
        return self.ops[-1]

    def send(self, idxs, outcome="ok", at=None):
        """The seeder sends values idxs as one batch; outcome ok / info / fail, or None (no completion)."""
        mops = [["send", f"in-{(i % self.keys) % self.partitions}", value(i, self.keys)] for i in idxs]
        self.op("seeder", "invoke", "send", mops)
        if outcome == "ok":
            acks = []
            for _, p, v in mops:
                off = self.in_off.get(p, 0)
                self.in_off[p] = off + 1
                acks.append(["send", p, [off, v]])
            return self.op("seeder", "ok", "send", acks, at=at)
        if outcome is not None:
            return self.op("seeder", outcome, "send", mops, at=at)

    def write(self, vals, p=None):
        """The app writes values to the output (committed): {out-p: [[offset, v], ...]}."""
        recs = {}
        for v in vals:
            q = p or f"out-{int(v.split(':')[0][1:]) % self.out_partitions}"
            log = self.out.setdefault(q, [])
            log.append([len(log), v])
            recs.setdefault(q, []).append(log[-1])
        return recs

    def poll(self, recs, at=None):
        self.op("reader", "invoke", "poll", [["poll"]], isolation="read_committed")
        return self.op("reader", "ok", "poll", [["poll", recs]], at=at, isolation="read_committed")

    def copy(self, idxs, p=None, at=None):
        """The app copies values idxs; the tail reader sees them."""
        return self.poll(self.write([value(i, self.keys) for i in idxs], p), at=at)

    def final(self, out=None):
        self.op("final", "invoke", "poll", [["poll"]], final=True, isolation="read_committed")
        return self.op("final", "ok", "poll", [["poll", self.out if out is None else out]], final=True,
                       isolation="read_committed")

    def audit(self, aborted=None, open_=None):
        val = {p: {"aborted": (aborted or {}).get(p, []), "open": (open_ or {}).get(p, []),
                   "committed": len(log), "non_transactional": 0} for p, log in self.out.items()}
        return self.op("audit", "info", "log-audit", val)

    def app(self, f, **val):
        return self.op("app", "info", f, val)

    def nemesis(self, f, val=None, at=None):
        return self.op("nemesis", "info", f, val, at=at)


def copier(n=20, **kw):
    """A correct run: n values seeded in batches of 5 and copied."""
    r = Run(**kw)
    r.app("app-start", instance=0, incarnation=0, pid=100)
    for b in range(0, n, 5):
        r.send(range(b, min(b + 5, n)))
        r.copy(range(b, min(b + 5, n)))
    return r


def test_a_correct_copier_is_valid():
    r = copier()
    r.final()
    r.audit()
    res = check_app(r.ops)
    assert res["valid"] is True and res["anomalies"] == {}
    st = res["stats"]
    assert (st["input_acknowledged"], st["output_records"], st["output_unique"]) == (20, 20, 20)
    assert st["aborted_in_log"] == 0 and st["open_in_log"] == 0 and st["instances"] == 1
    assert res["progress"]["series"][-1][1:] == [20, 20]


def test_an_acknowledged_value_missing_from_the_final_read_is_a_lost_write():
    r = copier()
    ack = r.send([20])
    r.final()
    res = check_app(r.ops)
    (w,) = res["anomalies"]["lost-write"]
    assert w == {"value": "k0:20", "in-p": "in-0", "offset": 10, "op": ack["index"], "seen_by_reader": False}
    assert res["valid"] is False and res["stats"]["anomaly_counts"] == {"lost-write": 1}


def test_an_absent_value_the_group_never_committed_past_is_unprocessed_not_lost():
    r = copier()
    r.send([20, 22])                                   # in-0 offsets 10 and 11
    r.final()
    r.op("audit", "info", "group-offsets", {"in-0": 11, "in-1": 10})
    res = check_app(r.ops)
    (lost,) = res["anomalies"]["lost-write"]           # the group committed past offset 10: consumed, not copied
    (stalled,) = res["anomalies"]["unprocessed"]       # offset 11: the app never got to it
    assert (lost["value"], stalled["value"], stalled["group_committed"]) == ("k0:20", "k2:22", 11)
    assert res["valid"] is False


def test_without_the_groups_offsets_every_absent_value_is_lost():
    r = copier()
    r.send([20])
    r.final()
    r.op("audit", "info", "group-offsets", {})         # the app used a group of its own: nothing known
    res = check_app(r.ops)
    assert set(res["anomalies"]) == {"lost-write"}


def test_a_value_the_reader_saw_that_vanished_is_lost_whatever_the_group_committed():
    r = copier()
    r.send([20])
    recs = r.write(["k0:20"])
    r.poll(recs)
    r.out["out-0"].pop()                               # gone from the log by the final read
    r.final()
    r.op("audit", "info", "group-offsets", {"in-0": 0})
    assert set(check_app(r.ops)["anomalies"]) == {"lost-write"}


def test_a_value_at_two_offsets_is_a_duplicate():
    r = copier()
    r.copy([3])                                     # copied again, after a restart that lost its offsets
    r.final()
    (w,) = check_app(r.ops)["anomalies"]["duplicate"]
    assert w["value"] == "k3:3" and w["offsets"] == [["out-1", 1], ["out-1", 10]]


def test_a_value_no_seeder_op_sent_is_unexpected():
    r = copier()
    r.poll(r.write(["garbage\\xff"], p="out-0"))
    r.final()
    (w,) = check_app(r.ops)["anomalies"]["unexpected-value"]
    assert w["value"] == "garbage\\xff" and w["where"] == ["out-0", 10] and w["read_by"] == "final"
    assert w["reason"].startswith("no seeder op sent it")


def test_a_value_whose_send_failed_definitely_is_unexpected_in_the_output_and_not_lost_when_absent():
    r = copier()
    r.send([20, 21], outcome="fail")
    r.copy([20])
    r.final()
    res = check_app(r.ops)
    (w,) = res["anomalies"]["unexpected-value"]
    assert w["value"] == "k0:20" and "failed definitely" in w["reason"]
    assert "lost-write" not in res["anomalies"] and res["stats"]["input_failed"] == 2


def test_indefinite_sends_may_be_absent_or_present():
    r = copier()
    r.send([20, 21], outcome="info")
    r.send([22], outcome=None)                      # invoked, never completed: indefinite too
    r.copy([21])
    r.final()
    res = check_app(r.ops)
    assert res["valid"] is True
    assert res["stats"]["input_indefinite"] == 3 and res["stats"]["indefinite_absent"] == 2


def test_a_failed_send_retried_without_completion_is_indefinite():
    r = copier()
    r.send([20], outcome="fail")
    r.send([20], outcome=None)
    r.copy([20])
    r.final()
    assert check_app(r.ops)["valid"] is True


def reordered_run():
    r = copier(n=0, keys=4)
    r.send(range(8))                                # k0:0 and k0:4 go to in-0 in that order
    r.copy([1, 2, 3, 5, 6, 7])
    r.copy([4, 0], p="out-0")                       # ... and land in out-0 the other way round
    r.final()
    return r


def test_a_keys_values_landing_out_of_input_order_in_one_partition_are_reordered_only_when_ordered():
    r = reordered_run()
    res = check_app(r.ops)
    assert res["valid"] is True and res["stats"]["reordered_not_judged"] == 1
    (w,) = check_app(r.ops, ordered=True)["anomalies"]["reordered"]
    assert w == {"key": "k0", "values": ["k0:0", "k0:4"], "input": [["in-0", 0], ["in-0", 2]],
                 "output": [["out-0", 3], ["out-0", 2]]}


def test_a_key_split_across_output_partitions_is_not_reordered():
    r = copier(n=0, keys=4)
    r.send(range(8))
    r.copy([1, 2, 3, 5, 6, 7])
    r.copy([4], p="out-1")
    r.copy([0], p="out-0")                          # k0:4 before k0:0, but in another partition
    r.final()
    res = check_app(r.ops, ordered=True)
    assert res["valid"] is True and res["stats"]["keys_split_across_partitions"] == 1


def test_a_read_at_an_offset_the_audit_lists_as_aborted_is_g1a():
    r = copier()
    r.final()
    assert r.out["out-0"][2] == [2, "k0:4"]
    r.audit(aborted={"out-0": [[2, "k0:4"]]})       # the log says offset 2 of out-0 was aborted
    res = check_app(r.ops)
    (w,) = res["anomalies"]["G1a"]
    assert w == {"value": "k0:4", "out-p": "out-0", "offset": 2, "read_by": "final",
                     "op": r.ops[-2]["index"]}
    assert res["stats"]["aborted_in_log"] == 1


def test_aborted_records_nobody_read_are_not_g1a():
    r = copier()
    r.final()
    r.audit(aborted={"out-0": [[99, "k0:8"]]})      # an aborted copy past what anyone read
    res = check_app(r.ops)
    assert res["valid"] is True and res["stats"]["aborted_in_log"] == 1
    r2 = copier()
    r2.final()                                      # no audit at all: no G1a claim
    res = check_app(r2.ops)
    assert res["valid"] is True and res["stats"]["aborted_in_log"] is None


def monitored(samples, faults=()):
    r = copier()
    r.final()
    r.audit(open_={"out-0": [[10, "k0:4"]]})
    for t, f in faults:
        r.nemesis(f, at=t * S)
    for t, v in samples:
        r.op("monitor", "info", "offsets", v, at=t * S)
    return r


def test_an_lso_standing_below_the_high_watermark_past_the_threshold_is_a_hanging_transaction():
    r = monitored([(t, [["out-0", 10, 12]]) for t in range(1, 14)])
    res = check_app(r.ops, hang_threshold_s=10)
    (w,) = res["anomalies"]["hanging-transaction"]
    assert w["key"] == "out-0" and w["offset"] == 10 and w["stood_s"] == 12.0 and w["open_record"] == "k0:4"
    assert res["stats"]["lso_behind_at_end"][0]["lso"] == 10
    res = check_app(r.ops)                          # the default threshold: Kafka's 15 minutes
    assert res["valid"] is True and res["stats"]["hang_threshold_s"] == DEFAULT_THRESHOLD_S
    assert res["stats"]["lso_behind_at_end"][0]["stood_s"] == 12.0


def test_a_stand_while_a_fault_is_in_force_is_not_a_hang():
    r = monitored([(t, [["out-0", 10, 12]]) for t in range(1, 14)],
                  faults=[(1, "start-partition-app"), (12, "stop-partition-app")])
    assert check_app(r.ops, hang_threshold_s=10)["valid"] is True


def test_lag_from_ack_to_visibility_hand_computed():
    r = Run(keys=1, out_partitions=1)
    r.send([0, 1], at=1 * S)                        # acked at 1 s
    r.send([2], at=2 * S)                           # acked at 2 s
    r.copy([0], at=int(1.1 * S))                    # lag 100 ms
    r.copy([1, 2], at=int(2.5 * S))                 # lags 1500 ms, 500 ms
    r.final()
    p = check_app(r.ops)["progress"]
    assert p["lag_ms"] == {"p50": 500.0, "p99": 1500.0, "max": 1500.0, "count": 3}
    t0 = r.ops[0]["time"] / S
    assert [pt[1:] for pt in p["series"]] == [[0, 2], [1, 2], [1, 3], [3, 3]]
    assert p["series"][0][0] == pytest.approx(1 - t0)
    assert [x for _, x in p["lag_series"]] == [100.0, 500.0, 1500.0]


def test_nothing_seen_has_no_lag():
    r = Run()
    r.send([0])
    r.final({})
    res = check_app(r.ops)
    assert res["progress"]["lag_ms"] == {"p50": None, "p99": None, "max": None, "count": 0}
    assert res["stats"]["no_output"] is True and res["stats"]["first_output_s"] is None
    assert list(res["anomalies"]) == ["lost-write"]


def test_instances_restarts_and_self_exits():
    r = copier()
    r.app("app-start", instance=1, incarnation=0, pid=101)
    r.app("app-exit", instance=0, incarnation=0, pid=100, code=-9, by="lab")
    r.app("app-start", instance=0, incarnation=1, pid=102)
    r.app("app-exit", instance=1, incarnation=0, pid=101, code=3, by="self")
    r.final()
    st = check_app(r.ops)["stats"]
    assert (st["instances"], st["restarts"]) == (2, 1)
    assert st["app_exits_by_self"] == [{"instance": 1, "incarnation": 0, "code": 3}]


def test_bad_input_is_a_history_error(tmp_path):
    r = Run()
    r.send([0], outcome="info")
    r.final()
    with pytest.raises(HistoryError, match="no ok send from the seeder"):
        check_app(r.ops)
    r = copier()
    with pytest.raises(HistoryError, match="^the history has no final read of the output$"):
        check_app(r.ops)
    r.op("final", "invoke", "poll", [["poll"]], final=True)
    r.op("final", "fail", "poll", [["poll"]], final=True)
    with pytest.raises(HistoryError, match="never completed"):
        check_app(r.ops)
    bad = tmp_path / "history.jsonl"
    bad.write_text('{"index": 0, "process": "seeder", "type": "ok"}\n')
    with pytest.raises(HistoryError, match="missing 'f'"):
        check_app(str(bad))


def test_a_gzipped_history_file_reads_as_the_ops_do(tmp_path):
    r = copier()
    r.copy([3])
    r.final()
    path = tmp_path / "history.jsonl.gz"
    with gzip.open(path, "wt") as fh:
        fh.writelines(json.dumps(op) + "\n" for op in r.ops)
    from_file = check_app(str(path))
    from_ops = check_app(iter(r.ops))               # a one-shot iterator is fine: one pass
    from_file["stats"].pop("elapsed_s"), from_ops["stats"].pop("elapsed_s")
    assert from_file == from_ops and list(from_file["anomalies"]) == ["duplicate"]


def test_fifty_thousand_records_check():
    n, keys = 50_000, 16
    r = copier(n=0, keys=keys, partitions=4, out_partitions=4)
    for b in range(0, n, 100):
        r.send(range(b, b + 100))
        r.copy(range(b, b + 100))
    r.final()
    r.audit()
    r.ops += [{"index": len(r.ops) + i, "time": r.t + i * S // 2, "process": "monitor", "type": "info",
               "f": "offsets", "value": [[f"out-{p}", 12_500, 12_500] for p in range(4)]} for i in range(200)]
    res = check_app(r.ops, ordered=True, cap=4)
    assert res["valid"] is True and res["stats"]["output_unique"] == n
    assert len(res["progress"]["series"]) <= 400 and len(res["progress"]["lag_series"]) <= 400
