"""Transactions: an expired transactional.id (*Idempotent producers and sequence numbers*), a delayed EndTxn
(KAFKA-17754, KIP-890) and a transaction timeout that fences a live, slow producer.

Guarantees: one broker, one controller, one transaction coordinator (its
__transaction_state has one replica). Every init_transactions is an
`init-producer` op carrying the (pid, epoch) it got; every transaction a
`txn` op (ok = committed, fail = aborted by the application or refused with
a definite error); final reads are read_committed polls, taken once the
partition is stable (LSO = high watermark). The id expiry is waited for on
the coordinator's own state (DescribeTransactions no longer lists the id),
not by sleeping. The delayed EndTxn is a copy of transaction 1's
EndTxn(commit), held back by the scenario and delivered to the coordinator
while transaction 2 is open (nemesis `start-/stop-delay-end-txn`).
"""
from __future__ import annotations

from eoslab.common.errors import name as error_name
from cluster.scenarios.base import ClusterSpec, Fact, completions, register, session_of
from eoslab.v1 import txn_pb2

TOPIC = "txn"


def _inits(ops: list[dict]) -> dict[str, dict]:
    return {session_of(o): o["producer"] for o in completions(ops, "init-producer", "ok")}


def new_pid_epoch_0(ops: list[dict]) -> str | None:
    i = _inits(ops)
    a, b = i.get("run-1"), i.get("run-2")
    if a is None or b is None:
        return "an init-producer op is missing"
    if b["pid"] == a["pid"] or b["epoch"] != 0:
        return f"before expiry (pid {a['pid']}, epoch {a['epoch']}), after (pid {b['pid']}, epoch {b['epoch']})"
    return None


@register("transactional-id-expired", seed="003 (the PaisaBridge PID-eviction gotcha)",
          description="a transactional.id idle past transactional.id.expiration.ms is forgotten; resumed, "
                      "init_transactions returns a new PID at epoch 0 (checked from the init-producer ops)",
          cluster=ClusterSpec(brokers=1, controllers=1, txn_coordinators=1,
                              txn_coordinator_args=("--transactional-id-expiration-ms=1000",
                                                    "--transaction-check-interval-ms=200")),
          expected=(), facts=(Fact("new PID at epoch 0", new_pid_epoch_0),),
          notes="The checker has no anomaly for this: nothing is lost or duplicated, but an application "
                "that keys its own dedup state on the PID sees it change. The fact is read from the "
                "init-producer ops' producer fields.")
def transactional_id_expired(ctx) -> None:
    tid = "batch-reconciliation"
    ctx.create_topic(TOPIC)
    first = ctx.producer(transactional_id=tid, linger_ms=0)
    ctx.init_producer(0, first, "run-1")
    t = ctx.txn(0, first, "run-1", TOPIC, [(0, v) for v in ctx.values(2)])
    if t.begin_and_send():
        t.commit()
    first.close()
    ctx.nemesis("start-idle", {"transactional_id": tid})
    ctx.wait(lambda: ctx.transaction_state(tid) is None, f"the coordinator to expire {tid!r}", timeout=30,
             every=0.2)
    ctx.nemesis("stop-idle", {"transactional_id": tid, "expired": True})
    second = ctx.producer(transactional_id=tid, linger_ms=0)
    ctx.init_producer(1, second, "run-2")
    t = ctx.txn(1, second, "run-2", TOPIC, [(0, v) for v in ctx.values(2)])
    if t.begin_and_send():
        t.commit()
    ctx.read_all(TOPIC, isolation="read_committed")


def delayed_end_txn(ctx) -> None:
    tid = "k17754"
    ctx.create_topic(TOPIC)
    p = ctx.producer(transactional_id=tid, linger_ms=0, request_timeout_ms=3000)
    ctx.init_producer(0, p, "app")
    [v1, v2] = ctx.values(2)
    t1 = ctx.txn(0, p, "app", TOPIC, [(0, v1)])
    if not t1.begin_and_send():
        raise RuntimeError("transaction 1 could not start")
    t1.wait_sent()
    held = txn_pb2.EndTxnRequest(transactional_id=tid, producer_id=p.producer_id,
                                 producer_epoch=p.producer_epoch, committed=True)
    ctx.nemesis("start-delay-end-txn", {"transactional_id": tid, "producer_id": held.producer_id,
                                        "producer_epoch": held.producer_epoch, "committed": True})
    t1.commit()                                   # the copy that went through
    t2 = ctx.txn(0, p, "app", TOPIC, [(0, v2)])
    if not t2.begin_and_send():
        raise RuntimeError("transaction 2 could not start")
    t2.wait_sent()
    r = ctx.coordinator(tid).EndTxn(held, timeout=10)   # the delayed copy arrives now
    ctx.nemesis("stop-delay-end-txn", {"transactional_id": tid, "answer": error_name(r.error)})
    ctx.wait(lambda: (s := ctx.transaction_state(tid)) is not None and s.state != "PrepareCommit",
             "the coordinator to finish what the delayed EndTxn started")
    t2.abort()                                    # the application aborts transaction 2
    ctx.read_all(TOPIC, isolation="read_committed")


