"""A hanging transaction made by an unclean leader election (the KAFKA-20716 shape), found and aborted.

`hanging-unclean-election`: the follower holds a transaction's data but not its COMMIT marker, and
is elected uncleanly: on the new leader the transaction is open forever, since the coordinator has
long completed the commit and will never write the marker again.

Guarantees: two brokers, one controller, one transaction coordinator; one partition with two
replicas, min.insync.replicas=1, unclean.leader.election.enable=true. The transactional producer
writes one record (acks=all) while both replicas are in the ISR, and the scenario waits until the
follower has it (the ISR still holds both replicas after the acknowledged write). The follower is
then SIGSTOPped and the scenario waits, on the controller's partition state, until the ISR is the
leader alone (replica.lag.time.max.ms; no blind sleep), for the topic's partition and for the
__transaction_state partition of the transactional.id. The id is chosen (`k20716-N`, the first N
whose __transaction_state partition the topic's leader leads) so that the coordinator's log writes
need only the leader once the follower is out: with the follower paused, a log partition that
still waits for it would leave the transaction in PrepareCommit, find-hanging would rightly call it
not hanging, and the verdict would depend on where the controller put the log's leaders. The
producer commits and the scenario waits, on the offsets monitor's samples of the leader, until the
COMMIT marker is there (LSO = high watermark = 2), then on the coordinator until the commit is
complete (CompleteCommit, no partitions left; nemesis `transaction-state`). The leader is SIGKILLed and the follower resumed; the scenario waits until the
follower is the leader (unclean: it was not in the ISR), notes both leaders (nemesis `leader`), and
writes later records with a non-transactional producer, which move the high watermark while the LSO
stands at the transaction's record. Then it fixes it as `hanging.py`'s `_stand_then_fix` does:
waits on the samples until the LSO has stood past the hang threshold, runs `eoslab transactions
find-hanging` (its output in nemesis `start-abort-hanging`) and `abort` at the LSO (nemesis
`stop-abort-hanging`, with describe-producers and describe beside find-hanging's output; a command
that fails, such as COORDINATOR_NOT_AVAILABLE while a node still names the killed broker, is run
again as an operator would, its errors recorded under "retries"; describe is tried for 10 s only:
the id's coordinator was on the killed broker and, as in Kafka, no broker coordinates it while its
__transaction_state partition has no in-sync replica left, so "not described: <error>" can be its
record), and
waits until the LSO has caught up. Facts: the coordinator completed the commit before the
election; find-hanging named the
partition and the producer id of the committed transaction; the abort's marker moved the LSO past
the transaction's start offset; the LSO caught up; the leader changed to the out-of-sync follower.
The old leader stays dead (the run ends with one broker). Verdict on every release (0.11 to 4.0):
{hanging-transaction, lost-write}: the LSO stood at offset 0 while the high watermark moved, and the
record of a transaction the application saw committed is never read by read_committed, since the
only marker it ever gets on the surviving replica is the operator's ABORT.
"""
from __future__ import annotations

import time

from clients.admin import create_topic
from cluster.offsets_monitor import OffsetsMonitor
from cluster.scenarios.base import ClusterSpec, Fact, completions, nemesis_ops, register
from cluster.scenarios.hanging import (
    SAMPLE_S,
    THRESHOLD_S,
    _transactions,
    lso_caught_up,
)
from cluster.scenarios.replication import leader_changed, note_leader
from services.common.internal_topics import (
    DEFAULT_TRANSACTION_STATE_PARTITIONS,
    TRANSACTION_STATE_TOPIC,
    partition_for,
)

TOPIC = "hang-unclean"
TID = "k20716"
DESCRIBE_S = 10.0


def parse_table(lines: list[str]) -> list[dict[str, str]]:
    """find-hanging's table (a header line, then one row per transaction, columns split on blanks) as dicts."""
    rows = [ln.split() for ln in lines if ln.strip()]
    if not rows:
        return []
    head = rows[0]
    return [dict(zip(head, r)) for r in rows[1:]]


