"""TransactionStateManager: the owned __transaction_state partitions and their transaction metadata.

Guarantees:
- this coordinator serves a transactional.id only while the controller's
  assignment names this coordinator (id and ZooKeeper session) as owner of
  the id's partition, and only once that partition is loaded; otherwise
  NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS;
- `append` returns NONE only after the record (key = transactional.id,
  value = the target metadata as JSON with the coordinator epoch, or a
  tombstone) is acknowledged with acks=all by the partition's ISR, and the
  partition is still owned at the same coordinator epoch; the caller applies
  the transition only then;
- loading replays the partition from its start to its high watermark: the
  last record of each id wins, records written by an older coordinator epoch
  after a newer one are ignored (a deposed owner's late writes), tombstones
  remove the id;
- a handover is fenced in the log (the coordinator writes through brokers
  that know nothing of coordinator epochs, and the old owner hears of the
  move later than the new one, or not at all while cut from ZooKeeper): a new
  owner first appends a fence record with its coordinator epoch and loads
  past it, so it sees every write that landed before the fence; an owner
  counts its own append only after reading the partition between its last
  checked offset and that append and finding no fence of a newer epoch —
  otherwise the append is void (NOT_COORDINATOR, the partition is dropped).
  So a transition is either in the new owner's state or answered with an
  error, never both lost and acknowledged;
- its retry backoffs and the fence check's deadline run on the injected
  `Time` (`self.time`), and `close()` ends every retry wait at once.
"""
from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field

from clients.consumer import KafkaConsumer
from eoslab.common.errors import E, KafkaError
from eoslab.common.time import SYSTEM, Time
from clients.metadata import ClusterMetadata
from clients.producer import KafkaProducer, ProducerConfig
from services.common import internal_topics as it
from services.txn_coordinator.transaction_metadata import TransactionMetadata, TxnTransitMetadata

log = logging.getLogger(__name__)

APPEND_ERRORS = {   # what a failed append becomes for the client (Kafka's TransactionStateManager)
    E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR, E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
    E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
        E.COORDINATOR_NOT_AVAILABLE, E.REQUEST_TIMED_OUT: E.COORDINATOR_NOT_AVAILABLE,
}


FENCE_KEY = b""     # a fence record: value {"fence": true, "coordinator_epoch": E}


@dataclass
class OwnedPartition:
    partition: int
    coordinator_epoch: int
    loading: bool = True
    cache: dict[str, TransactionMetadata] = field(default_factory=dict)
    checked: int = 0    # offsets below this hold no fence of a newer coordinator epoch
    check_lock: threading.Lock = field(default_factory=threading.Lock)
    checker: KafkaConsumer | None = None    # reads [checked, append) for fences; kept while owned

    def close_checker(self) -> None:
        with self.check_lock:
            if self.checker is not None:
                self.checker.close()
                self.checker = None


