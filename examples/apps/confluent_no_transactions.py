"""WRONG ON PURPOSE: at-least-once, not exactly-once. The lab should find DUPLICATES after kill-app.

What is wrong: the producer is idempotent (no duplicates from its own retries) but not transactional,
and the input offsets are committed by the consumer's auto-commit, every 5 s in the background,
AFTER the copies were written (an offset is stored for auto-commit only once its copy is flushed,
so nothing is lost). A process killed (SIGKILL) leaves up to 5 s of copies in the output whose
offsets the group never got: whoever takes the partitions next copies them again. Expected verdict:
every input present, some twice (duplicates), none lost.
"""
import os
import signal
import sys

from confluent_kafka import Consumer, Producer, TopicPartition

env = os.environ
BOOTSTRAP, IN, OUT = env["EOSLAB_BOOTSTRAP"], env["EOSLAB_INPUT_TOPIC"], env["EOSLAB_OUTPUT_TOPIC"]
GROUP, ME = env["EOSLAB_GROUP_ID"], env.get("EOSLAB_INSTANCE", "?")


def log(event: str) -> None:
    print(f"no-transactions[{ME}] {event}", file=sys.stderr, flush=True)


stopping = False


def on_sigterm(signum, frame):
    global stopping
    stopping = True


signal.signal(signal.SIGTERM, on_sigterm)
consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": GROUP, "isolation.level": "read_committed",
                     "enable.auto.commit": True, "auto.commit.interval.ms": 5000,   # commits in the background
                     "enable.auto.offset.store": False,      # ... only the offsets stored below, after the copy
                     "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000})
producer = Producer({"bootstrap.servers": BOOTSTRAP, "enable.idempotence": True})   # idempotent, NOT transactional
consumer.subscribe([IN], on_assign=lambda c, ps: log(f"rebalanced: assigned {[p.partition for p in ps]}"),
                   on_revoke=lambda c, ps: log(f"rebalanced: revoked {[p.partition for p in ps]}"))
log("started (no transactions: at-least-once)")

while not stopping:
    msgs = [m for m in consumer.consume(500, 1.0) if m.error() is None]
    if not msgs:
        continue
    for m in msgs:
        producer.produce(OUT, key=m.key(), value=m.value())
    producer.flush(30)                          # the copies are durable now ...
    offsets = {m.partition(): m.offset() + 1 for m in msgs}
    consumer.store_offsets(offsets=[TopicPartition(IN, p, o) for p, o in offsets.items()])
    # ... their offsets reach the group at the next auto-commit, up to 5 s later: a kill before it copies them again

consumer.close()
producer.flush(30)
log("exit 0 (SIGTERM)")
