"""Lost ACKs against the idempotent producer's in-flight window (*Kafka Idempotence*, figures 3 and 5).

Guarantees: one broker; one partition; batches of exactly ten records, each
batch one `send` op (its own process, since they are in flight together);
the leader appends the first `lost` requests and drops their answers
(DropProduceResponses), which the scenario waits for before collecting the
acknowledgements, so the schedule does not depend on timing. The broker
answers a retried batch older than its 5-batch cache with
OUT_OF_ORDER_SEQUENCE_NUMBER (what current Kafka answers and *Kafka Idempotence*
describes), and the producer reacts as that article's does: it bumps its epoch
and resends (or, in `lost-ack-6-in-flight-fatal`, fails as KIP-98 shipped).
Facts about epochs are read from the `producer` field of the ok sends.
"""
from __future__ import annotations

from cluster.scenarios import record
from cluster.scenarios.base import ClusterSpec, Fact, completions, register

TOPIC = "window"
PER_BATCH = 10
# The article's broker on every Kafka version: five batches remembered, OUT_OF_ORDER beyond them (as 1.0+)
OOO_BROKER = ClusterSpec(brokers=1, controllers=1,
                         broker_args=("--duplicate-beyond-cache-error=OUT_OF_ORDER_SEQUENCE_NUMBER",
                                      "--producer-state-batches=5"))


def pipelined(ctx, batches: int, in_flight: int, lost: int, reaction: str = "bump-epoch") -> None:
    ctx.create_topic(TOPIC)
    p = ctx.producer(enable_idempotence=True, max_in_flight=in_flight, batch_size=record.batch_bytes(PER_BATCH),
                     linger_ms=5000, request_timeout_ms=3000, retry_backoff_ms=20, on_out_of_order=reaction)
    address = ctx.drop_acks(TOPIC, count=lost)
    ops = [ctx.send(i, p, "producer-1", TOPIC, [(0, v) for v in ctx.values(PER_BATCH)]) for i in range(batches)]
    ctx.wait_acks_dropped(address, lost)
    for op in ops:
        op.complete(timeout=60)
    ctx.read_all(TOPIC)


def epochs_of_acks(ops: list[dict]) -> dict[int, int]:
    """process -> producer epoch of its ok send."""
    return {o["process"]: o["producer"]["epoch"] for o in completions(ops, "send", "ok")}


def one_epoch(ops: list[dict]) -> str | None:
    eps = set(epochs_of_acks(ops).values())
    return None if len(eps) == 1 else f"acknowledgements came in epochs {sorted(eps)}"


def bumped_for(lost: int):
    def check(ops: list[dict]) -> str | None:
        eps = epochs_of_acks(ops)
        first = min(eps.values(), default=None)
        late = sorted(p for p, e in eps.items() if e != first)
        want = list(range(lost))
        if late != want:
            return f"batches acknowledged in a later epoch: {late}, expected {want}"
        return None
    return check


@register("lost-ack-5-in-flight", seed="001 §2.2 (figure 3), §1",
          description="10 batches, 5 in flight, the first ACK lost: the retry hits the 5-batch cache, one copy",
          cluster=OOO_BROKER, expected=(),
          facts=(Fact("no epoch bump", one_epoch),),
          notes="Same broker and producer as lost-ack-6-in-flight-epoch-bump; only max.in.flight differs. "
                "The producer keeps producing past the lost ACK: the answers after a lost one do not "
                "arrive either (an ordered connection), so no sixth batch goes out before the retry.")
def lost_ack_5(ctx) -> None:
    pipelined(ctx, batches=10, in_flight=5, lost=1)


@register("lost-ack-6-in-flight-epoch-bump", seed="001 §2.4 (figure 5)",
          description="6 batches in flight, the first ACK lost: the retry is beyond the cache, "
                      "OUT_OF_ORDER, the producer bumps its epoch and writes batch A again",
          cluster=OOO_BROKER, expected=("duplicate",),
          facts=(Fact("batch A re-sent in a new epoch", bumped_for(1)),))
def lost_ack_6(ctx) -> None:
    pipelined(ctx, batches=6, in_flight=6, lost=1)


def reported_failed_but_written(ops: list[dict]) -> str | None:
    first = [o for o in completions(ops, "send") if o["process"] == 0]
    if not first or first[0]["type"] == "ok":
        return "batch A was acknowledged"
    o = first[0]
    read = {v for p in completions(ops, "poll", "ok") for m in p["value"] for pairs in m[1].values()
            for _, v in pairs}
    values = [m[2] for m in o["value"]]
    if o.get("error") != "OUT_OF_ORDER_SEQUENCE_NUMBER" or not set(values) <= read:
        return f"batch A ended {o['type']} ({o.get('error')}); read: {sorted(set(values) & read)}"
    return None


@register("lost-ack-6-in-flight-fatal", seed="001 §2.4 (figure 5); 003 (OutOfOrderSequenceException)",
          description="the same schedule with a producer that fails on OUT_OF_ORDER (KIP-98 as shipped): no "
                      "duplicate, but batch A is reported failed although the broker wrote it",
          cluster=OOO_BROKER, expected=(),
          facts=(Fact("batch A reported failed (OUT_OF_ORDER) yet written", reported_failed_but_written),),
          notes="OUT_OF_ORDER_SEQUENCE_NUMBER is an indefinite error (info): recorded as a definite failure, "
                "the checker would call the records' appearance an aborted read (G1a).")
def lost_ack_6_fatal(ctx) -> None:
    pipelined(ctx, batches=6, in_flight=6, lost=1, reaction="fatal")


@register("out-of-order-epoch-bump", seed="001 §1, §2.4; 003 (OutOfOrderSequenceException)",
          description="8 batches in flight, the first 3 ACKs lost: each retry gets OUT_OF_ORDER, the epoch "
                      "bump renumbers and resends all three: three batches written twice",
          cluster=OOO_BROKER, expected=("duplicate",),
          facts=(Fact("batches A, B, C re-sent in a new epoch", bumped_for(3)),))
def out_of_order_bump(ctx) -> None:
    pipelined(ctx, batches=8, in_flight=8, lost=3)


def default_producer_lost_ack(ctx) -> None:
    ctx.create_topic("defaults")
    p = ctx.producer(linger_ms=0, request_timeout_ms=2000, retry_backoff_ms=20)     # the release's defaults
    address = ctx.drop_acks("defaults", count=1)
    op = ctx.send(0, p, "producer-1", "defaults", [(0, v) for v in ctx.values(1)])
    ctx.wait_acks_dropped(address, 1)
    op.complete(timeout=60)
    ctx.read_all("defaults")


register("default-producer-lost-ack", seed="KIP-679 (3.0: idempotence on by default); 003 (what the producer "
         "config does)",
         description="a producer left at its release's defaults, its first ACK lost: before 3.0 it is not "
                     "idempotent (acks=1) and its retry writes the record twice; from 3.0 it is, and writes it once",
         cluster=ClusterSpec(brokers=1, controllers=1), expected=(),
         expected_by_version={"0.11": ("duplicate",), "2.5": ("duplicate",)})(default_producer_lost_ack)
