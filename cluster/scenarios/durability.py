"""Durability scenarios: power loss, torn writes and corrupt files on the lazy filesystem, per release.

Guarantees: every scenario here registers itself in cluster.scenarios.base.REGISTRY on import.
Each runs three brokers and one controller with the brokers' data directories on the lazy
filesystem (`ClusterSpec(disk="lazy")`, docs/lazyfs.md), one partition with three replicas and
min.insync.replicas=2, and an idempotent producer with acks=all; every record is acknowledged
(the `send` ops are ok) before the fault, which is played through
cluster.scenarios.disk_context (a nemesis info pair in the history). The final read is a
read_uncommitted poll of the whole partition from its leader.

- `power-loss-isr-default-flush`: Kafka's default flush policy (no fsync per append); the
  partition's leader and its in-sync followers lose power together (every process killed, then
  every write since the last fsync dropped), and start again; a new producer then writes more
  records than were acknowledged before, so the final read reaches past the old offsets. The
  acknowledged records were in page caches only: the checker reports them lost (lost-write) and
  their offsets given to other records (inconsistent-offsets).
- `power-loss-isr-flush-every-message`: the same with the topic's flush.messages=1 (each append
  fsynced before it is acknowledged): nothing is lost, the history is valid.
- `torn-tail-cut-and-refetched`: the leader is killed and its segment's tail torn (the end of its
  last batch never reached the disk); a follower is elected, the old leader restarts, its log
  recovery cuts the torn batch (the fact reads the broker's own log line, recorded in the history)
  and it refetches from the new leader until it is back in the ISR; then both other brokers are
  killed (processes only: their disks keep everything), so the old leader leads and serves the
  final read alone: every acknowledged record is there, the history is valid.

- `lone-isr-leader-loses-tail`: both followers stall (paused until the controller drops them from
  the ISR), so the leader is the ISR's only member; then it loses power and its unflushed tail.
  The followers come back, then the old leader. Before KIP-966 the old leader is the only replica
  the controller may elect, and the followers truncate to its shortened log: the checker reports
  the acknowledged records lost (lost-write, inconsistent-offsets). On 4.0 the followers are
  eligible leader replicas: one of them, with every acknowledged record, leads before the old
  leader is back, and the old leader, back from an unclean shutdown, is no longer eligible; the
  history is valid.

The first three do not depend on the release: every replica is in the ISR when the power goes, and
eligible leader replicas (4.0) change nothing there.
"""
from __future__ import annotations

from cluster.scenarios import disk_context
from cluster.scenarios.base import ClusterSpec, Fact, nemesis_ops, register

LAZY3 = ClusterSpec(brokers=3, controllers=1, disk="lazy")
TOPIC = "durable"
OPS, PER_OP = 5, 4               # acknowledged sends before the fault, records per send


def _isr_of(ctx, n: int = 3) -> tuple[str, list[str]]:
    """(leader, in-sync replicas) once the ISR has n members; recorded as a nemesis `leader` op."""
    ctx.leader(TOPIC, timeout=60)                    # a broker acts as leader (an election follows a
    #                                                  session expiry, slow on a loaded machine)
    st = ctx.wait(lambda: (s := ctx.partition_state(TOPIC)) is not None and len(s.isr) >= n and s.leader >= 0
                  and s, f"an ISR of {n} for {TOPIC}-0", timeout=60)
    isr = [f"broker-{b}" for b in st.isr]
    ctx.nemesis("leader", {"topic": TOPIC, "node": f"broker-{st.leader}", "leader_epoch": st.leader_epoch,
                           "isr": list(st.isr)})
    return f"broker-{st.leader}", isr


def _write_acknowledged(ctx, configs: dict | None = None):
    ctx.create_topic(TOPIC, configs={"min.insync.replicas": "2", **(configs or {})})
    p = ctx.producer(acks=-1, enable_idempotence=True, linger_ms=0, request_timeout_ms=3000,
                     retry_backoff_ms=100)
    _isr_of(ctx)
    _send(ctx, p, 0, "p", OPS)
    return p