register("delayed-end-txn", seed="KAFKA-17754 (delayed EndTxn); 002 (transaction coordinator)",
         description="before 4.0 (KIP-890 part 2): transaction 1's delayed EndTxn(commit) commits transaction 2, "
                     "which the application then aborts: a read_committed reader sees an aborted record (G1a)",
         cluster=ClusterSpec(brokers=1, controllers=1, txn_coordinators=1), expected=("G1a",),
         expected_by_version={"4.0": ()})(delayed_end_txn)

register("delayed-end-txn-kip890", seed="KIP-890 parts 1 and 2; KAFKA-17754",
         description="the same schedule with KIP-890 (epoch bump per transaction, partition verification): "
                     "the delayed EndTxn carries an old epoch and is fenced: nothing aborted is read",
         cluster=ClusterSpec(brokers=1, controllers=1, txn_coordinators=1, broker_args=("--transaction-verification",),
                             txn_coordinator_args=("--epoch-bump-per-transaction",)),
         expected=())(delayed_end_txn)


def commit_refused(ops: list[dict], who: str, errors) -> str | None:
    """None when the last transaction's commit failed with one of `errors` (it had been aborted under it)."""
    txns = completions(ops, "txn")
    if not txns:
        return f"{who}'s transaction has no completion"
    t = txns[-1]
    if t["type"] == "ok":
        return f"{who} committed after the coordinator had aborted its transaction"
    return None if t.get("error") in errors else \
        f"{who}'s commit failed with {t.get('error')!r}, not with a fencing error"


def slow_commit_refused(ops: list[dict]) -> str | None:
    return commit_refused(ops, "the slow producer", ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH", "INVALID_TXN_STATE"))


def aborted_on_timeout(ops: list[dict]) -> str | None:
    stops = [o for o in ops if o.get("process") == "nemesis" and o.get("f") == "stop-slow-producer"
             and isinstance(o.get("value"), dict)]
    if not stops:
        return "no stop-slow-producer op"
    v = stops[-1]["value"]
    if v.get("state") != "CompleteAbort" or not v.get("epoch", -1) > v.get("epoch_before", 0):
        return f"the coordinator's state after the timeout: {v}"
    return None


@register("txn-timeout-fences-slow-producer", seed="KIP-98 (transaction.timeout.ms); KIP-664",
          description="a live producer that outlasts transaction.timeout.ms is aborted by its coordinator "
                      "(epoch bumped) and fenced when it finally commits: its record is never visible",
          cluster=ClusterSpec(brokers=1, controllers=1, txn_coordinators=1,
                              txn_coordinator_args=("--transaction-check-interval-ms=200",)),
          expected=(), facts=(Fact("the coordinator aborted it on its timeout", aborted_on_timeout),
                              Fact("the slow producer's commit was refused", slow_commit_refused)),
          notes="The slow producer is live (not crashed, not cut off): a GC pause, a slow downstream call. "
                "Kafka's coordinator aborts its transaction once transaction.timeout.ms has passed and "
                "bumps the epoch, so the LSO never waits for it longer than the timeout plus the abort "
                "interval, and the late commit is refused with a fencing error.")
def slow_producer(ctx) -> None:
    tid = "slow-batch"
    ctx.create_topic(TOPIC)
    p = ctx.producer(transactional_id=tid, linger_ms=0, transaction_timeout_ms=1000)
    ctx.init_producer(0, p, "app")
    t = ctx.txn(0, p, "app", TOPIC, [(0, v) for v in ctx.values(1)])
    if not t.begin_and_send():
        raise RuntimeError("the transaction could not start")
    t.wait_sent()
    before = ctx.transaction_state(tid)
    ctx.nemesis("start-slow-producer", {"transactional_id": tid, "epoch": before.producer_epoch,
                                        "transaction_timeout_ms": 1000})
    after = ctx.wait(lambda: (s := ctx.transaction_state(tid)) is not None and s.state == "CompleteAbort" and s,
                     "the coordinator to abort the timed-out transaction", timeout=30, every=0.1)
    ctx.nemesis("stop-slow-producer", {"transactional_id": tid, "state": after.state, "reason": "timeout",
                                       "epoch_before": before.producer_epoch, "epoch": after.producer_epoch})
    t.commit()                                    # the producer wakes up and commits
    ctx.read_all(TOPIC, isolation="read_committed")
