"""A correct exactly-once copier with confluent-kafka (librdkafka): read -> process -> write in one transaction.

Run by `eoslab app run --cmd 'python examples/apps/confluent_copier.py' --instances 3`; it takes its
settings from the EOSLAB_* environment (docs/apps.md). Each loop: poll a batch, begin a transaction,
produce every record's key and value unchanged, put the consumer's offsets into the SAME transaction
together with the group's metadata (generation and member id: KIP-447), commit. The output records
and the input offsets become visible together or not at all.
"""
import os
import signal
import sys

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

env = os.environ
BOOTSTRAP, IN, OUT = env["EOSLAB_BOOTSTRAP"], env["EOSLAB_INPUT_TOPIC"], env["EOSLAB_OUTPUT_TOPIC"]
GROUP, TXN_ID, ME = env["EOSLAB_GROUP_ID"], env["EOSLAB_TRANSACTIONAL_ID"], env.get("EOSLAB_INSTANCE", "?")
TIMEOUT = 30.0                       # seconds for each blocking client call


def log(event: str) -> None:         # one line per event on stderr (the lab keeps it in the instance's log)
    print(f"confluent-copier[{ME}] {event}", file=sys.stderr, flush=True)


def die(event: str) -> None:         # fenced or fatal: this producer can never commit again
    log(event)
    os._exit(1)                      # no clean-up that might touch the transaction


stopping = False                     # SIGTERM: finish the current transaction, then leave cleanly


def on_sigterm(signum, frame):
    global stopping
    stopping = True


signal.signal(signal.SIGTERM, on_sigterm)

consumer = Consumer({
    "bootstrap.servers": BOOTSTRAP, "group.id": GROUP,
    "isolation.level": "read_committed",   # never read another app's aborted or open transactions
    "enable.auto.commit": False,           # offsets are committed only inside our transactions
    "auto.offset.reset": "earliest",
    "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000})
producer = Producer({
    "bootstrap.servers": BOOTSTRAP,
    "transactional.id": TXN_ID,            # the same for every incarnation: a restart fences its zombie
    "transaction.timeout.ms": 10000})      # an abandoned transaction is aborted by the broker after 10 s
producer.init_transactions(TIMEOUT)        # fences older producers with this id, finishes their transaction
consumer.subscribe([IN], on_assign=lambda c, ps: log(f"rebalanced: assigned {[p.partition for p in ps]}"),
                   on_revoke=lambda c, ps: log(f"rebalanced: revoked {[p.partition for p in ps]}"))
log(f"started transactional.id={TXN_ID} group={GROUP}")


def finish(end_txn) -> None:
    """commit_transaction or abort_transaction, retried while librdkafka says the call may be retried."""
    while True:
        try:
            return end_txn(TIMEOUT)
        except KafkaException as e:
            if not e.args[0].retriable():
                raise


def rewind() -> None:
    """After an abort, go back to the group's committed offsets: the aborted batch is read again."""
    for tp in consumer.committed(consumer.assignment(), TIMEOUT):
        consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))


while not stopping:
    msgs = []
    for m in consumer.consume(500, 1.0):
        if m.error() is None:
            msgs.append(m)
        elif m.error().fatal():
            die(f"fatal consumer error: {m.error().str()}")
        else:
            log(f"consumer error: {m.error().str()}")
    if not msgs:
        continue
    offsets = {}                                        # next offset to read, per input partition
    for m in msgs:
        offsets[m.partition()] = m.offset() + 1
    try:
        producer.begin_transaction()
        for m in msgs:
            producer.produce(OUT, key=m.key(), value=m.value())
        producer.send_offsets_to_transaction([TopicPartition(IN, p, o) for p, o in offsets.items()],
                                             consumer.consumer_group_metadata(), TIMEOUT)
        finish(producer.commit_transaction)
    except KafkaException as e:
        err = e.args[0]
        if err.fatal():                                 # PRODUCER_FENCED, INVALID_PRODUCER_EPOCH, ...
            die(f"fenced: {err.name()}: {err.str()}")
        log(f"aborting the transaction: {err.name()}: {err.str()}")
        try:
            finish(producer.abort_transaction)
            rewind()
        except KafkaException as e2:
            die(f"fenced: abort or rewind failed: {e2.args[0].name()}: {e2.args[0].str()}")

consumer.close()                                        # leaves the group: its partitions move at once
producer.flush(TIMEOUT)
log("exit 0 (SIGTERM)")