def _send(ctx, p, process, session: str, n: int) -> None:
    for _ in range(n):
        op = ctx.send(process, p, session, TOPIC, [(0, v) for v in ctx.values(PER_OP)]).complete(timeout=90)
        if op["type"] != "ok":
            raise RuntimeError(f"a write was not acknowledged: {op.get('error')}")


def _write_past_and_read(ctx) -> None:
    """Once two replicas are in sync again, a new producer writes more records than were acknowledged
    before the fault (the application goes on: the final read reaches past the old offsets), then the
    partition is read whole."""
    _isr_of(ctx, 2)
    p = ctx.producer(acks=-1, enable_idempotence=True, linger_ms=0, request_timeout_ms=3000,
                     retry_backoff_ms=100)
    _send(ctx, p, 1, "after", OPS + 1)
    ctx.read_all(TOPIC)


def power_lost(ops: list[dict]) -> str | None:
    pl = nemesis_ops(ops, "power-loss")
    if not pl:
        return "no power-loss recorded"
    v = pl[-1]["value"]
    leaders = nemesis_ops(ops, "leader")
    isr = {f"broker-{b}" for b in (leaders[0]["value"]["isr"] if leaders else [])}
    if not isr or not isr <= set(v["nodes"]):
        return f"the power loss hit {v['nodes']}, not the whole ISR {sorted(isr)}"
    return None


def _power_loss_isr(ctx, configs: dict | None = None) -> None:
    _write_acknowledged(ctx, configs)
    leader, isr = _isr_of(ctx)
    nodes = [leader] + sorted(n for n in isr if n != leader)
    disk_context.power_loss(ctx, nodes)
    disk_context.restart(ctx, nodes)
    _write_past_and_read(ctx)


@register("power-loss-isr-default-flush", seed="Kafka's flush policy (log.flush.interval.*); Jepsen's LazyFS",
          description="acks=all, RF 3, min.insync.replicas=2, default flush policy: the leader and its ISR "
                      "lose power together; the acknowledged records were never fsynced and are lost",
          cluster=LAZY3, expected=("lost-write", "inconsistent-offsets"), facts=(Fact("the whole ISR lost power", power_lost),),
          notes="Kafka acknowledges a write once the ISR has it in memory (page cache) and relies on "
                "replication, not fsync, for durability: a correlated power loss of every replica that has "
                "the records loses them. Every release behaves so (the flush policy has not changed).")
def power_loss_default_flush(ctx) -> None:
    _power_loss_isr(ctx)


@register("power-loss-isr-flush-every-message", seed="Kafka's flush.messages topic config; Jepsen's LazyFS",
          description="the same power loss with the topic's flush.messages=1 (each append fsynced before "
                      "it is acknowledged): nothing acknowledged is lost",
          cluster=LAZY3, expected=(), facts=(Fact("the whole ISR lost power", power_lost),))
def power_loss_flush_every_message(ctx) -> None:
    _power_loss_isr(ctx, {"flush.messages": "1"})


def recovery_cut(ops: list[dict]) -> str | None:
    tears = nemesis_ops(ops, "tear")
    recs = [o["value"] for o in nemesis_ops(ops, "recovery")]
    if not tears or not recs:
        return "no tear or no recovery recorded"
    node = tears[-1]["value"]["node"]
    lines = [ln for r in recs if r["node"] == node for ln in r["cut_lines"] if f"{TOPIC}-0" in ln]
    return None if lines else f"{node}'s broker logged no cut of {TOPIC}-0 on recovery"


def old_leader_served(ops: list[dict]) -> str | None:
    tears = nemesis_ops(ops, "tear")
    leaders = [o["value"]["node"] for o in nemesis_ops(ops, "leader")]
    if not tears or not leaders:
        return "no tear or no leader recorded"
    node = tears[-1]["value"]["node"]
    return None if leaders[-1] == node else f"the last leader was {leaders[-1]}, not the torn {node}"


