"""CoordinatorApis: a transaction coordinator's Kafka requests (InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn), each translated to the call its gRPC servicer makes.

Guarantees: a transactional request is answered by the coordinator's own
state machine with Kafka's error codes; EndTxn below v5 is a
transaction.version 1 client's and never bumps the epoch, EndTxn v5 (a
transaction.version 2 client, KIP-890 part 2) bumps it at every end and
carries the producer id and epoch to use next back, with Kafka's TV2 rules
for retries and for an abort with no partitions;
PRODUCER_FENCED reaches a client below the version that introduced it
(KIP-588) as INVALID_PRODUCER_EPOCH, as Kafka answers it (NOT_COORDINATOR when it does not own
the id's __transaction_state partition, as Kafka's coordinator answers).
DescribeTransactions and ListTransactions are txn_admin_apis'. Kafka clients reach it through
the broker that leads the id's __transaction_state partition (txn_relay.py); one that is given the
coordinator's own address may send it
whatever a node may get: Metadata and FindCoordinator are answered from the
brokers (over gRPC) with Kafka listener addresses (FindCoordinator names the
relaying broker; Metadata, when no broker answers, is built from the last
answers seen: never an empty topic list; an unknown
topic is auto-created by the broker asked, as its own listener would), and an idempotent
InitProducerId (no transactional id) gets a producer id from the
coordinator's own id blocks, unique across the cluster; ListGroups, which
admin clients send to every node, is answered with no groups; topic and config admin requests
are relayed to a broker (forwarding.py).
"""
from __future__ import annotations

import logging
import threading

import grpc

from eoslab.v1 import broker_pb2, common_pb2, txn_pb2
from services.common.internal_topics import TRANSACTION_STATE_TOPIC
from services.kafka_protocol import apis
from services.kafka_protocol.apis import ApiHandlers, fenced_error, ms
from services.kafka_protocol.endpoints import KafkaEndpoints
from services.kafka_protocol.txn_admin_apis import COORDINATOR_VERSIONS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS

E = apis.E
log = logging.getLogger(__name__)
INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, LIST_GROUPS = 22, 24, 25, 26, 16
VERSIONS = {apis.METADATA: (0, 12), apis.FIND_COORDINATOR: (0, 4), INIT_PRODUCER_ID: (0, 5),
            ADD_PARTITIONS_TO_TXN: (0, 3), ADD_OFFSETS_TO_TXN: (0, 3), END_TXN: (0, 5), LIST_GROUPS: (0, 5)}
# what brokers serve of these on the coordinators' behalf (txn_relay.py): the same versions
RELAYED_VERSIONS = {INIT_PRODUCER_ID: VERSIONS[INIT_PRODUCER_ID], ADD_PARTITIONS_TO_TXN: VERSIONS[ADD_PARTITIONS_TO_TXN],
                    ADD_OFFSETS_TO_TXN: VERSIONS[ADD_OFFSETS_TO_TXN], END_TXN: VERSIONS[END_TXN],
                    DESCRIBE_TRANSACTIONS: COORDINATOR_VERSIONS[DESCRIBE_TRANSACTIONS],
                    LIST_TRANSACTIONS: COORDINATOR_VERSIONS[LIST_TRANSACTIONS]}
TV2_END_TXN = 5      # EndTxn v5: transaction.version 2 (KafkaApis: version > 4 is TV_2)
METADATA_TRIES = 2      # brokers asked in turn for one Metadata request before the last answers are used


