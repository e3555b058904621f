"""WRONG ON PURPOSE: transactions for the output, but the input offsets outside them. The lab should
find DUPLICATES after kill-app (and after rebalances).

What is wrong: each batch's copies are written in a transaction, but the consumer's offsets are
committed afterwards with consumer.commit(), a separate request outside the transaction. A process
killed between commit_transaction() and consumer.commit() has its copies committed in the output and
the old offsets in the group: the next owner of the partitions copies the batch again. A member that
lost its partitions in a rebalance in that window has its commit refused, with the same effect.
The fix is producer.send_offsets_to_transaction(..., consumer.consumer_group_metadata()) before the
commit (confluent_copier.py). Expected verdict: duplicates, nothing lost.
"""
import os
import signal
import sys

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

env = os.environ
BOOTSTRAP, IN, OUT = env["EOSLAB_BOOTSTRAP"], env["EOSLAB_INPUT_TOPIC"], env["EOSLAB_OUTPUT_TOPIC"]
GROUP, TXN_ID, ME = env["EOSLAB_GROUP_ID"], env["EOSLAB_TRANSACTIONAL_ID"], env.get("EOSLAB_INSTANCE", "?")


def log(event: str) -> None:
    print(f"offsets-outside-txn[{ME}] {event}", file=sys.stderr, flush=True)


stopping = False


def on_sigterm(signum, frame):
    global stopping
    stopping = True


signal.signal(signal.SIGTERM, on_sigterm)
consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": GROUP, "isolation.level": "read_committed",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000})
producer = Producer({"bootstrap.servers": BOOTSTRAP, "transactional.id": TXN_ID, "transaction.timeout.ms": 10000})
producer.init_transactions(30)
consumer.subscribe([IN], on_assign=lambda c, ps: log(f"rebalanced: assigned {[p.partition for p in ps]}"),
                   on_revoke=lambda c, ps: log(f"rebalanced: revoked {[p.partition for p in ps]}"))
log(f"started transactional.id={TXN_ID} (offsets committed outside the transaction)")

while not stopping:
    msgs = [m for m in consumer.consume(500, 1.0) if m.error() is None]
    if not msgs:
        continue
    offsets = {m.partition(): m.offset() + 1 for m in msgs}
    try:
        producer.begin_transaction()
        for m in msgs:
            producer.produce(OUT, key=m.key(), value=m.value())
        producer.commit_transaction(30)         # the copies are committed ...
    except KafkaException as e:
        log(f"exit 1: {e.args[0].name()}: {e.args[0].str()}")
        os._exit(1)
    try:                                        # ... and the offsets in a second, separate step: NOT atomic
        consumer.commit(offsets=[TopicPartition(IN, p, o) for p, o in offsets.items()], asynchronous=False)
    except KafkaException as e:
        log(f"offset commit failed (the batch will be copied again): {e.args[0].name()}")

consumer.close()
log("exit 0 (SIGTERM)")
