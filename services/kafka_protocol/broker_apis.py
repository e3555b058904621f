"""BrokerApis: a broker's Kafka requests, each translated to the call its gRPC servicer makes.

Guarantees: Produce and Fetch carry Kafka's v2 record batches, converted to
and from the lab's batches in one place (eoslab.common.kafka_records); a
partition whose batch does not decode gets Kafka's error for that partition
(CORRUPT_MESSAGE, INVALID_RECORD, UNSUPPORTED_COMPRESSION_TYPE) and the
rest of the request proceeds; Produce v3+ takes exactly one batch per
partition as Kafka does. acks=0 gets no response; the broker's lost-ACK
fault drops the response after the append, as on gRPC. Fetch honours the
isolation level: read_committed stops at the last stable offset and carries
the aborted transactions of the range. Fetch sessions are not created
(session id 0): clients send full fetch requests. DescribeProducers,
WriteTxnMarkers from an admin client are txn_admin_apis' (KIP-664's
toolkit); the transaction coordinators' requests (InitProducerId with a
transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
DescribeTransactions, ListTransactions) are relayed to them (txn_relay.py).
Produce answers a KIP-890 verification's PRODUCER_FENCED as
INVALID_PRODUCER_EPOCH, as Kafka's produce path does; at Produce v12
(transaction.version 2) the leader has the transaction coordinator add a
partition that starts the producer's transaction, as the client sends no
AddPartitionsToTxn. Metadata naming an
unknown topic is answered by services.broker.auto_topic_creation (the
request's v4+ flag allows creation; before v4 it is always allowed); the
topic administration requests are topic_admin_apis'. Every request is
authorized as KafkaApis authorizes it (auth_helper; docs/kafka-protocol.md,
"Authorization"): with no authorizer everything is allowed.
"""
from __future__ import annotations

import logging

from eoslab.common import kafka_records as kr, legacy_records
from eoslab.v1 import broker_pb2
from eoslab.common import auth
from eoslab.common.topics import topic_id_text
from services.broker.auto_topic_creation import unknown_topics
from services.kafka_protocol import apis
from services.kafka_protocol.acl_apis import authorized_operations
from services.kafka_protocol.apis import ApiHandlers, Dropped, ms
from services.kafka_protocol.auth_helper import AuthHelper
from eoslab.common import acl
from services.kafka_protocol.endpoints import KafkaEndpoints
from services.kafka_protocol.topic_admin_apis import TopicAdminApis
from services.kafka_protocol.listener import NO_RESPONSE

E = apis.E
log = logging.getLogger(__name__)

PRODUCE, FETCH, LIST_OFFSETS, CREATE_TOPICS, INIT_PRODUCER_ID, OFFSET_FOR_LEADER_EPOCH = 0, 1, 2, 19, 22, 23
CREATE_PARTITIONS, DELETE_TOPICS, DELETE_RECORDS, DESCRIBE_CLUSTER = 37, 20, 21, 60
BROKER_ENDPOINT = 1              # DescribeCluster v1's endpoint_type: brokers (2: KRaft controllers)
FETCH_MAX_BYTES = 57671680   # Kafka's broker fetch.max.bytes default: no Fetch answer is larger (but one batch)
VERSIONS = {DESCRIBE_CLUSTER: (0, 1), DELETE_RECORDS: (0, 2), apis.METADATA: (0, 12), CREATE_TOPICS: (0, 7), CREATE_PARTITIONS: (0, 3), DELETE_TOPICS: (0, 6), PRODUCE: (0, 12), FETCH: (0, 12), LIST_OFFSETS: (0, 7),
            OFFSET_FOR_LEADER_EPOCH: (2, 4), apis.FIND_COORDINATOR: (0, 4), INIT_PRODUCER_ID: (0, 5)}


