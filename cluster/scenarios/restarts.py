"""A producer that restarts and resends, with and without a transactional.id (the source articles
*Build Kafka* scene 08, *Idempotent producers and sequence numbers*, *Apache Kafka idempotent producer* and
*What happens when a relection happens* §7).

Guarantees: both scenarios play one schedule: the first producer runs in its
own process (cluster.scenarios.worker) and sends record v; the leader appends
it and drops the answer; the scenario waits for that, then takes the first
producer out (SIGKILL without a transactional.id, SIGSTOP with one, so it
lives on as a zombie); a new producer — the restarted application — resends
v, because it never saw it acknowledged. Without a transactional.id the new
producer has a new PID and the broker cannot tell the resend from a new
record. With one, init_transactions fences the old epoch and aborts the open
transaction that holds the first copy; the zombie, resumed, is refused. The
facts ("new PID", "zombie fenced", "same PID, higher epoch") are read from
the recorded ops' `producer` fields and errors.
"""
from __future__ import annotations

from cluster.scenarios.base import ClusterSpec, Fact, completions, register, session_of

TOPIC = "restart"
TID = "payments-producer-shard-7"      # the transactional.id of *Idempotent producers and sequence numbers*
FENCED = ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")
# Before KIP-890 part 1 (3.6) a KIP-360 client (2.5+) learns of the fence from its produce request's
# INVALID_PRODUCER_EPOCH, which it treats as abortable: its commit ends as TRANSACTION_ABORTABLE and only
# an abort would reach the coordinator's PRODUCER_FENCED. Either way the zombie is refused.
ABORTABLE = ("TRANSACTION_ABORTABLE",)


def _pids(ops: list[dict], session: str) -> set:
    return {o["producer"]["pid"] for o in completions(ops) if session_of(o) == session
            and o["producer"].get("pid", -1) >= 0}


def new_pid(ops: list[dict]) -> str | None:
    a, b = _pids(ops, "app-1"), _pids(ops, "app-2")
    if not a or not b:
        return f"producer ids not recorded (first {sorted(a)}, restarted {sorted(b)})"
    return None if not a & b else f"the restarted producer reused PID {sorted(a & b)}"


def _init(ops: list[dict], session: str) -> dict | None:
    for o in completions(ops, "init-producer", "ok"):
        if session_of(o) == session:
            return o
    return None


def same_pid_higher_epoch(ops: list[dict]) -> str | None:
    a, b = _init(ops, "app-1"), _init(ops, "app-2")
    if a is None or b is None:
        return "an init-producer op is missing"
    pa, pb = a["producer"], b["producer"]
    if pa["pid"] != pb["pid"] or pb["epoch"] <= pa["epoch"]:
        return f"first (pid {pa['pid']}, epoch {pa['epoch']}), restarted (pid {pb['pid']}, epoch {pb['epoch']})"
    return None


def zombie_fenced(ops: list[dict]) -> str | None:
    fence = _init(ops, "app-2")
    if fence is None:
        return "the restarted producer never initialised"
    late = [o for o in completions(ops) if session_of(o) == "app-1" and o["index"] > fence["index"]
            and o["f"] in ("send", "txn")]
    if not late:
        return "the zombie did nothing after the fence"
    bad = [(o["index"], o["type"], o.get("error")) for o in late
           if not ((o["type"] == "fail" and o.get("error") in FENCED) or
                   (o["type"] in ("fail", "info") and o.get("error") in ABORTABLE))]
    return None if not bad else f"zombie ops not refused as fenced: {bad}"


@register("restart-without-transactional-id", seed="003 (zombie fencing), 004 (What if my producer fails?), 002",
          description="the producer is SIGKILLed after the leader appended v but lost the ACK; the restarted "
                      "producer (new PID) resends v: written twice",
          cluster=ClusterSpec(brokers=1, controllers=1), expected=("duplicate",),
          facts=(Fact("new PID after the restart", new_pid),))
def restart_without_tid(ctx) -> None:
    ctx.create_topic(TOPIC)
    first = ctx.worker(enable_idempotence=True, linger_ms=0, request_timeout_ms=30000)
    [v] = ctx.values(1)
    address = ctx.drop_acks(TOPIC)
    op = ctx.send(0, first, "app-1", TOPIC, [(0, v)])
    ctx.wait_acks_dropped(address, 1)
    first.state()                           # its PID, for the history
    first.kill()
    ctx.nemesis("kill-producer", {"session": "app-1", "pid": first.producer_id})
    op.abandon("producer process killed")
    second = ctx.producer(enable_idempotence=True, linger_ms=0)
    ctx.send(1, second, "app-2", TOPIC, [(0, v)]).complete()
    ctx.read_all(TOPIC)


@register("restart-with-transactional-id", seed="003 (producer-id epoch and zombie fencing), 002, 000 §7",
          description="the same schedule with a transactional.id; the old producer is SIGSTOPped instead: the "
                      "restart fences it and aborts its copy; resumed, the zombie is refused",
          cluster=ClusterSpec(brokers=1, controllers=1, txn_coordinators=1), expected=(),
          facts=(Fact("zombie fenced", zombie_fenced), Fact("same PID, higher epoch", same_pid_higher_epoch)))
def restart_with_tid(ctx) -> None:
    ctx.create_topic(TOPIC)
    first = ctx.worker(transactional_id=TID, linger_ms=0, request_timeout_ms=3000)
    ctx.init_producer(0, first, "app-1")
    [v, w] = ctx.values(2)
    txn = ctx.txn(0, first, "app-1", TOPIC, [(0, v)])
    address = ctx.drop_acks(TOPIC)
    txn.begin_and_send()
    ctx.wait_acks_dropped(address, 1)
    first.pause()
    ctx.nemesis("start-pause-producer", {"session": "app-1", "pid": first.producer_id})
    second = ctx.producer(transactional_id=TID, linger_ms=0)
    ctx.init_producer(1, second, "app-2")
    resend = ctx.txn(1, second, "app-2", TOPIC, [(0, v)])
    if resend.begin_and_send():
        resend.commit()
    first.resume()
    ctx.nemesis("stop-pause-producer", {"session": "app-1"})
    txn.commit()                              # the zombie goes on where it stopped
    late = ctx.txn(0, first, "app-1", TOPIC, [(0, w)])
    if late.begin_and_send():
        late.commit()
    ctx.read_all(TOPIC, isolation="read_committed")