def _producer_id(ops: list[dict]) -> int | None:
    for o in completions(ops, "init-producer", "ok"):
        pr = o.get("producer")
        if isinstance(pr, dict) and pr.get("session") == "app":
            return pr.get("pid")
    return None


def find_hanging_named_it(ops: list[dict]) -> str | None:
    """find-hanging named partition 0 of the topic, the committed transaction's producer id, start offset 0."""
    starts = nemesis_ops(ops, "start-abort-hanging")
    if not starts:
        return "find-hanging never ran (the LSO did not stand)"
    rows = parse_table(starts[0]["value"].get("find-hanging", []))
    pid = _producer_id(ops)
    want = {"Topic": TOPIC, "Partition": "0", "StartOffset": "0"}
    hits = [r for r in rows if all(r.get(k) == v for k, v in want.items())
            and (pid is None or r.get("ProducerId") == str(pid))]
    return None if len(hits) == 1 else f"find-hanging listed {rows} (wanted {want}, producer id {pid})"


def coordinator_completed(ops: list[dict]) -> str | None:
    """Before the election the coordinator had completed the commit (CompleteCommit, no partitions left)."""
    states = nemesis_ops(ops, "transaction-state")
    kills = [o for o in ops if o.get("process") == "nemesis" and o.get("f") == "kill"]
    if not states or not kills:
        return "no transaction state or no kill recorded"
    v = states[0]["value"]
    if ops.index(states[0]) > ops.index(kills[0]):
        return "the transaction state was recorded after the kill"
    return None if v.get("state") == "CompleteCommit" and not v.get("partitions") else f"the coordinator held {v}"


def abort_moved_lso(ops: list[dict]) -> str | None:
    """After the abort, a sample shows the LSO past the transaction's start offset (0) and at the HW."""
    stops = [o for o in ops if o.get("process") == "nemesis" and o.get("f") == "stop-abort-hanging"]
    starts = [o for o in ops if o.get("process") == "nemesis" and o.get("f") == "start-abort-hanging"]
    if not starts or not stops:
        return "no abort recorded"
    before = [o["value"] for o in ops[:ops.index(starts[0])] if o.get("process") == "monitor"]
    after = [o["value"] for o in ops[ops.index(starts[-1]):] if o.get("process") == "monitor"]
    if not before or before[-1][0][1] != 0:
        return f"the LSO did not stand at 0 before the abort: {before[-1:] or 'no sample'}"
    moved = [s for s in after if s[0][1] > 0 and s[0][1] >= s[0][2]]
    return None if moved else f"no sample after the abort shows the LSO moved: {after[-3:]}"


def _offsets(monitor, cond) -> bool:
    """One sample of the partition (recorded): cond(lso, hw), False when its leader did not answer."""
    s = monitor.sample()
    return bool(s) and cond(s[0][1], s[0][2])


def _operator(ctx, retries: list[str], *args) -> str:
    """`eoslab transactions ARGS`, run again while it fails (as an operator re-runs it): a retriable error
    such as COORDINATOR_NOT_AVAILABLE, while a node still names the killed broker, is not the answer.
    Each failed attempt's error is appended to `retries` (recorded with the fix's nemesis ops)."""
    def attempt():
        try:
            return [_transactions(ctx, *args)]
        except RuntimeError as e:
            retries.append(str(e))
            return None
    [out] = ctx.wait(attempt, f"eoslab transactions {args[0]} to answer", timeout=60, every=0.5)
    return out


def _described(ctx, retries: list[str], tid: str) -> list[str]:
    """`eoslab transactions describe` of the id, or why it could not be: the id's __transaction_state
    partition was led by the killed broker and its other replica fell out of sync, so, as in Kafka, no
    broker coordinates the id any more (FindCoordinator answers COORDINATOR_NOT_AVAILABLE). Tried for
    DESCRIBE_S; the last error is the record then."""
    deadline = time.monotonic() + DESCRIBE_S
    while True:
        try:
            return _transactions(ctx, "describe", "--transactional-id", tid).splitlines()
        except RuntimeError as e:
            retries.append(str(e))
            if time.monotonic() >= deadline:
                return [f"not described: {e}"]
        time.sleep(0.5)


