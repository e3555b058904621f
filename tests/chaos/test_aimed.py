"""Runs aimed at one unsafe setting each: the workload settings and the fault that aim them, end to end.

- `workload.producers=1`: every process sends through one producer instance
  (one session in the history), and the run stays valid with safe settings.
- `workload.resend=restart` under `lost-ack`: a send whose answer was lost
  ends `info`, the application restarts its producer (a new producer id, no
  transactional.id) and sends the same value again; the broker had appended
  the first copy, so the checker reports that value as a duplicate.
- `delay-end-txn` on Kafka 4.0: the coordinator handles late copies of the
  txn workload's EndTxn requests; with the epoch bump per transaction every
  copy that arrives after its transaction ended is fenced and the run is
  valid (before 4.0 the same copies commit the next transaction:
  tests/unit/test_coordinator_faults.py, and the rates measured by
  `eoslab sweep` in the README).
"""
import json
import os
from collections import defaultdict

import pytest

from tests.chaos.runs import TXN_CLUSTER, assert_valid, run_once

CLUSTER_ARGS = TXN_CLUSTER


def history(path) -> list[dict]:
    return [json.loads(line) for line in open(os.path.join(path, "history.jsonl"))]


@pytest.mark.integration
def test_shared_producer_carries_every_process_send(shared, tmp_path):
    code, results, meta = run_once(tmp_path, "queue", [], seed=2, time_limit=4, cluster=shared.cluster_name,
                                   settings={"workload.producers": "1", "max.in.flight.requests.per.connection": "5"})
    assert_valid(code, results, meta, "a shared producer, no faults")
    sends = [o for o in history(tmp_path / "queue-none-2") if o["f"] == "send" and o["type"] == "ok"]
    assert len({o["process"] for o in sends}) >= 3
    assert {o["producer"]["session"] for o in sends} == {"shared0-1"}
    assert len({o["producer"]["pid"] for o in sends}) == 1


@pytest.mark.integration
def test_resend_after_restart_without_transactional_id_duplicates(shared, tmp_path):
    code, results, meta = run_once(tmp_path, "queue", ["lost-ack"], seed=3, time_limit=8,
                                   cluster=shared.cluster_name,
                                   settings={"workload.resend": "restart", "delivery.timeout.ms": "3000"})
    assert "error" not in meta, meta.get("error")
    ops = history(tmp_path / "queue-lost-ack-3")
    invokes = defaultdict(list)                       # value -> its send invocations
    for o in ops:
        if o["f"] == "send" and o["type"] == "invoke":
            invokes[o["value"][0][2]].append(o["process"])
    resent = {v for v, procs in invokes.items() if len(procs) > 1}
    assert resent, "no send ended without an answer: the lost ACKs were not aimed"
    info = {(o["process"], o["value"][0][2]) for o in ops if o["f"] == "send" and o["type"] == "info"}
    assert all((invokes[v][0], v) in info for v in resent), "a value was sent again after a definite answer"
    assert code == 1 and "duplicate" in results["anomalies"], results.get("anomalies")
    assert {w["value"] for w in results["anomalies"]["duplicate"]} <= resent


@pytest.mark.integration
def test_late_end_txn_copies_are_fenced_on_kafka_4(shared, tmp_path):
    code, results, meta = run_once(tmp_path, "txn", ["delay-end-txn"], seed=1, time_limit=8,
                                   cluster=shared.cluster_name)
    assert_valid(code, results, meta, "late EndTxn copies on 4.0")
    stops = [o["value"] for o in history(tmp_path / "txn-delay-end-txn-1")
             if o["f"] == "stop-delay-end-txn" and o.get("value")]
    answers = [a for s in stops for a in s.get("replayed", [])]
    assert answers, f"no EndTxn copy was handled: {stops}"
    assert "PRODUCER_FENCED" in answers and set(answers) <= {"PRODUCER_FENCED", "CONCURRENT_TRANSACTIONS", "NONE"}
