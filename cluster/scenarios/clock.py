"""Clock scenarios: a wall clock that jumps on the service whose rule reads it.

Guarantees: every scenario here registers itself in cluster.scenarios.base.REGISTRY on import.

`clock-jump-fences-live-producer`: one broker, one controller, one transaction coordinator, the
services started with libfaketime preloaded (`ClusterSpec(faketime=True)`, docs/clock-faults.md),
the coordinator's timeout check every 200 ms. A live producer (transaction.timeout.ms 20 s) opens a
transaction and sends one record; then the coordinator's wall clock jumps 120 s forward (nemesis
`start-clock-jump`, recorded as the clock-jump package records it: `{"node", "offset_s"}`). To the
coordinator the transaction is now older than its timeout: it bumps the epoch and aborts it
(waited for on the coordinator's own state; recorded as nemesis `coordinator-abort` with the
states and epochs before and after). The producer, which never stopped, then commits and is
fenced; the clock is set back (`stop-clock-jump`) and the final read_committed poll runs once
the partition is stable. Expected: valid (nothing of the aborted transaction is visible), with
facts that the coordinator aborted on the timeout with a higher epoch and that the commit was
refused with a fencing error. The monotonic clock is not moved, so no ZooKeeper session, ISR or
request timeout is touched by the jump.
"""
from __future__ import annotations

from cluster import faketime
from cluster.scenarios.base import ClusterSpec, Fact, nemesis_ops, register
from cluster.scenarios.transactions import commit_refused

TOPIC = "clock"
TIMEOUT_MS = 20000               # transaction.timeout.ms: a transaction of milliseconds never reaches it
JUMP_S = 120                     # the coordinator's wall clock jumps this far forward
FENCING = ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH", "INVALID_TXN_STATE")


def aborted_on_timeout(ops: list[dict]) -> str | None:
    aborts = [o["value"] for o in nemesis_ops(ops, "coordinator-abort")]
    if not aborts:
        return "no coordinator-abort recorded"
    v = aborts[-1]
    if v.get("state") != "CompleteAbort" or not v.get("epoch", -1) > v.get("epoch_before", 0):
        return f"the coordinator's state after the jump: {v}"
    jumps = nemesis_ops(ops, "start-clock-jump")
    if not jumps or jumps[0]["index"] > nemesis_ops(ops, "coordinator-abort")[-1]["index"]:
        return "the abort was not preceded by the clock jump"
    return None


def producer_fenced(ops: list[dict]) -> str | None:
    return commit_refused(ops, "the producer", FENCING)


@register("clock-jump-fences-live-producer", seed="KIP-98 (transaction.timeout.ms on the coordinator's wall clock)",
          description="the coordinator's wall clock jumps past transaction.timeout.ms while a live producer's "
                      "transaction is open: it is aborted (epoch bumped), the producer fenced at commit",
          cluster=ClusterSpec(brokers=1, controllers=1, txn_coordinators=1, faketime=True,
                              txn_coordinator_args=("--transaction-check-interval-ms=200",)),
          expected=(), facts=(Fact("the coordinator aborted it on its timeout", aborted_on_timeout),
                              Fact("the producer was fenced", producer_fenced)),
          notes="Kafka's coordinator compares the transaction's start timestamp with its own wall clock "
                "(TransactionStateManager.timedOutTransactions), so a forward jump of the coordinator's "
                "clock ages every open transaction by the jump. Nothing is lost or made visible: the "
                "producer is fenced, as by a zombie's successor, but by its own transaction's timeout; the "
                "checker's say-why names the clock jump.")
def clock_jump(ctx) -> None:
    tid = "clock-batch"
    ctx.create_topic(TOPIC)
    p = ctx.producer(transactional_id=tid, linger_ms=0, transaction_timeout_ms=TIMEOUT_MS)
    ctx.init_producer(0, p, "app")
    t = ctx.txn(0, p, "app", TOPIC, [(0, v) for v in ctx.values(1)])
    if not t.begin_and_send():
        raise RuntimeError("the transaction could not start")
    t.wait_sent()
    before = ctx.transaction_state(tid)
    [node] = [n.name for n in ctx.rt.info().by_role("txn-coordinator")]
    faketime.set_offset(ctx.rt, node, JUMP_S)
    ctx.nemesis("start-clock-jump", None, {"node": node, "offset_s": JUMP_S})
    after = ctx.wait(lambda: (s := ctx.transaction_state(tid)) is not None and s.state == "CompleteAbort" and s,
                     "the coordinator to abort the transaction its clock jump timed out", timeout=30, every=0.1)
    ctx.nemesis("coordinator-abort", None, {"transactional_id": tid, "node": node, "reason": "timeout",
                                             "state": after.state, "epoch_before": before.producer_epoch,
                                             "epoch": after.producer_epoch})
    t.commit()                                    # the live producer's next call
    faketime.set_offset(ctx.rt, node, 0)
    ctx.nemesis("stop-clock-jump", None, {"node": node, "offset_s": JUMP_S, "restored_s": 0})
    ctx.read_all(TOPIC, isolation="read_committed")
