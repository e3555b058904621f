"""The transactional producer's calls to the transaction and group coordinators (KIP-98, KIP-447).

Guarantees: every call goes to the coordinator that owns the key now
(FindCoordinator again after NOT_COORDINATOR or a lost connection) and is
retried on the answers Kafka retries (coordinator.py); PRODUCER_FENCED,
INVALID_PRODUCER_EPOCH and TRANSACTIONAL_ID_AUTHORIZATION_FAILED make the
producer fatal (a zombie: it must be closed); INVALID_PRODUCER_ID_MAPPING and
UNKNOWN_PRODUCER_ID make the transaction abortable with an epoch bump where
the release can bump (KIP-360, Kafka's abortableErrorIfPossible), else fatal;
every other error raises KafkaError. The state changes go through the
TransactionManager's methods. `init_producer_id(producer_id=, producer_epoch=)`
is KIP-360's bump of a live producer's epoch. A
KafkaError raised after an attempt of the same call went unanswered carries
`maybe_applied = True`: that attempt may have taken effect (an EndTxn(commit)
that committed, answered PRODUCER_FENCED on its retry after a new instance
fenced the id), so the error alone does not prove the call did nothing.
Each call is retried for `timeout_s` seconds of the producer's clock
(`producer.time`: max(request.timeout.ms, 30 s) from KafkaProducer), then its
last error is raised.
"""
from __future__ import annotations

from dataclasses import dataclass

from clients.coordinator import OFFSET_COMMIT_TIMEOUT_S, CoordinatorClient
from eoslab.common.errors import E, KafkaError
from eoslab.v1 import broker_pb2, common_pb2, txn_pb2

FATAL = {E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
ABORTABLE_IF_POSSIBLE = {E.INVALID_PRODUCER_ID_MAPPING, E.UNKNOWN_PRODUCER_ID}
TXN_RPC_TIMEOUT_S = 10.0         # one call to the transaction coordinator (the coordinator client retries)


@dataclass(frozen=True)
class ConsumerGroupMetadata:
    """What send_offsets_to_transaction needs of the consumer (KIP-447)."""
    group_id: str
    generation_id: int = -1
    member_id: str = ""


class TransactionRequests:
    def __init__(self, producer, timeout_s: float):
        self.p = producer
        self.tm = producer.transaction_manager
        self.timeout = timeout_s
        self.coordinator = CoordinatorClient(producer.metadata, broker_pb2.TRANSACTION, self.tm.transactional_id,
                                             time=producer.time)

    def _check(self, err: int, what: str, client: CoordinatorClient | None = None) -> None:
        if err == E.NONE:
            return
        e = KafkaError(err, f"{what} for transactional.id {self.tm.transactional_id!r}")
        e.maybe_applied = (client or self.coordinator).unanswered > 0
        if err in FATAL or (err in ABORTABLE_IF_POSSIBLE and what == "InitProducerId"):
            self.tm.transition_to_fatal(e)
        elif err in ABORTABLE_IF_POSSIBLE:
            self.tm.abortable_error_if_possible(e)
        raise e

    def init_producer_id(self, timeout_s: float | None = None, producer_id: int = -1,
                         producer_epoch: int = -1) -> tuple[int, int]:
        tm = self.tm
        req = broker_pb2.InitProducerIdRequest(transactional_id=tm.transactional_id,
                                               transaction_timeout_ms=self.p.config.transaction_timeout_ms,
                                               producer_id=producer_id, producer_epoch=producer_epoch)
        r = self.coordinator.call(lambda a: self.coordinator.txn_stub().InitProducerId(req, timeout=TXN_RPC_TIMEOUT_S),
                                  timeout_s or self.timeout)
        self._check(r.error, "InitProducerId")
        return r.producer_id, r.producer_epoch

    def add_partitions(self, tps) -> None:
        tm = self.tm
        req = txn_pb2.AddPartitionsToTxnRequest(
            transactional_id=tm.transactional_id, producer_id=tm.producer_id, producer_epoch=tm.producer_epoch,
            partitions=[common_pb2.TopicPartition(topic=t, partition=p) for t, p in sorted(tps)])
        r = self.coordinator.call(lambda a: self.coordinator.txn_stub().AddPartitionsToTxn(req, timeout=TXN_RPC_TIMEOUT_S),
                                  self.timeout)
        self._check(r.error, "AddPartitionsToTxn")

    def add_offsets(self, group_id: str) -> None:
        tm = self.tm
        req = txn_pb2.AddOffsetsToTxnRequest(transactional_id=tm.transactional_id, producer_id=tm.producer_id,
                                             producer_epoch=tm.producer_epoch, group_id=group_id)
        r = self.coordinator.call(lambda a: self.coordinator.txn_stub().AddOffsetsToTxn(req, timeout=TXN_RPC_TIMEOUT_S),
                                  self.timeout)
        self._check(r.error, "AddOffsetsToTxn")

    def txn_offset_commit(self, offsets: dict, group: ConsumerGroupMetadata) -> None:
        tm = self.tm
        gc = CoordinatorClient(self.p.metadata, broker_pb2.GROUP, group.group_id, time=self.p.time)
        req = broker_pb2.TxnOffsetCommitRequest(
            transactional_id=tm.transactional_id, group_id=group.group_id, producer_id=tm.producer_id,
            producer_epoch=tm.producer_epoch, generation_id=group.generation_id, member_id=group.member_id,
            partitions=[broker_pb2.OffsetCommitPartition(topic=t, partition=p, offset=o)
                        for (t, p), o in sorted(offsets.items())])
        r = gc.call(lambda a: gc.broker_stub().TxnOffsetCommit(req, timeout=OFFSET_COMMIT_TIMEOUT_S), self.timeout)
        self._check(r.error, "TxnOffsetCommit", gc)

    def end_txn(self, committed: bool) -> txn_pb2.EndTxnResponse:
        tm = self.tm
        req = txn_pb2.EndTxnRequest(transactional_id=tm.transactional_id, producer_id=tm.producer_id,
                                    producer_epoch=tm.producer_epoch, committed=committed)
        r = self.coordinator.call(lambda a: self.coordinator.txn_stub().EndTxn(req, timeout=TXN_RPC_TIMEOUT_S), self.timeout)
        self._check(r.error, "EndTxn")
        return r
