"""WRONG ON PURPOSE: a new transactional.id at every process start. The lab should find a HANGING
TRANSACTION after kill-app (an open transaction nobody aborts); on Kafka before 2.5, DUPLICATES under
zombie-app.

What is wrong: the transactional.id gets a random suffix per process, so a restarted or replacement
instance never fences the incarnation it replaces (InitProducerId only fences producers with the
SAME id) and never finishes the transaction a killed incarnation left open: that transaction stays
open until transaction.timeout.ms (and the coordinator's next check), holding back every
read_committed reader of the output (and the group's offset fetch) meanwhile. A zombie (an old
incarnation that still runs, or comes back from a pause or a network cut) keeps a working producer.
Everything else is as in confluent_copier.py, including the group metadata in
send_offsets_to_transaction: from Kafka 2.5 on that KIP-447 fencing (by group generation) refuses
the zombie's offsets once the group has moved on, and a new owner waits for offsets pending in the
zombie's open transaction, so the zombie leaves no duplicate; before 2.5 its writes are accepted.
"""
import os
import signal
import sys
import uuid

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

env = os.environ
BOOTSTRAP, IN, OUT = env["EOSLAB_BOOTSTRAP"], env["EOSLAB_INPUT_TOPIC"], env["EOSLAB_OUTPUT_TOPIC"]
GROUP, ME = env["EOSLAB_GROUP_ID"], env.get("EOSLAB_INSTANCE", "?")
TXN_ID = f"{env['EOSLAB_TRANSACTIONAL_ID']}-{uuid.uuid4().hex[:8]}"     # THE BUG: unique per process start


def log(event: str) -> None:
    print(f"new-txn-id[{ME}] {event}", file=sys.stderr, flush=True)


stopping = False


def on_sigterm(signum, frame):
    global stopping
    stopping = True


signal.signal(signal.SIGTERM, on_sigterm)
consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": GROUP, "isolation.level": "read_committed",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000})
producer = Producer({"bootstrap.servers": BOOTSTRAP, "transactional.id": TXN_ID, "transaction.timeout.ms": 10000})
producer.init_transactions(30)                  # fences nobody: no earlier producer had this id
consumer.subscribe([IN], on_assign=lambda c, ps: log(f"rebalanced: assigned {[p.partition for p in ps]}"),
                   on_revoke=lambda c, ps: log(f"rebalanced: revoked {[p.partition for p in ps]}"))
log(f"started transactional.id={TXN_ID}")

while not stopping:
    msgs = [m for m in consumer.consume(500, 1.0) if m.error() is None]
    if not msgs:
        continue
    offsets = {m.partition(): m.offset() + 1 for m in msgs}
    try:
        producer.begin_transaction()
        for m in msgs:
            producer.produce(OUT, key=m.key(), value=m.value())
        producer.send_offsets_to_transaction([TopicPartition(IN, p, o) for p, o in offsets.items()],
                                             consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
    except KafkaException as e:
        if e.args[0].fatal():
            log(f"fenced: {e.args[0].name()}")
            os._exit(1)
        log(f"aborting: {e.args[0].name()}")
        producer.abort_transaction(30)
        for tp in consumer.committed(consumer.assignment(), 30):
            consumer.seek(TopicPartition(IN, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))

consumer.close()
log("exit 0 (SIGTERM)")