class CoordinatorApis(ApiHandlers):
    def __init__(self, server, service):
        super().__init__()
        self.s = server          # TransactionCoordinatorServer
        self.svc = service       # TransactionCoordinatorService
        self.endpoints = KafkaEndpoints(server.zk)
        self._seen_lock = threading.Lock()
        self._seen_brokers: list = []
        self._seen_topics: dict = {}
        for key, fn in ((apis.METADATA, self.metadata), (apis.FIND_COORDINATOR, self.find_coordinator),
                        (INIT_PRODUCER_ID, self.init_producer_id), (ADD_PARTITIONS_TO_TXN, self.add_partitions_to_txn),
                        (ADD_OFFSETS_TO_TXN, self.add_offsets_to_txn), (END_TXN, self.end_txn),
                        (LIST_GROUPS, self.list_groups)):
            self.register(key, *VERSIONS[key], fn)
        from services.kafka_protocol.forwarding import register_forwarded
        from services.kafka_protocol.txn_admin_apis import register_coordinator
        register_coordinator(self)
        register_forwarded(self, server.zk, self.endpoints)
        self.limit_to_release(getattr(server, "kafka_version", None))

    @staticmethod
    def list_groups(header, req) -> dict:
        """A coordinator leads no __consumer_offsets partition, so it coordinates no group; an admin
        client asks every node of Metadata, this one too, and gets an empty list as from such a broker."""
        return {"error_code": E.NONE, "groups": []}

    def metadata(self, header, req) -> dict:
        topics = apis.metadata_topics(header, req)
        resp = self._broker_metadata(topics, bool(getattr(req, "allow_auto_topic_creation", True)))
        if topics == []:
            del resp.topics[:]
        controller = resp.brokers[0].broker_id if resp.brokers else -1
        return apis.metadata_values(resp, self.endpoints, controller)

    def _broker_metadata(self, topics: list[str] | None, auto_create: bool = False) -> broker_pb2.MetadataResponse:
        """The brokers' answer (up to METADATA_TRIES of them asked in turn), else one built from the last
        answers seen, as a Kafka broker answers from its metadata cache: a coordinator cut off from the
        brokers never tells a client that its topics are gone (an empty answer made clients drop their
        partitions' leaders). A topic never seen is LEADER_NOT_AVAILABLE then, which clients retry."""
        md = self.s.tsm.metadata
        err = None
        for addr in md.addresses()[:METADATA_TRIES]:
            try:
                resp = md.stub(addr).Metadata(broker_pb2.MetadataRequest(
                    topics=topics or [], allow_auto_topic_creation=auto_create), timeout=10 if topics else 2)
            except grpc.RpcError as e:
                err = e
                continue
            self._remember(resp)
            return resp
        log.info("Metadata from the brokers failed (%s): answered from the last one seen",
                 err.code() if err is not None else "no broker known")
        with self._seen_lock:
            names = list(self._seen_topics) if topics is None else topics
            return broker_pb2.MetadataResponse(
                brokers=self._seen_brokers,
                topics=[self._seen_topics.get(n) or broker_pb2.TopicMetadata(name=n, error=E.LEADER_NOT_AVAILABLE)
                        for n in names])

    def _remember(self, resp: broker_pb2.MetadataResponse) -> None:
        with self._seen_lock:
            if resp.brokers:
                self._seen_brokers = list(resp.brokers)
            for t in resp.topics:
                if t.error == E.NONE:
                    self._seen_topics[t.name] = t
                elif t.error == E.UNKNOWN_TOPIC_OR_PARTITION:
                    self._seen_topics.pop(t.name, None)

    def _find(self, pb: broker_pb2.FindCoordinatorRequest) -> broker_pb2.FindCoordinatorResponse:
        md = self.s.tsm.metadata
        try:
            return md.stub(md.any_broker()).FindCoordinator(pb, timeout=5)
        except grpc.RpcError as e:
            return broker_pb2.FindCoordinatorResponse(error=E.COORDINATOR_NOT_AVAILABLE,
                                                      error_message=f"no broker answered: {e.code()}")

    def find_coordinator(self, header, req) -> dict:
        return apis.find_coordinator(header, req, self._find, self.endpoints, self._txn_leader)

    def _txn_leader(self, partition: int) -> int:
        """The broker that leads __transaction_state-<partition>, from the brokers' Metadata (-1: none)."""
        resp = self._broker_metadata([TRANSACTION_STATE_TOPIC])
        for t in resp.topics:
            for p in t.partitions:
                if p.partition == partition:
                    return p.leader
        return -1

    def init_producer_id(self, header, req) -> dict:
        if not req.transactional_id:
            err, pid = self.s.pids.generate_producer_id()
            return {"error_code": err, "producer_id": pid if err == E.NONE else -1,
                    "producer_epoch": 0 if err == E.NONE else -1}
        pb = broker_pb2.InitProducerIdRequest(transactional_id=req.transactional_id,
                                              transaction_timeout_ms=ms(req.transaction_timeout),
                                              producer_id=int(getattr(req, "producer_id", -1)),
                                              producer_epoch=int(getattr(req, "producer_epoch", -1)))
        r = self.svc.InitProducerId(pb, None)
        return {"error_code": fenced_error(r.error, header.api_version, 4), "producer_id": r.producer_id,
                "producer_epoch": r.producer_epoch}

    def add_partitions_to_txn(self, header, req) -> dict:
        pb = txn_pb2.AddPartitionsToTxnRequest(transactional_id=req.v3_and_below_transactional_id,
                                               producer_id=int(req.v3_and_below_producer_id),
                                               producer_epoch=int(req.v3_and_below_producer_epoch),
                                               partitions=[common_pb2.TopicPartition(topic=t.name, partition=int(p))
                                                           for t in req.v3_and_below_topics for p in t.partitions])
        r = self.svc.AddPartitionsToTxn(pb, None)
        by_topic: dict[str, list] = {}
        for pr in r.partitions:
            by_topic.setdefault(pr.topic, []).append({"partition_index": pr.partition,
                                                      "partition_error_code": fenced_error(
                                                          pr.error, header.api_version, 2)})
        return {"results_by_topic_v3_and_below": [{"name": t, "results_by_partition": ps}
                                                  for t, ps in by_topic.items()]}

    def add_offsets_to_txn(self, header, req) -> dict:
        r = self.svc.AddOffsetsToTxn(txn_pb2.AddOffsetsToTxnRequest(
            transactional_id=req.transactional_id, producer_id=int(req.producer_id),
            producer_epoch=int(req.producer_epoch), group_id=req.group_id), None)
        return {"error_code": fenced_error(r.error, header.api_version, 2)}

    def end_txn(self, header, req) -> dict:
        if int(req.producer_id) < 0 or int(req.producer_epoch) < 0:
            return {"error_code": E.INVALID_REQUEST}
        pb = txn_pb2.EndTxnRequest(transactional_id=req.transactional_id, producer_id=int(req.producer_id),
                                   producer_epoch=int(req.producer_epoch), committed=bool(req.committed))
        tv2 = header.api_version >= TV2_END_TXN    # below v5: a TV1 client, which expects no epoch bump
        try:
            r = self.s.coordinator.end_txn(pb, epoch_bump=tv2)
        except Exception:  # noqa: BLE001 - a bug must not take the coordinator down
            log.exception("EndTxn failed")
            r = txn_pb2.EndTxnResponse(error=E.UNKNOWN_SERVER_ERROR, producer_id=-1, producer_epoch=-1)
        out = {"error_code": fenced_error(r.error, header.api_version, 2)}
        if tv2:
            ok = r.error == E.NONE
            out.update(producer_id=r.producer_id if ok else -1, producer_epoch=r.producer_epoch if ok else -1)
        return out
