"""A correct exactly-once copier with kafka-python: read -> process -> write in one transaction.

Run by `eoslab app run --cmd 'python examples/apps/kafka_python_copier.py' --instances 3`; it takes its
settings from the EOSLAB_* environment (docs/apps.md). Each loop: poll a batch, begin a transaction,
send every record's key and value unchanged, put the consumer's offsets into the SAME transaction with
consumer.group_metadata() (generation and member id, so the broker fences a stale member: KIP-447),
commit. The output records and the input offsets become visible together or not at all. A watchdog
thread exits the process when init_transactions() or a transaction has not ended in 30 s (kafka-python's
calls take no timeout).
"""
import os
import signal
import sys
import threading
import time

from kafka import ConsumerRebalanceListener, KafkaConsumer, KafkaProducer, OffsetAndMetadata
from kafka.errors import InvalidProducerEpochError, KafkaError, ProducerFencedError

env = os.environ
BOOTSTRAP, IN, OUT = env["EOSLAB_BOOTSTRAP"].split(","), env["EOSLAB_INPUT_TOPIC"], env["EOSLAB_OUTPUT_TOPIC"]
GROUP, TXN_ID, ME = env["EOSLAB_GROUP_ID"], env["EOSLAB_TRANSACTIONAL_ID"], env.get("EOSLAB_INSTANCE", "?")
FENCED = (ProducerFencedError, InvalidProducerEpochError)


def log(event: str) -> None:         # one line per event on stderr (the lab keeps it in the instance's log)
    print(f"kafka-python-copier[{ME}] {event}", file=sys.stderr, flush=True)


def die(event: str) -> None:         # fenced or fatal: this producer can never commit again
    log(event)
    os._exit(1)                      # no clean-up that might touch the transaction


stopping = False                     # SIGTERM: finish the current transaction, then leave cleanly


def on_sigterm(signum, frame):
    global stopping
    stopping = True


signal.signal(signal.SIGTERM, on_sigterm)

# kafka-python's transaction calls take no timeout, and it can drop a request to a coordinator whose
# connection broke mid-send and then wait for its answer forever (docs/apps.md). init_transactions() or a
# transaction that has not ended after STUCK_S is taken as stuck: the process exits, as a liveness probe
# would restart a pod, and the next incarnation's init_transactions() fences this one and ends its
# transaction.
STUCK_S = 30.0
txn_started = None                   # monotonic time the open call began; None between transactions


def watchdog() -> None:
    while True:
        time.sleep(1.0)
        started = txn_started
        if started is not None and time.monotonic() - started > STUCK_S:
            what = "init_transactions()" if producer is None else "the transaction"
            die(f"stuck: {what} has not ended in {STUCK_S:.0f} s; exiting to be restarted")


producer = None                      # until init_transactions() has returned
threading.Thread(target=watchdog, name="watchdog", daemon=True).start()


class Rebalances(ConsumerRebalanceListener):     # only logs
    def on_partitions_revoked(self, revoked):
        log(f"rebalanced: revoked {sorted(tp.partition for tp in revoked)}")

    def on_partitions_assigned(self, assigned):
        log(f"rebalanced: assigned {sorted(tp.partition for tp in assigned)}")


txn_started = time.monotonic()
p = KafkaProducer(bootstrap_servers=BOOTSTRAP,
                  transactional_id=TXN_ID,        # the same for every incarnation: a restart fences its zombie
                  transaction_timeout_ms=10000)   # an abandoned transaction is aborted by the broker after 10 s
p.init_transactions()                # fences older producers with this id, finishes their transaction
producer, txn_started = p, None
consumer = KafkaConsumer(bootstrap_servers=BOOTSTRAP, group_id=GROUP,
                         isolation_level="read_committed",   # never read aborted or open transactions
                         enable_auto_commit=False,           # offsets are committed only inside our transactions
                         auto_offset_reset="earliest",
                         session_timeout_ms=6000, heartbeat_interval_ms=1000)
consumer.subscribe([IN], listener=Rebalances())
log(f"started transactional.id={TXN_ID} group={GROUP}")


def rewind() -> None:
    """After an abort, go back to the group's committed offsets: the aborted batch is read again."""
    for tp in consumer.assignment():
        offset = consumer.committed(tp)
        if offset is None:
            consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, offset)


while not stopping:
    batches = consumer.poll(timeout_ms=1000, max_records=500)    # {TopicPartition: [records]}
    if not batches:
        continue
    txn_started = time.monotonic()
    try:
        producer.begin_transaction()
        for records in batches.values():
            for r in records:
                producer.send(OUT, key=r.key, value=r.value)
        offsets = {tp: OffsetAndMetadata(records[-1].offset + 1, "", -1) for tp, records in batches.items()}
        producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
        producer.commit_transaction()                  # flushes the sends; raises if one failed
    except FENCED as e:
        die(f"fenced: {type(e).__name__}: {e}")
    except KafkaError as e:
        log(f"aborting the transaction: {type(e).__name__}: {e}")
        try:
            producer.abort_transaction()               # raises when the producer is in a fatal state
            rewind()
        except KafkaError as e2:
            die(f"fenced: abort or rewind failed: {type(e2).__name__}: {e2}")
    txn_started = None

consumer.close(autocommit=False)                       # leaves the group: its partitions move at once
producer.close()
log("exit 0 (SIGTERM)")
