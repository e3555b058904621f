"""Coordinator crash scenarios: a transaction coordinator lost between the steps of a commit.

`coordinator-lost-after-prepare-commit`: a transactional producer writes one record to each of two
partitions and commits; the coordinator owning its transactional.id writes PrepareCommit to
__transaction_state (acks=all) and crashes before any marker (the crash_after_prepare fault of
services/txn_coordinator/faults.py, an os._exit). Kafka's answer (TransactionStateManager.
loadTransactionsForTxnTopicPartition, then the marker channel): the coordinator that takes the
partition over replays the log, finds the transaction in PrepareCommit and completes it — markers
on both partitions, CompleteCommit — so the LSO moves past the records and a read_committed
reader reads each exactly once. `coordinator-lost-after-prepare-abort`: the same with the
application's abort: PrepareAbort, crash, CompleteAbort on the next owner, nothing visible.

Guarantees: every scenario here registers itself in cluster.scenarios.base.REGISTRY on import.
One broker, one controller, two transaction coordinators (ZooKeeper session 2 s: the survivor is
given the dead one's partitions once its session expires); the fault is armed only once their
start-up rebalance of __transaction_state is over, so the id moves because of the crash alone. The offsets monitor samples both
partitions' LSO and high watermark throughout (process "monitor"); the fault is in force from its
injection (`start-coordinator-crash`) to the crash (`stop-coordinator-crash`), so the takeover
itself counts against the hang threshold (THRESHOLD_S, far below Kafka's 900 s default, far above
a takeover): a transaction nobody completed would be the checker's `hanging-transaction`. The
producer's commit (abort) keeps retrying EndTxn against whoever owns the id; as in Kafka it
returns once the new owner answers the retry (NONE, the transaction being complete), or raises
after its 30 s — recorded `ok` or `info` (indefinite), never `fail`. Expected verdict: valid on
every release, with the facts below, read from the recorded ops.
"""
from __future__ import annotations

import threading

from cluster.offsets_monitor import OffsetsMonitor
from cluster.scenarios import coordinator_faults as cf
from cluster.scenarios.base import ClusterSpec, Fact, register
from cluster.scenarios.context import ScenarioError

TOPIC = "crash"
PARTITIONS = 2
THRESHOLD_S = 10.0
SAMPLE_S = 0.2
CLUSTER = ClusterSpec(brokers=1, controllers=1, txn_coordinators=2)


def _lost_after_prepare(ctx, tid: str, commit: bool) -> None:
    prepared, done = ("PrepareCommit", "CompleteCommit") if commit else ("PrepareAbort", "CompleteAbort")
    ctx.create_topic(TOPIC, PARTITIONS)
    cf.wait_assignment_settled(ctx)                 # the start-up rebalance is over: only the crash moves the id
    monitor = OffsetsMonitor(ctx.md, ctx.history, TOPIC, PARTITIONS, interval=SAMPLE_S)
    p = ctx.producer(transactional_id=tid, linger_ms=0, request_timeout_ms=3000)
    ctx.init_producer(0, p, "app")
    t = ctx.txn(0, p, "app", TOPIC, [(k, v) for k, v in zip(range(PARTITIONS), ctx.values(PARTITIONS))])
    if not t.begin_and_send():
        raise ScenarioError("the transaction could not start")
    t.wait_sent()
    monitor.start()
    try:
        crashed, node = cf.arm_crash(ctx, tid, prepare_abort=not commit)
        ender = threading.Thread(target=t.commit if commit else t.abort, name="end-txn", daemon=True)
        ender.start()                               # blocks while the coordinator is lost, retrying EndTxn
        cf.wait_crashed(ctx, node, tid, prepared)
        cf.wait_completed(ctx, tid, crashed, done)
        ender.join(60)
        if ender.is_alive():
            raise ScenarioError(f"the application's {'commit' if commit else 'abort'} never returned")
        if not monitor.settle(30):
            raise ScenarioError(f"the LSO of {TOPIC} did not reach the high watermark in 30 s")
    finally:
        monitor.stop()
    monitor.sample()
    ctx.read_all(TOPIC, PARTITIONS, isolation="read_committed")


NOTES = ("The coordinator dies at the worst moment of Kafka's two-phase commit: the decision is durable "
         "(Prepare* acknowledged by the log's ISR) but no partition holds a marker, so both partitions' "
         "LSO stands at the transaction's first record. No timeout can abort a transaction past "
         "PrepareCommit: only the log's next owner can end it, by loading the Prepare* record and "
         "writing the markers itself. The checker's hanging-transaction (threshold 10 s after the crash) "
         "would report a transaction nobody finished.")

register("coordinator-lost-after-prepare-commit",
         seed="002 (transaction coordinator: PrepareCommit, markers, CompleteCommit); Kafka's "
              "TransactionStateManager.loadTransactionsForTxnTopicPartition",
         description="the coordinator crashes once PrepareCommit is written, before any marker; the "
                     "coordinator that takes over loads it and commits: LSO advances, records read exactly once",
         cluster=CLUSTER, expected=(),
         facts=(Fact("the coordinator crashed after PrepareCommit", cf.crashed_after("PrepareCommit")),
                Fact("CompleteCommit on the new coordinator", cf.completed_elsewhere("CompleteCommit")),
                Fact("the LSO of both partitions passed the records", cf.lso_passed(PARTITIONS)),
                Fact("read_committed reads each record exactly once", cf.read_exactly_once),
                Fact("the commit was not refused", cf.commit_not_refused)),
         hang_threshold_s=THRESHOLD_S, notes=NOTES)(lambda ctx: _lost_after_prepare(ctx, "lost-commit", True))

register("coordinator-lost-after-prepare-abort",
         seed="002 (transaction coordinator: PrepareAbort, markers, CompleteAbort); Kafka's "
              "TransactionStateManager.loadTransactionsForTxnTopicPartition",
         description="the coordinator crashes once the application's PrepareAbort is written, before any "
                     "marker; the coordinator that takes over aborts it: LSO advances, nothing visible",
         cluster=CLUSTER, expected=(),
         facts=(Fact("the coordinator crashed after PrepareAbort", cf.crashed_after("PrepareAbort")),
                Fact("CompleteAbort on the new coordinator", cf.completed_elsewhere("CompleteAbort")),
                Fact("the LSO of both partitions passed the records", cf.lso_passed(PARTITIONS)),
                Fact("read_committed reads none of the records", cf.read_none)),
         hang_threshold_s=THRESHOLD_S, notes=NOTES)(lambda ctx: _lost_after_prepare(ctx, "lost-abort", False))