class TransactionStateManager:
    def __init__(self, coordinator_id: int, bootstrap: str, time: Time = SYSTEM):
        self.time = time
        self.coordinator_id = coordinator_id
        self.bootstrap = bootstrap
        self.metadata = ClusterMetadata(bootstrap)
        self.lock = threading.RLock()
        self.owned: dict[int, OwnedPartition] = {}
        self.num_partitions = 0
        self.on_loaded = None    # (OwnedPartition) -> None: the coordinator resumes unfinished transactions
        self._producer: KafkaProducer | None = None
        self._closed = threading.Event()     # set by close(): retry waits end at once

    def producer(self) -> KafkaProducer:
        with self.lock:
            if self._producer is None:
                self._producer = KafkaProducer(self.bootstrap, ProducerConfig(
                    linger_ms=0, request_timeout_ms=3000, delivery_timeout_ms=15000, retry_backoff_ms=50,
                    client_id=f"txn-coordinator-{self.coordinator_id}"))
            return self._producer

    def partition_for(self, transactional_id: str) -> int:
        return it.partition_for(transactional_id, self.num_partitions) if self.num_partitions else -1

    # -- ownership ----------------------------------------------------------------------------
    def on_assignment(self, num_partitions: int, mine: dict[int, int]) -> None:
        """mine: partition -> coordinator epoch for the partitions assigned to this coordinator."""
        with self.lock:
            self.num_partitions = num_partitions
            for p in list(self.owned):
                if mine.get(p) != self.owned[p].coordinator_epoch:
                    log.info("lost __transaction_state-%d (epoch %d)", p, self.owned[p].coordinator_epoch)
                    self._drop(self.owned.pop(p))
            for p, epoch in mine.items():
                if p not in self.owned:
                    op = self.owned[p] = OwnedPartition(p, epoch)
                    log.info("gained __transaction_state-%d at coordinator epoch %d; loading", p, epoch)
                    threading.Thread(target=self._load, args=(op,), name=f"load-{p}", daemon=True).start()

    def _drop(self, op: OwnedPartition) -> None:
        threading.Thread(target=op.close_checker, name=f"drop-{op.partition}", daemon=True).start()

    def _still_owned(self, op: OwnedPartition) -> bool:
        with self.lock:
            return self.owned.get(op.partition) is op

    def _fence(self, op: OwnedPartition) -> int | None:
        """Append this owner's fence record; its offset (None if the partition was lost meanwhile)."""
        value = json.dumps({"fence": True, "coordinator_epoch": op.coordinator_epoch}).encode()
        while self._still_owned(op):
            try:
                return self.producer().send(it.TRANSACTION_STATE_TOPIC, value, key=FENCE_KEY,
                                            partition=op.partition).result(timeout=20).offset
            except Exception as e:  # noqa: BLE001 - leaderless or not enough replicas for now: try again
                log.info("fencing __transaction_state-%d failed (%s); retrying", op.partition, e)
                self.time.wait_event(self._closed, 0.5)
        return None

    def _load(self, op: OwnedPartition) -> None:
        tp = (it.TRANSACTION_STATE_TOPIC, op.partition)
        fence = self._fence(op)
        if fence is None:
            return
        op.checked = fence + 1
        while self._still_owned(op):
            c = KafkaConsumer(self.bootstrap)
            try:
                records = c.read_all([tp], timeout=30)
                break
            except Exception as e:  # noqa: BLE001 - partition leaderless for now: try again
                log.info("loading __transaction_state-%d failed (%s); retrying", op.partition, e)
                self.time.wait_event(self._closed, 0.5)
            finally:
                c.close()
        else:
            return
        cache: dict[str, TransactionMetadata] = {}
        max_epoch = -1
        for r in records:
            tid = r.key.decode()
            if r.value is None:
                cache.pop(tid, None)
                continue
            d = json.loads(r.value)
            ce = d.get("coordinator_epoch", -1)
            if ce < max_epoch:
                continue   # a deposed owner's late write
            max_epoch = ce
            if d.get("fence"):
                continue
            cache[tid] = TransactionMetadata.from_transit(tid, TxnTransitMetadata.from_json(d))
        with self.lock:
            if self.owned.get(op.partition) is not op:
                return
            op.cache = cache
            op.loading = False
        log.info("loaded __transaction_state-%d: %d transactional ids", op.partition, len(cache))
        if self.on_loaded is not None:
            self.on_loaded(op)

    def owner_of(self, transactional_id: str) -> tuple[int, OwnedPartition | None]:
        """(error, owned partition) for the id's partition."""
        p = self.partition_for(transactional_id)
        with self.lock:
            op = self.owned.get(p)
            if op is None:
                return E.NOT_COORDINATOR, None
            if op.loading:
                return E.COORDINATOR_LOAD_IN_PROGRESS, None
            return E.NONE, op

    def all_owned(self) -> list[OwnedPartition]:
        with self.lock:
            return [op for op in self.owned.values() if not op.loading]

    # -- writes ---------------------------------------------------------------------------------
    def append(self, op: OwnedPartition, transactional_id: str, transit: TxnTransitMetadata | None) -> int:
        value = None if transit is None else json.dumps(transit.to_json(op.coordinator_epoch),
                                                        separators=(",", ":")).encode()
        try:
            fut = self.producer().send(it.TRANSACTION_STATE_TOPIC, value, key=transactional_id.encode(),
                                       partition=op.partition)
            offset = fut.result(timeout=20).offset
        except KafkaError as e:
            log.info("append for %s failed: %s", transactional_id, e)
            return APPEND_ERRORS.get(e.code, E.COORDINATOR_NOT_AVAILABLE)
        except TimeoutError:
            return E.COORDINATOR_NOT_AVAILABLE
        if not self._still_owned(op):
            return E.NOT_COORDINATOR
        if offset < 0 or not self._unfenced_below(op, offset):
            return E.NOT_COORDINATOR
        return E.NONE

    def _unfenced_below(self, op: OwnedPartition, offset: int) -> bool:
        """Read [op.checked, offset): no fence of a newer coordinator epoch there. A newer one means the
        partition moved before this append landed: the append is void and the partition is dropped. Only
        other writers' records are read: after a check, `checked` is past this append's own record, so a
        partition only this owner writes costs no read at all."""
        tp = (it.TRANSACTION_STATE_TOPIC, op.partition)
        with op.check_lock:
            if op.checked >= offset:
                return self._still_owned(op)
            try:
                if op.checker is None:
                    op.checker = KafkaConsumer(self.bootstrap)
                    op.checker.assign([tp])
                c = op.checker
                if c.positions[tp] != op.checked:
                    c.seek(tp, op.checked)
                deadline = self.time.monotonic() + 10
                while c.positions[tp] < offset:
                    if self.time.monotonic() > deadline or not self._still_owned(op):
                        return False
                    for r in c.poll(200):
                        if r.offset >= offset or r.key != FENCE_KEY or r.value is None:
                            continue
                        if json.loads(r.value).get("coordinator_epoch", -1) > op.coordinator_epoch:
                            log.info("__transaction_state-%d was fenced at offset %d by a newer owner",
                                     op.partition, r.offset)
                            with self.lock:
                                if self.owned.get(op.partition) is op:
                                    del self.owned[op.partition]
                            c.close()
                            op.checker = None
                            return False
            except Exception as e:  # noqa: BLE001 - cannot tell: the append does not count
                log.info("checking __transaction_state-%d for fences failed: %s", op.partition, e)
                if op.checker is not None:
                    op.checker.close()
                    op.checker = None
                return False
            op.checked = max(op.checked, offset + 1)   # the record at `offset` is this append, not a fence
            return self._still_owned(op)

    def close(self) -> None:
        self._closed.set()
        with self.lock:
            owned, self.owned = list(self.owned.values()), {}
        for op in owned:
            op.close_checker()
        if self._producer is not None:
            self._producer.close(5)
        self.metadata.close()