class BrokerApis(TopicAdminApis, ApiHandlers):
    def __init__(self, server, service):
        super().__init__()
        self.s = server            # KafkaServer
        self.svc = service         # BrokerService: the gRPC servicer's methods
        self.rm = server.replica_manager
        self.authorizer = getattr(server, "authorizer", None)     # None: no authorizer.class.name
        self.auth = AuthHelper(self.authorizer)
        self.endpoints = KafkaEndpoints(server.zk)
        for key, fn in ((apis.METADATA, self.metadata), (CREATE_TOPICS, self.create_topics),
                        (CREATE_PARTITIONS, self.create_partitions), (DELETE_TOPICS, self.delete_topics),
                        (DELETE_RECORDS, self.delete_records), (DESCRIBE_CLUSTER, self.describe_cluster),
                        (PRODUCE, self.produce),
                        (FETCH, self.fetch), (LIST_OFFSETS, self.list_offsets),
                        (OFFSET_FOR_LEADER_EPOCH, self.offset_for_leader_epoch),
                        (apis.FIND_COORDINATOR, self.find_coordinator), (INIT_PRODUCER_ID, self.init_producer_id)):
            self.register(key, *VERSIONS[key], fn)
        from services.kafka_protocol.group_apis import register_group_apis
        from services.kafka_protocol.txn_admin_apis import register_broker
        from services.kafka_protocol.config_apis import register_config_apis
        register_group_apis(self)
        from services.kafka_protocol.consumer_group_apis import register_consumer_group_apis
        register_consumer_group_apis(self, getattr(server, "kafka_version", None))
        register_broker(self)
        register_config_apis(self)
        from services.kafka_protocol.acl_apis import register_acl_apis
        register_acl_apis(self)
        from services.kafka_protocol.scram_apis import register_scram_apis
        register_scram_apis(self)
        from services.kafka_protocol.coordinator_apis import RELAYED_VERSIONS
        from services.kafka_protocol.txn_relay import register_txn_relay
        self.txn = register_txn_relay(self, RELAYED_VERSIONS)
        self.limit_to_release(getattr(server, "kafka_version", None))

    # -- metadata and topics ----------------------------------------------------------------------
    def metadata(self, header, req) -> dict:
        topics = apis.metadata_topics(header, req)
        by_id = topics is not None and any(n is None for n in topics)
        unknown_ids = []
        if by_id:       # v10+ may name topics by id (librdkafka does for a KIP-848 assignment); never created
            topics = []
            for t in req.topics:
                name = t.name or self.s.metadata.topic_name(topic_id_text(t.topic_id))
                if name:
                    topics.append(name)
                else:
                    unknown_ids.append(t.topic_id)
        hidden: list[str] = []                # named, but not DESCRIBE-authorized: TOPIC_AUTHORIZATION_FAILED
        if topics:
            described = self.auth.authorized(acl.DESCRIBE, acl.TOPIC, topics)
            hidden = [n for n in dict.fromkeys(topics) if n not in described]
            topics = [n for n in topics if n in described]
        if topics is None:
            resp = self.s.metadata.metadata([])   # the lab's empty list: every topic
            seen = self.auth.authorized(acl.DESCRIBE, acl.TOPIC, [t.name for t in resp.topics])
            kept = [t for t in resp.topics if t.name in seen]     # KafkaApis: all topics, filtered by DESCRIBE
            del resp.topics[:]
            resp.topics.extend(kept)
        elif not topics:
            resp = broker_pb2.MetadataResponse(brokers=list(self.s.metadata.metadata([]).brokers))
        else:
            resp = self.s.metadata.metadata(topics)
            allow = bool(getattr(req, "allow_auto_topic_creation", True)) and not by_id   # v0-v3: always allowed
            unknown = [t.name for t in resp.topics if t.error == E.UNKNOWN_TOPIC_OR_PARTITION]
            allow = allow and (self.auth.authorize_cluster(acl.CREATE) or
                               len(self.auth.authorized(acl.CREATE, acl.TOPIC, unknown)) == len(set(unknown)))
            self._unknown_topics(resp, allow and getattr(self.s, "auto_create_topics_enable", True))
        out = apis.metadata_values(resp, self.endpoints, self.s.broker_id)
        out["topics"] += [{"error_code": E.TOPIC_AUTHORIZATION_FAILED, "name": n, "topic_id": None,
                           "is_internal": False, "partitions": []} for n in hidden]
        out["topics"] += [{"error_code": E.UNKNOWN_TOPIC_ID, "name": None, "topic_id": u, "is_internal": False,
                           "partitions": []} for u in unknown_ids]
        for t in out["topics"]:            # v8+: asked for, what the authorizer allows on each
            t["topic_authorized_operations"] = authorized_operations(
                "topic", bool(getattr(req, "include_topic_authorized_operations", False)), authorizer=self.authorizer,
                name=t["name"] or "")
        if 8 <= header.api_version <= 10:
            out["cluster_authorized_operations"] = authorized_operations(
                "cluster", bool(getattr(req, "include_cluster_authorized_operations", False)),
                authorizer=self.authorizer)
        return out

    def describe_cluster(self, header, req) -> dict:
        """KIP-700: the cluster id, the brokers at their Kafka listeners, and as controller the broker that
        forwards controller requests (this one, as Metadata names it: KRaft's brokers name a broker too)."""
        ops = authorized_operations("cluster", bool(req.include_cluster_authorized_operations),
                                    authorizer=self.authorizer)
        out = {"error_code": E.NONE, "error_message": None, "endpoint_type": BROKER_ENDPOINT,
               "cluster_id": apis.CLUSTER_ID, "cluster_authorized_operations": ops}
        if header.api_version >= 1 and int(req.endpoint_type) != BROKER_ENDPOINT:
            return {**out, "error_code": E.MISMATCHED_ENDPOINT_TYPE, "controller_id": -1, "brokers": [],
                    "error_message": "The request was sent to an endpoint of type BROKER, but we wanted an "
                                     "endpoint of type CONTROLLER"}
        md = apis.metadata_values(broker_pb2.MetadataResponse(brokers=list(self.s.metadata.metadata([]).brokers)),
                                  self.endpoints, self.s.broker_id)
        return {**out, "controller_id": md["controller_id"],
                "brokers": [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"]}
                            for b in md["brokers"]]}

    def _unknown_topics(self, resp: broker_pb2.MetadataResponse, auto_create: bool) -> None:
        unknown_topics(resp, auto_create, lambda pb: self.svc.create_topics(pb, 0.0),
                       getattr(self.s, "num_partitions", 1))

    # -- produce ----------------------------------------------------------------------------------
    def produce(self, header, req):
        pb = broker_pb2.ProduceRequest(correlation_id=header.correlation_id,
                                       transactional_id=req.transactional_id or "", acks=int(req.acks),
                                       timeout_ms=ms(apis.field(req, "timeout")),
                                       # KIP-890 part 2: a v12 producer (transaction.version 2) sends no
                                       # AddPartitionsToTxn; the leader has the coordinator add the partition
                                       add_partitions_to_txn=header.api_version >= 12)
        failed: dict[tuple[str, int], tuple[int, str]] = {}
        order: list[tuple[str, int]] = []
        txn_refused = bool(req.transactional_id) and not self.auth.authorize(acl.WRITE, acl.TRANSACTIONAL_ID,
                                                                             req.transactional_id)
        writable = self.auth.authorized(acl.WRITE, acl.TOPIC, [td.name for td in req.topic_data])
        for td in req.topic_data:
            for pd in td.partition_data:
                key = (td.name, int(pd.index))
                order.append(key)
                if txn_refused:                        # KafkaApis: the whole request, every partition
                    failed[key] = (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "")
                    continue
                if td.name not in writable:
                    failed[key] = (E.TOPIC_AUTHORIZATION_FAILED, "")
                    continue
                if td.name in auth.INTERNAL_TOPICS:    # Kafka: clients cannot append to internal topics
                    failed[key] = (E.INVALID_TOPIC_EXCEPTION, f"cannot append to internal topic {td.name}")
                    continue
                try:
                    data = bytes(pd.records or b"")
                    if header.api_version < 3 and legacy_records.magic_of(data) in (0, 1):
                        # message format v0/v1 (Produce v0-v2): up-converted to one batch, as Kafka stores it
                        pb.partitions.add(topic=td.name, partition=key[1],
                                          batch=legacy_records.to_lab(legacy_records.decode_message_set(data)))
                        continue
                    # the records are read once, where the partition validates the batch
                    batches = kr.decode_batches(data, read_records=False)
                    if len(batches) != 1:
                        raise kr.BatchFormatError(E.INVALID_RECORD,
                                                  f"{len(batches)} record batches: exactly one is allowed")
                    pb.partitions.add(topic=td.name, partition=key[1], batch=kr.to_lab(batches[0]))
                except kr.BatchFormatError as e:
                    failed[key] = (e.code, str(e))
        results = {}
        dropped = False
        if pb.partitions:
            resp = self.svc._produce(pb)
            results = {(r.topic, r.partition): r for r in resp.partitions}
            dropped = self.s.faults.should_drop(pb)
        if pb.acks == 0:
            return NO_RESPONSE
        by_topic: dict[str, list] = {}
        for key in order:
            if key in failed:
                code, msg = failed[key]
                part = {"index": key[1], "error_code": code, "base_offset": -1, "error_message": msg or None}
            else:
                r = results[key]
                # AddPartitionsToTxnManager: a KIP-890 verification's PRODUCER_FENCED reaches the producer
                # as INVALID_PRODUCER_EPOCH on the produce path (the lab's gRPC producers keep the former)
                err = E.INVALID_PRODUCER_EPOCH if r.error == E.PRODUCER_FENCED else r.error
                part = {"index": key[1], "error_code": err, "base_offset": r.base_offset,
                        "log_append_time_ms": r.log_append_time if err == E.NONE else -1,
                        "log_start_offset": r.log_start_offset if err == E.NONE else -1,
                        "error_message": r.error_message or None,
                        "record_errors": [{"batch_index": e.batch_index, "batch_index_error_message": e.message}
                                          for e in r.record_errors]}
            by_topic.setdefault(key[0], []).append(part)
        values = {"responses": [{"name": t, "partition_responses": ps} for t, ps in by_topic.items()]}
        return Dropped(values) if dropped else values

    # -- fetch ------------------------------------------------------------------------------------
    def fetch(self, header, req) -> dict:
        committed = int(getattr(req, "isolation_level", 0)) == 1
        asked = int(getattr(req, "max_bytes", 0)) or FETCH_MAX_BYTES      # v0-v2 have none: Kafka's cap
        pb = broker_pb2.FetchRequest(replica_id=-1, max_wait_ms=ms(apis.field(req, "max_wait")), min_bytes=int(req.min_bytes),
                                     max_bytes=max(1, min(asked, FETCH_MAX_BYTES)),
                                     isolation_level=broker_pb2.READ_COMMITTED if committed
                                     else broker_pb2.READ_UNCOMMITTED,
                                     client_metadata=header.api_version >= 11,     # KIP-392 (KafkaApis)
                                     rack_id=str(getattr(req, "rack_id", "") or ""))
        wanted: dict[tuple[str, int], object] = {}     # Kafka's fetchData map: a partition named twice is one
        for t in req.topics:                           # entry, in its first place, with its last values
            for p in t.partitions:
                wanted[(t.topic, int(p.partition))] = p
        readable = self.auth.authorized(acl.READ, acl.TOPIC, [t for t, _ in wanted])
        for (topic, partition), p in wanted.items():
            if topic in readable:
                pb.partitions.add(topic=topic, partition=partition, fetch_offset=int(p.fetch_offset),
                                  current_leader_epoch=int(getattr(p, "current_leader_epoch", -1)),
                                  partition_max_bytes=int(p.partition_max_bytes))
        resp = self.svc.Fetch(pb, None) if pb.partitions else broker_pb2.FetchResponse()
        by_topic: dict[str, list] = {}
        for topic, partition in wanted:                # KafkaApis: unauthorized partitions answered first
            if topic not in readable:
                by_topic.setdefault(topic, []).append({
                    "partition_index": partition, "error_code": E.TOPIC_AUTHORIZATION_FAILED, "high_watermark": -1,
                    "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
                    "preferred_read_replica": -1, "records": b""})
        magic = 2 if header.api_version >= 4 else 1 if header.api_version >= 2 else 0
        for r in resp.partitions:
            error, records = r.error, self._fetched_records(r.batches, magic)
            if records is None:        # Kafka does not down-convert zstd for a consumer before Fetch v10
                error, records = kr.UNSUPPORTED_COMPRESSION_TYPE, b""
            by_topic.setdefault(r.topic, []).append({
                "partition_index": r.partition, "error_code": error, "high_watermark": r.high_watermark,
                "last_stable_offset": r.last_stable_offset, "log_start_offset": r.log_start_offset,
                "aborted_transactions": [{"producer_id": a.producer_id, "first_offset": a.first_offset}
                                         for a in r.aborted_transactions] if committed else None,
                "preferred_read_replica": r.preferred_read_replica if r.HasField("preferred_read_replica") else -1,
                "records": records})
        return {"error_code": E.NONE, "session_id": 0,
                "responses": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]}

    @staticmethod
    def _fetched_records(batches, magic: int) -> bytes | None:
        """The records of a Fetch answer in the format the version reads: v2 batches from Fetch v4, else
        down-converted to magic 1 (v2-v3) or 0 (v0-v1); None when a batch cannot be down-converted."""
        if magic == 2:
            return b"".join(kr.to_kafka(b) for b in batches)
        if not all(legacy_records.can_down_convert(b) for b in batches):
            return None
        return legacy_records.encode_message_set(batches, magic)

    def list_offsets(self, header, req) -> dict:
        if header.api_version == 0:
            return self._list_offsets_v0(req)
        pb = broker_pb2.ListOffsetsRequest(isolation_level=broker_pb2.READ_COMMITTED
                                           if int(getattr(req, "isolation_level", 0)) == 1
                                           else broker_pb2.READ_UNCOMMITTED)
        described = self.auth.authorized(acl.DESCRIBE, acl.TOPIC, [t.name for t in req.topics])
        by_topic: dict[str, list] = {}
        for t in req.topics:
            for p in t.partitions:
                if t.name in described:
                    pb.partitions.add(topic=t.name, partition=int(p.partition_index), timestamp=int(p.timestamp))
                else:
                    by_topic.setdefault(t.name, []).append({
                        "partition_index": int(p.partition_index), "error_code": E.TOPIC_AUTHORIZATION_FAILED,
                        "timestamp": -1, "offset": -1, "leader_epoch": -1})
        resp = self.rm.list_offsets(pb)
        for r in resp.partitions:
            by_topic.setdefault(r.topic, []).append({
                "partition_index": r.partition, "error_code": r.error,
                "timestamp": r.timestamp if r.error == E.NONE else -1, "offset": r.offset,
                "leader_epoch": r.leader_epoch if r.error == E.NONE else -1})
        return {"topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}

    def _list_offsets_v0(self, req) -> dict:
        """Before KIP-79: a list of segment base offsets at or before a time (ReplicaManager)."""
        described = self.auth.authorized(acl.DESCRIBE, acl.TOPIC, [t.name for t in req.topics])
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                if t.name not in described:
                    code, offsets = E.TOPIC_AUTHORIZATION_FAILED, []
                elif int(p.max_num_offsets) < 0:
                    code, offsets = E.INVALID_REQUEST, []
                else:
                    code, offsets = self.rm.legacy_offsets_before(t.name, int(p.partition_index), int(p.timestamp),
                                                                  int(p.max_num_offsets), int(req.replica_id) == -1)
                parts.append({"partition_index": int(p.partition_index), "error_code": code,
                              "old_style_offsets": offsets})
            topics.append({"name": t.name, "partitions": parts})
        return {"topics": topics}

    def offset_for_leader_epoch(self, header, req) -> dict:
        pb = broker_pb2.OffsetsForLeaderEpochRequest(replica_id=int(getattr(req, "replica_id", -2)))
        for t in req.topics:
            for p in t.partitions:
                pb.partitions.add(topic=t.topic, partition=int(p.partition),
                                  current_leader_epoch=int(p.current_leader_epoch), leader_epoch=int(p.leader_epoch))
        resp = self.rm.offsets_for_leader_epoch(pb)
        by_topic: dict[str, list] = {}
        for r in resp.partitions:
            by_topic.setdefault(r.topic, []).append({"error_code": r.error, "partition": r.partition,
                                                     "leader_epoch": r.leader_epoch, "end_offset": r.end_offset})
        return {"topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]}

    # -- coordinators and producer ids ---------------------------------------------------------------
    def find_coordinator(self, header, req) -> dict:
        return apis.find_coordinator(header, req, self.s.find_coordinator, self.endpoints, self.txn.txn_leader,
                                     self._coordinator_refused)

    def _coordinator_refused(self, key_type: int, key: str) -> int | None:
        """KafkaApis: DESCRIBE on the group (key type 0) or the transactional id (1)."""
        if key_type == 1:
            ok = self.auth.authorize(acl.DESCRIBE, acl.TRANSACTIONAL_ID, key)
            return None if ok else E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return None if self.auth.authorize(acl.DESCRIBE, acl.GROUP, key) else E.GROUP_AUTHORIZATION_FAILED

    def init_producer_id(self, header, req) -> dict:
        """The idempotent producer's (a transactional one's is relayed): IDEMPOTENT_WRITE on the cluster,
        or WRITE that some topic may allow (KIP-679), else CLUSTER_AUTHORIZATION_FAILED."""
        if not req.transactional_id and not (self.auth.authorize_cluster(acl.IDEMPOTENT_WRITE) or
                                             self.auth.authorize_by_resource_type(acl.WRITE, acl.TOPIC)):
            return {"error_code": E.CLUSTER_AUTHORIZATION_FAILED, "producer_id": -1, "producer_epoch": -1}
        pb = broker_pb2.InitProducerIdRequest(transactional_id=req.transactional_id or "",
                                              transaction_timeout_ms=ms(req.transaction_timeout))
        r = self.svc.InitProducerId(pb, None)
        return {"error_code": r.error, "producer_id": r.producer_id, "producer_epoch": r.producer_epoch}
