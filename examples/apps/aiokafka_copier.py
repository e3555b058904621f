"""A correct exactly-once copier with aiokafka: read -> process -> write in one transaction.

Run by `eoslab app run --cmd 'python examples/apps/aiokafka_copier.py' --instances 3`; it takes its
settings from the EOSLAB_* environment (docs/apps.md).

Unlike the confluent-kafka and kafka-python copiers this one does NOT use EOSLAB_TRANSACTIONAL_ID:
aiokafka (0.14) has no KIP-447. Its send_offsets_to_transaction sends the group id only (no generation
or member id, so the broker cannot fence a member that was thrown out of the group), and its offset
fetch does not ask for stable offsets (a partition's new owner reads the offset from before a
transaction that is still open). With one transactional.id per instance, an instance paused past its
session timeout, resumed before its transaction timed out, would still commit a batch that the
partition's new owner has already copied again: duplicates. So this copier does what Kafka Streams
did before KIP-447: one transactional producer per input partition, transactional.id
"<group>-<topic>-<partition>", used by whichever instance owns the partition. On assignment the new
owner's InitProducerId fences the old owner's producer and finishes its open transaction, and only
then does the new owner read the committed offset and start copying.
"""
import asyncio
import os
import signal
import sys

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener
from aiokafka.errors import InvalidProducerEpoch, ProducerFenced

env = os.environ
BOOTSTRAP, IN, OUT = env["EOSLAB_BOOTSTRAP"].split(","), env["EOSLAB_INPUT_TOPIC"], env["EOSLAB_OUTPUT_TOPIC"]
GROUP, ME = env["EOSLAB_GROUP_ID"], env.get("EOSLAB_INSTANCE", "?")
FENCED = (ProducerFenced, InvalidProducerEpoch)


def log(event: str) -> None:         # one line per event on stderr (the lab keeps it in the instance's log)
    print(f"aiokafka-copier[{ME}] {event}", file=sys.stderr, flush=True)


def die(event: str) -> None:         # fenced or fatal: this instance must not write again
    log(event)
    os._exit(1)                      # no clean-up that might touch a transaction


class Copier(ConsumerRebalanceListener):
    def __init__(self):
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=BOOTSTRAP, group_id=GROUP,
            isolation_level="read_committed",   # never read aborted or open transactions
            enable_auto_commit=False,           # offsets are committed only inside our transactions
            auto_offset_reset="earliest", session_timeout_ms=6000, heartbeat_interval_ms=1000)
        self.producers = {}                     # TopicPartition -> its transactional producer
        self.lock = asyncio.Lock()              # held while a transaction is open
        self.generation = 0                     # bumped by every rebalance: a batch polled across one is dropped
        self.start = {}                         # TopicPartition -> the committed offset read when it was assigned

    async def producer_for(self, tp) -> None:
        p = AIOKafkaProducer(bootstrap_servers=BOOTSTRAP, transactional_id=f"{GROUP}-{tp.topic}-{tp.partition}",
                             transaction_timeout_ms=10000)   # an abandoned transaction is aborted after 10 s
        await p.start()             # InitProducerId: fences the partition's previous producer, ends its transaction
        self.producers[tp] = p
        self.start[tp] = await self.consumer.committed(tp)  # stable now: no transaction of the old owner is open
        await self.rewind(tp)

    async def rewind(self, tp) -> None:
        """Back to the offset the partition was assigned at (nothing is committed in a generation before
        its first batch is kept, so that offset is still the committed one)."""
        if self.start[tp] is None:
            await self.consumer.seek_to_beginning(tp)
        else:
            self.consumer.seek(tp, self.start[tp])

    async def drop(self, tp) -> None:
        p = self.producers.pop(tp, None)
        if p is not None:
            try:
                await p.stop()
            except Exception:  # noqa: BLE001 - a producer that failed: nothing of it is needed
                pass

    # aiokafka awaits these two between leaving and rejoining the group; it only logs their exceptions
    async def on_partitions_revoked(self, revoked):
        async with self.lock:                   # the transaction in flight ends before the partitions go
            self.generation += 1
            for tp in revoked:
                await self.drop(tp)
        log(f"rebalanced: revoked {sorted(tp.partition for tp in revoked)}")

    async def on_partitions_assigned(self, assigned):
        self.consumer.pause(*assigned)          # no records until the offsets are right
        async with self.lock:
            self.generation += 1
            try:
                for tp in assigned:
                    await self.producer_for(tp)
            except Exception as e:  # noqa: BLE001
                die(f"fenced or failed taking partitions {sorted(tp.partition for tp in assigned)}: {e!r}")
        self.consumer.resume(*assigned)
        log(f"rebalanced: assigned {sorted(tp.partition for tp in assigned)}")

    async def copy(self, tp, records) -> None:
        """One transaction: the records of one input partition and that partition's next offset."""
        p = self.producers[tp]
        try:
            async with p.transaction():         # begin; commit when the block ends, abort on an exception
                sent = [await p.send(OUT, key=r.key, value=r.value) for r in records]
                await asyncio.gather(*sent)     # every record acknowledged before the offsets go in
                await p.send_offsets_to_transaction({tp: records[-1].offset + 1}, GROUP)
        except FENCED as e:
            die(f"fenced: {type(e).__name__}: {e}")
        except Exception as e:  # noqa: BLE001 - anything else: start the partition over from its committed offset
            log(f"aborting the transaction on partition {tp.partition}: {e!r}")
            await self.drop(tp)
            try:
                await self.producer_for(tp)     # a new InitProducerId aborts whatever the old producer left open
            except Exception as e2:  # noqa: BLE001
                die(f"fenced or failed restarting partition {tp.partition}: {e2!r}")

    async def run(self) -> None:
        stopping = asyncio.Event()              # SIGTERM: finish the current transaction, then leave cleanly
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
        self.consumer.subscribe([IN], listener=self)
        await self.consumer.start()
        log(f"started group={GROUP} transactional.id={GROUP}-{IN}-<partition>")
        while not stopping.is_set():
            generation = self.generation
            batches = await self.consumer.getmany(timeout_ms=1000, max_records=500)
            async with self.lock:
                if generation != self.generation:
                    # polled across a rebalance: getmany waited for the new assignment and returned records
                    # read from its positions, which moved past them; dropping the batch without going back
                    # would commit past records never copied
                    for tp in self.producers:
                        await self.rewind(tp)
                    continue
                for tp, records in batches.items():
                    if records and tp in self.producers:
                        await self.copy(tp, records)
        await self.consumer.stop()              # leaves the group (the revoke above closes the producers)
        for tp in list(self.producers):
            await self.drop(tp)
        log("exit 0 (SIGTERM)")


async def main() -> None:
    await Copier().run()             # the clients are made inside the event loop that runs them


asyncio.run(main())
