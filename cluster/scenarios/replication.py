"""Replication under a dead leader: acks, min.insync.replicas, unclean election, re-election (the source articles *What happens when a
relection happens and how is idempotency still preserved?* and *Idempotent producers and sequence numbers*).

Guarantees: three brokers, one partition with three replicas. The two
`isr-*` scenarios play one schedule and differ only in settings: both
followers are SIGSTOPped until the controller has shrunk the ISR to the
leader alone (a condition on the controller's partition state, not a sleep),
a record is sent, the leader is SIGKILLed, the followers resumed. With
acks=1 and unclean election the leader alone acknowledged the record and an
out-of-sync follower takes over without it; with acks=all and
min.insync.replicas=2 (unclean election off, Kafka's default) the leader
refuses the record (NOT_ENOUGH_REPLICAS) until the old leader is back and the
ISR has grown again. `leader-reelection-mid-write` is the walk-through of *What happens when a relection
happens and how is idempotency still preserved?*.
Leader changes are recorded as nemesis `leader` ops (node, leader epoch) so
the facts can be read from the history.
"""
from __future__ import annotations

from cluster.scenarios import record
from cluster.scenarios.base import ClusterSpec, Fact, completions, nemesis_ops, register

THREE = ClusterSpec(brokers=3, controllers=1)


def note_leader(ctx, topic: str) -> str:
    node, _ = ctx.leader(topic)
    st = ctx.partition_state(topic)
    ctx.nemesis("leader", {"topic": topic, "node": node, "leader_epoch": st.leader_epoch if st else None,
                           "isr": list(st.isr) if st else None})
    return node


def _isolate_leader(ctx, topic: str) -> tuple[str, list[str]]:
    """Pause both followers until the ISR is the leader alone; returns (leader, followers)."""
    leader = note_leader(ctx, topic)
    lid = int(leader.split("-")[1])
    followers = [f"broker-{b}" for b in (1, 2, 3) if f"broker-{b}" != leader]
    for f in followers:
        ctx.pause(f)
    ctx.wait(lambda: (s := ctx.partition_state(topic)) is not None and list(s.isr) == [lid],
             "the ISR to shrink to the leader alone", timeout=30)
    return leader, followers


def leader_changed(ops: list[dict]) -> str | None:
    ls = [o["value"] for o in nemesis_ops(ops, "leader")]
    if len(ls) < 2:
        return "fewer than two leaders recorded"
    a, b = ls[0], ls[-1]
    if a["node"] == b["node"] or not (b["leader_epoch"] or 0) > (a["leader_epoch"] or 0):
        return f"leader {a['node']} (epoch {a['leader_epoch']}) then {b['node']} (epoch {b['leader_epoch']})"
    return None


def acked_after_kill(ops: list[dict]) -> str | None:
    kills = [o["index"] for o in nemesis_ops(ops, "kill")]
    late = [o for o in completions(ops, "send") if o["process"] == 1]
    if not kills or not late:
        return "no kill or no write during the fault recorded"
    o = late[0]
    if o["type"] != "ok":
        return f"the write completed {o['type']} ({o.get('error')})"
    return None if o["index"] > kills[0] else "the write was acknowledged before the leader died"


@register("isr-acks1-unclean-election", seed="003 (what the producer config does: acks), 000 §4",
          description="acks=1, both followers cut off, the leader acknowledges alone and is killed; an "
                      "out-of-sync follower is elected (unclean): the acknowledged record is lost",
          cluster=THREE, expected=("lost-write", "inconsistent-offsets"),
          facts=(Fact("leader changed", leader_changed),),
          notes="The new leader gives the lost record's offset to the next record, so the checker also sees "
                "two values at one offset (inconsistent-offsets), as Jepsen does after an unclean election.")
