"""Hanging transactions, made, found and fixed the Kafka way (KIP-664's find-hanging and abort).

`hanging-late-produce`: a produce that arrives after its transaction's ABORT marker (KAFKA-12671).
`hanging-no-id-batch`: a transactional batch sent without a transactional.id, by a producer no
transaction coordinator knows: before 2.2 the leader appends it and the transaction it opens can
never be ended by a coordinator; from 2.2 the leader refuses the request
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and appends nothing.

Guarantees: one broker, one controller, one transaction coordinator. The application's
transaction writes one record and aborts (a `txn` op, fail). Then the scenario plays the late
request as a fault (nemesis `start-/stop-late-produce`): a copy of the transaction's next
Produce, same producer id, epoch and transactional.id, sent straight to the leader after the
marker. Before KIP-890 (releases before 3.6) the leader appends it and opens a transaction
the coordinator knows nothing of; from 3.6 the leader asks the coordinator first and refuses it.
The offsets monitor samples the partition's LSO and high watermark throughout (process
"monitor"); the scenario waits, on those samples, until the LSO has stood for the hang
threshold, then fixes it as an operator does, with `eoslab transactions find-hanging` and
`abort` over the Kafka protocol (nemesis `start-/stop-abort-hanging`, the commands' output in
the op), and waits until the LSO has caught up. The checker's `hanging-transaction` is the
verdict: expected before 3.6, not from 3.6 on; the fact "the LSO caught up" holds on every
release (after the fix, or because nothing hung).
"""
from __future__ import annotations

import subprocess
import sys
import time

from cluster.offsets_monitor import OffsetsMonitor
from cluster.scenarios.base import ClusterSpec, Fact, register
from eoslab.common import record_batch as rb
from eoslab.common.errors import name as error_name
from eoslab.v1 import broker_pb2

TOPIC = "hang"
THRESHOLD_S = 3.0        # the checker's hang threshold here: the stand waited for is a little longer
SAMPLE_S = 0.2


def lso_caught_up(ops: list[dict]) -> str | None:
    samples = [o["value"] for o in ops if o.get("process") == "monitor" and o.get("f") == "offsets"]
    if not samples:
        return "no offsets sample was recorded"
    last = {k: (lso, hw) for k, lso, hw in samples[-1]}
    behind = {k: v for k, v in last.items() if v[0] < v[1]}
    return f"at the last sample the LSO is behind: {behind}" if behind else None


def _transactions(ctx, *args) -> str:
    """`eoslab transactions ARGS` against the cluster's Kafka listeners: its output (one line on error)."""
    boot = ctx.rt.info().kafka_bootstrap
    p = subprocess.run([sys.executable, "-m", "eoslab", "transactions", "--bootstrap-server", boot, *args],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"eoslab transactions {' '.join(args)}: {p.stderr.strip()}")
    return p.stdout


@register("hanging-late-produce", seed="KAFKA-12671, KIP-664 (the hanging transaction operators report most)",
          description="a produce arriving after its transaction's ABORT marker hangs the partition's LSO "
                      "before 3.6 (KIP-890 refuses it from 3.6); found and aborted with eoslab transactions",
          cluster=ClusterSpec(brokers=1, controllers=1, txn_coordinators=1),
          expected=("hanging-transaction",), expected_by_version={"3.6": (), "4.0": ()},
          facts=(Fact("the LSO caught up", lso_caught_up),), hang_threshold_s=THRESHOLD_S,
          notes="The late Produce is what a client retry, a slow network or a stuck request queue delivers "
                "after the coordinator has written the ABORT marker. The fix is Kafka's operator path: "
                "find-hanging names the partition, producer id and start offset, abort writes the ABORT "
                "marker through WriteTxnMarkers from an admin client.")
def late_produce(ctx) -> None:
    tid = "k12671"
    ctx.create_topic(TOPIC)
    monitor = OffsetsMonitor(ctx.md, ctx.history, TOPIC, 1, interval=SAMPLE_S)
    p = ctx.producer(transactional_id=tid, linger_ms=0, request_timeout_ms=3000)
    ctx.init_producer(0, p, "app")
    [v1, v2] = ctx.values(2)
    t = ctx.txn(0, p, "app", TOPIC, [(0, v1)])
    if not t.begin_and_send():
        raise RuntimeError("the transaction could not start")
    t.wait_sent()
    t.abort()
    ctx.wait(lambda: (monitor.sample() or [[0, -1, 0]])[0][1] == 2, "the ABORT marker (LSO 2)")

    ctx.nemesis("start-late-produce", {"transactional_id": tid, "producer_id": p.producer_id,
                                       "producer_epoch": p.producer_epoch, "sequence": 1})
    _, leader = ctx.leader(TOPIC)
    batch = rb.build_batch([(None, str(v2).encode(), int(time.time() * 1000))], producer_id=p.producer_id,
                           producer_epoch=p.producer_epoch, base_sequence=1, transactional=True)
    r = ctx.md.stub(leader).Produce(broker_pb2.ProduceRequest(
        transactional_id=tid, acks=-1, timeout_ms=10000,
        partitions=[broker_pb2.PartitionProduceData(topic=TOPIC, partition=0, batch=batch)]), timeout=15)
    pr = r.partitions[0]
    ctx.nemesis("stop-late-produce", {"error": error_name(pr.error), "base_offset": pr.base_offset})

    _stand_then_fix(ctx, monitor)
    monitor.sample()
    ctx.read_all(TOPIC, isolation="read_committed")