@register("torn-tail-cut-and-refetched", seed="Kafka's log recovery (LogLoader.recoverLog); Jepsen's LazyFS",
          description="the leader dies with its segment's last batch torn; recovery cuts it there, the broker "
                      "refetches from the new leader, and alone it then serves every acknowledged record",
          cluster=LAZY3, expected=(),
          facts=(Fact("the torn broker's recovery cut its log", recovery_cut),
                 Fact("the torn broker led the final read", old_leader_served)),
          notes="The torn tail is what a power loss in the middle of an append leaves: the recovery "
                "validates every batch from the recovery point on and cuts at the first whose frame is "
                "incomplete or whose CRC fails; what was cut is no loss while another replica still has "
                "it, since the broker truncates to the new leader's epoch and fetches it again.")
def torn_tail(ctx) -> None:
    _write_acknowledged(ctx)
    leader, isr = _isr_of(ctx)
    disk_context.tear(ctx, leader, TOPIC)
    ctx.wait(lambda: (s := ctx.partition_state(TOPIC)) is not None and s.leader >= 0
             and f"broker-{s.leader}" != leader, "a follower to be elected", timeout=60)
    _isr_of(ctx, 2)
    disk_context.restart(ctx, [leader])
    others = [n for n in isr if n != leader]
    _isr_of(ctx, 3)                                  # the torn broker refetched and is in sync again
    disk_context.record_cuts(ctx, leader)
    for n in others:                                 # processes only: their disks keep everything
        ctx.kill(n)
    ctx.wait(lambda: (s := ctx.partition_state(TOPIC)) is not None and f"broker-{s.leader}" == leader,
             f"{leader} to lead alone", timeout=60)
    _isr_of(ctx, 1)
    ctx.read_all(TOPIC)


def lone_isr_lost_power(ops: list[dict]) -> str | None:
    shrunk = nemesis_ops(ops, "isr-shrunk")
    pl = nemesis_ops(ops, "power-loss")
    if not shrunk or not pl:
        return "no ISR shrink or no power loss recorded"
    isr = [f"broker-{b}" for b in shrunk[-1]["value"]["isr"]]
    return None if pl[-1]["value"]["nodes"] == isr else f"the power loss hit {pl[-1]['value']['nodes']}, not {isr}"


@register("lone-isr-leader-loses-tail", seed="KIP-966 (Eligible Leader Replicas); Jepsen's LazyFS",
          description="acks=all, RF 3, min.insync.replicas=2: the followers stall out of the ISR, then the "
                      "lone in-sync leader loses power; before 4.0 it is elected again with its tail gone, "
                      "on 4.0 an eligible follower that kept every record leads",
          cluster=LAZY3, expected=(),
          expected_by_version={v: ("lost-write", "inconsistent-offsets") for v in ("0.11", "2.5", "3.0", "3.6")},
          facts=(Fact("the ISR's only member lost power", lone_isr_lost_power),),
          notes="KIP-966 exists for this: a replica that left the ISR only because the ISR shrank below "
                "min.insync.replicas still holds everything below the high watermark (which, from 3.9, does "
                "not move under min.insync.replicas), while the last ISR member may come back from a power "
                "loss without its unflushed tail. Before 4.0 the controller only trusts the ISR and elects "
                "that member; with eligible leader replicas it elects a follower that kept the records and "
                "drops a broker back from an unclean shutdown from every ISR and ELR.")
def lone_isr_leader_loses_tail(ctx) -> None:
    _write_acknowledged(ctx)
    leader, isr = _isr_of(ctx)
    followers = [n for n in isr if n != leader]
    for n in followers:                  # stalled, not crashed: their page caches keep every record
        ctx.pause(n)
    st = ctx.wait(lambda: (s := ctx.partition_state(TOPIC)) is not None and [f"broker-{b}" for b in s.isr] == [leader]
                  and s, f"the ISR to shrink to {leader}", timeout=60)
    ctx.nemesis("isr-shrunk", {"topic": TOPIC, "leader": f"broker-{st.leader}", "isr": list(st.isr),
                               "eligible_leader_replicas": list(st.eligible_leader_replicas)})
    disk_context.power_loss(ctx, [leader])
    for n in followers:
        ctx.resume(n)
    disk_context.restart(ctx, [leader])
    _write_past_and_read(ctx)