def _tid_logged_on(ctx, broker_id: int) -> str:
    """A transactional.id whose __transaction_state partition the given broker leads, so the
    coordinator's log writes need no other replica once the ISR has shrunk to it. Waits until every
    log partition has a leader and both replicas in its ISR (the controller assigns replicas
    round-robin, so each of the two brokers then leads some)."""
    parts = range(DEFAULT_TRANSACTION_STATE_PARTITIONS)

    def settled():
        states = [ctx.partition_state(TRANSACTION_STATE_TOPIC, n) for n in parts]
        ok = all(st is not None and st.leader >= 0 and len(st.isr) == 2 for st in states)
        return ok and {n: st.leader for n, st in zip(parts, states)}
    leaders = ctx.wait(settled, "every __transaction_state partition led, with both replicas in sync")
    for i in range(64):
        tid = f"{TID}-{i}"
        if leaders[partition_for(tid, DEFAULT_TRANSACTION_STATE_PARTITIONS)] == broker_id:
            return tid
    raise RuntimeError(f"no __transaction_state partition is led by broker {broker_id}: {leaders}")


def _stand_then_fix(ctx, monitor, tid: str) -> None:
    """hanging.py's `_stand_then_fix` on this module's topic: wait, on the monitor's samples, until the
    LSO has stood past the threshold (or stayed caught up as long); if it stood, find-hanging, then abort
    at the LSO, and wait until the LSO has caught up."""
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
    if stood:
        retries: list[str] = []
        hanging = _operator(ctx, retries, "find-hanging", "--topic", TOPIC, "--max-transaction-timeout", "0")
        producers = _operator(ctx, retries, "describe-producers", "--topic", TOPIC, "--partition", "0")
        described = _described(ctx, retries, tid)
        ctx.nemesis("start-abort-hanging", {"find-hanging": hanging.splitlines(),
                                            "describe-producers": producers.splitlines(),
                                            "describe": described, "retries": list(retries)})
        offset = monitor.sample()[0][1]
        done = _operator(ctx, retries, "abort", "--topic", TOPIC, "--partition", "0", "--start-offset", str(offset))
        ctx.wait(lambda: _offsets(monitor, lambda lso, hw: lso >= hw), "the LSO to catch up",
                 timeout=30, every=SAMPLE_S)
        ctx.nemesis("stop-abort-hanging", {"abort": done.splitlines(), "retries": retries})


@register("hanging-unclean-election", seed="KAFKA-20716 (a COMMIT marker lost to an unclean election), KIP-664",
          description="a follower with a transaction's data but not its COMMIT marker is elected uncleanly: "
                      "its LSO stands at the record forever; found and aborted with eoslab transactions",
          cluster=ClusterSpec(brokers=2, controllers=1, txn_coordinators=1),
          expected=("hanging-transaction", "lost-write"),
          facts=(Fact("the coordinator completed the commit before the election", coordinator_completed),
                 Fact("leader changed to the out-of-sync follower", leader_changed),
                 Fact("find-hanging named the partition and the producer", find_hanging_named_it),
                 Fact("the abort moved the LSO", abort_moved_lso),
                 Fact("the LSO caught up", lso_caught_up)),
          hang_threshold_s=THRESHOLD_S,
          notes="The COMMIT marker was written while the ISR was the leader alone (min.insync.replicas=1), "
                "so the coordinator completed the commit; the unclean election drops it with the old "
                "leader. The new leader rebuilds its producer state from its log: the transaction is "
                "open, and no coordinator will end it. The operator's abort writes an ABORT marker, so a "
                "transaction the application saw committed ends aborted: read_committed never returns "
                "its record (lost-write). Every release plays the same way: KIP-890's verification "
                "(3.6+) checks produce requests, and this record was appended while the transaction "
                "was ongoing; KIP-890's epoch bump (4.0) changes only the coordinator's epoch, and the "
                "new leader's producer state still holds the transaction at the old one. The "
                "transactional.id is chosen so that its __transaction_state partition is led by the "
                "topic's leader: otherwise the paused follower holds up CompleteCommit, the "
                "coordinator stays in PrepareCommit and find-hanging (rightly) calls it not hanging.")