def _stand_then_fix(ctx, monitor) -> None:
    """Wait, on the monitor's samples, until the LSO has stood past the threshold (or stayed caught up as
    long); if it stood, fix it as an operator does: find-hanging, then abort at the LSO."""
    start = time.monotonic()
    stood = []

    def stood_long_enough() -> bool:
        [[_, lso, hw]] = monitor.sample() or [[0, 0, 0]]
        if lso >= hw:
            stood.clear()
        elif not stood:
            stood.append(time.monotonic())
        return bool(stood) and time.monotonic() - stood[0] >= THRESHOLD_S + 1.0 or \
            (not stood and time.monotonic() - start >= THRESHOLD_S + 1.0)
    ctx.wait(stood_long_enough, "the LSO to stand past the threshold (or to stay caught up as long)",
             timeout=60, every=SAMPLE_S)
    if stood:                                    # it hangs: Kafka's operator fix
        hanging = _transactions(ctx, "find-hanging", "--topic", TOPIC, "--max-transaction-timeout", "0")
        ctx.nemesis("start-abort-hanging", {"find-hanging": hanging.splitlines()})
        offset = monitor.sample()[0][1]
        done = _transactions(ctx, "abort", "--topic", TOPIC, "--partition", "0", "--start-offset", str(offset))
        ctx.wait(lambda: (lambda s: bool(s) and s[0][1] >= s[0][2])(monitor.sample()), "the LSO to catch up",
                 timeout=30, every=SAMPLE_S)
        ctx.nemesis("stop-abort-hanging", {"abort": done.splitlines()})


@register("hanging-no-id-batch", seed="KIP-664 (a transactional batch no coordinator knows of); Kafka 2.2's "
          "check of the request's transactional.id",
          description="a transactional batch without a transactional.id hangs the partition's LSO before "
                      "2.2 (refused from 2.2); found and aborted with eoslab transactions",
          cluster=ClusterSpec(brokers=1, controllers=1, txn_coordinators=1),
          expected=(), expected_by_version={"0.11": ("hanging-transaction",)},
          facts=(Fact("the LSO caught up", lso_caught_up),), hang_threshold_s=THRESHOLD_S,
          notes="A client bug or a hand-made request: the producer id is an idempotent producer's, so no "
                "transaction coordinator will ever write its marker. Only an operator's abort "
                "(WriteTxnMarkers from an admin client) ends it.")
def no_id_batch(ctx) -> None:
    ctx.create_topic(TOPIC)
    monitor = OffsetsMonitor(ctx.md, ctx.history, TOPIC, 1, interval=SAMPLE_S)
    p = ctx.producer(enable_idempotence=True, linger_ms=0, request_timeout_ms=3000)
    [v1, v2] = ctx.values(2)
    if ctx.send(0, p, "app", TOPIC, [(0, v1)]).complete()["type"] != "ok":
        raise RuntimeError("the idempotent send failed")
    ctx.wait(lambda: (monitor.sample() or [[0, -1, 0]])[0][2] >= 1, "the idempotent record (high watermark 1)")
    ctx.nemesis("start-no-id-batch", {"producer_id": p.producer_id, "producer_epoch": p.producer_epoch})
    _, leader = ctx.leader(TOPIC)
    batch = rb.build_batch([(None, str(v2).encode(), int(time.time() * 1000))], producer_id=p.producer_id,
                           producer_epoch=p.producer_epoch, base_sequence=1, transactional=True)
    r = ctx.md.stub(leader).Produce(broker_pb2.ProduceRequest(
        acks=-1, timeout_ms=10000,
        partitions=[broker_pb2.PartitionProduceData(topic=TOPIC, partition=0, batch=batch)]), timeout=15)
    pr = r.partitions[0]
    ctx.nemesis("stop-no-id-batch", {"error": error_name(pr.error), "base_offset": pr.base_offset})
    _stand_then_fix(ctx, monitor)
    monitor.sample()
    ctx.read_all(TOPIC, isolation="read_committed")