def isr_acks1_unclean(ctx) -> None:
    topic = "unclean"
    ctx.create_topic(topic, configs={"unclean.leader.election.enable": "true"})
    safe = ctx.producer(acks=-1, enable_idempotence=True, linger_ms=0)
    ctx.send(0, safe, "safe", topic, [(0, v) for v in ctx.values(1)]).complete()
    fast = ctx.producer(acks=1, enable_idempotence=False, linger_ms=0)
    leader, followers = _isolate_leader(ctx, topic)
    ctx.send(1, fast, "fast", topic, [(0, v) for v in ctx.values(1)]).complete()   # the leader alone has it
    ctx.kill(leader)
    for f in followers:
        ctx.resume(f)
    ctx.wait(lambda: (s := ctx.partition_state(topic)) is not None and f"broker-{s.leader}" in followers,
             "an out-of-sync follower to be elected")
    note_leader(ctx, topic)
    ctx.send(0, safe, "safe", topic, [(0, v) for v in ctx.values(2)]).complete()
    ctx.read_all(topic)


@register("isr-acks-all-min-insync-2", seed="003 (acks=all is the load-bearing default), 001 §1",
          description="the same schedule with acks=all, min.insync.replicas=2, unclean election off: the "
                      "leader refuses the record until the ISR has two members again: nothing lost",
          cluster=THREE, expected=(),
          facts=(Fact("the write was acknowledged only after the leader died", acked_after_kill),))
def isr_acks_all(ctx) -> None:
    topic = "durable"
    ctx.create_topic(topic, configs={"min.insync.replicas": "2"})
    p = ctx.producer(acks=-1, enable_idempotence=True, linger_ms=0, request_timeout_ms=3000, retry_backoff_ms=100)
    ctx.send(0, p, "p", topic, [(0, v) for v in ctx.values(1)]).complete()
    leader, followers = _isolate_leader(ctx, topic)
    retries = p.metrics()["retries"]
    op = ctx.send(1, p, "p", topic, [(0, v) for v in ctx.values(1)])
    ctx.wait(lambda: p.metrics()["retries"] > retries, "the leader to refuse the write (NOT_ENOUGH_REPLICAS)")
    ctx.kill(leader)
    for f in followers:
        ctx.resume(f)
    # before 4.0 the partition is offline (no live ISR member); on 4.0 (KIP-966) a follower that left the
    # ISR below min.insync.replicas is an eligible leader and leads as soon as it is back
    ctx.wait(lambda: (s := ctx.partition_state(topic)) is not None and f"broker-{s.leader}" != leader,
             "the controller to see the leader gone")
    ctx.start(leader)                  # unclean election off: before 4.0 only the last ISR member may lead again
    op.complete(timeout=90)
    note_leader(ctx, topic)
    ctx.send(0, p, "p", topic, [(0, v) for v in ctx.values(2)]).complete()
    ctx.read_all(topic)


@register("leader-reelection-mid-write", seed="000 (§6, §9: EOS through leader failover)",
          description="batch 100-109 appended and replicated, its ACK lost, the leader SIGKILLed; the "
                      "retry reaches the new leader, which knows the batch from its producer state",
          cluster=THREE, expected=(),
          facts=(Fact("leader changed with a higher leader epoch", leader_changed),))
def leader_reelection(ctx) -> None:
    topic = "seed000"
    ctx.create_topic(topic, configs={"min.insync.replicas": "2"})
    p = ctx.producer(acks=-1, enable_idempotence=True, linger_ms=5000, batch_size=record.batch_bytes(10),
                     request_timeout_ms=1500,
                     retry_backoff_ms=50)
    ctx.send(0, p, "p", topic, [(0, v) for v in ctx.values(100)]).complete()
    old = note_leader(ctx, topic)
    address = ctx.drop_acks(topic)
    op = ctx.send(0, p, "p", topic, [(0, v) for v in ctx.values(10)])          # records 100-109
    ctx.wait_acks_dropped(address, 1)   # acks=all: appended and replicated to the ISR before the answer
    ctx.kill(old)
    op.complete(timeout=60)
    note_leader(ctx, topic)
    ctx.send(0, p, "p", topic, [(0, v) for v in ctx.values(10)]).complete()   # records 110-119
    ctx.read_all(topic)