def unclean_election(ctx) -> None:
    create_topic(ctx.md, TOPIC, 1, replication_factor=2,
                 configs={"unclean.leader.election.enable": "true", "min.insync.replicas": "1"})
    monitor = OffsetsMonitor(ctx.md, ctx.history, TOPIC, 1, interval=SAMPLE_S)
    ctx.wait(lambda: (s := ctx.partition_state(TOPIC)) is not None and len(s.isr) == 2,
             "both replicas in the ISR")
    leader = note_leader(ctx, TOPIC)
    follower = next(f"broker-{b}" for b in (1, 2) if f"broker-{b}" != leader)
    fid = int(follower.split("-")[1])

    lid = int(leader.split("-")[1])
    tid = _tid_logged_on(ctx, lid)
    p = ctx.producer(transactional_id=tid, acks=-1, linger_ms=0, request_timeout_ms=5000)
    ctx.init_producer(0, p, "app")
    [v1] = ctx.values(1)
    t = ctx.txn(0, p, "app", TOPIC, [(0, v1)])
    if not t.begin_and_send():
        raise RuntimeError("the transaction could not start")
    t.wait_sent()                          # acks=all with both in the ISR: the follower has the record
    ctx.wait(lambda: (s := ctx.partition_state(TOPIC)) is not None and fid in s.isr,
             "the follower to be in the ISR with the record")

    ctx.pause(follower)
    log_partition = partition_for(tid, DEFAULT_TRANSACTION_STATE_PARTITIONS)
    for topic, partition in ((TOPIC, 0), (TRANSACTION_STATE_TOPIC, log_partition)):
        ctx.wait(lambda t=topic, n=partition: (s := ctx.partition_state(t, n)) is not None and list(s.isr) == [lid],
                 f"the ISR of {topic}-{partition} to shrink to the leader alone", timeout=30)
    done = t.commit()
    if done["type"] != "ok":
        raise RuntimeError(f"the commit failed: {done.get('error')}")
    ctx.wait(lambda: _offsets(monitor, lambda lso, hw: lso == hw == 2),
             "the COMMIT marker on the leader (LSO = HW = 2)", every=SAMPLE_S)
    state = ctx.wait(lambda: (d := ctx.transaction_state(tid)) is not None and d.state == "CompleteCommit" and d,
                     "the coordinator to complete the commit (CompleteCommit written)")
    ctx.nemesis("transaction-state", {"transactional_id": tid, "state": state.state,
                                      "producer_id": state.producer_id, "producer_epoch": state.producer_epoch,
                                      "partitions": [f"{x.topic}-{x.partition}" for x in state.partitions]})

    ctx.kill(leader)
    ctx.resume(follower)
    ctx.wait(lambda: (s := ctx.partition_state(TOPIC)) is not None and s.leader == fid,
             "the out-of-sync follower to be elected (unclean)", timeout=60)
    ctx.leader(TOPIC)
    note_leader(ctx, TOPIC)
    later = ctx.producer(acks=-1, enable_idempotence=False, linger_ms=0, request_timeout_ms=5000)
    for v in ctx.values(2):
        if ctx.send(1, later, "later", TOPIC, [(0, v)]).complete()["type"] != "ok":
            raise RuntimeError("a later write failed")
    ctx.wait(lambda: _offsets(monitor, lambda lso, hw: hw >= 3),
             "the later writes to move the high watermark", every=SAMPLE_S)

    _stand_then_fix(ctx, monitor, tid)
    monitor.sample()
    ctx.read_all(TOPIC, isolation="read_committed")
