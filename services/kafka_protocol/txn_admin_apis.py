"""The operator's transaction APIs over Kafka's protocol (KIP-664): DescribeProducers and WriteTxnMarkers on
brokers, DescribeTransactions and ListTransactions on transaction coordinators (which brokers relay them
to: txn_relay.py).

Guarantees, each Kafka's rule:
- DescribeProducers is answered by any replica, leader or follower, from its
  own producer state (ReplicaManager.activeProducerState);
  NOT_LEADER_OR_FOLLOWER only when this broker hosts no replica of a partition
  the cluster has, UNKNOWN_TOPIC_OR_PARTITION when the cluster has none;
- DescribeProducers needs READ on each topic (TOPIC_AUTHORIZATION_FAILED);
- WriteTxnMarkers from a client is served on the Kafka listener (Kafka
  authorizes it as CLUSTER_ACTION on the cluster, which passes when no
  authorizer is configured; every partition CLUSTER_AUTHORIZATION_FAILED
  otherwise), so an admin client can abort a hanging
  transaction; it takes the same in-process path the coordinator's markers
  take (leader only, acks=all, producer and coordinator epochs checked). The
  lab's gRPC WriteTxnMarkers stays restricted to cluster members; a
  transaction coordinator hosts no partition and answers every partition
  UNKNOWN_TOPIC_OR_PARTITION, as a Kafka broker without the replica does;
- DescribeTransactions (TransactionCoordinator.handleDescribeTransactions):
  per id NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS for a partition not
  owned or still loading, INVALID_REQUEST for an empty id,
  TRANSACTIONAL_ID_NOT_FOUND for an unknown or Dead one, else its state,
  producer id and epoch, timeout, start time (-1 before its first
  transaction) and partitions;
- ListTransactions (TransactionStateManager.listTransactionStates):
  COORDINATOR_LOAD_IN_PROGRESS while a partition loads; Dead ids never
  listed; state and producer-id filters; from v1 the KIP-994 duration filter
  (>= 0: only transactions whose start is more than that many ms ago, on the
  coordinator's clock); unknown state names are reported.
"""
from __future__ import annotations

from eoslab.common import acl
from eoslab.common.errors import E
from eoslab.v1 import broker_pb2, common_pb2

DESCRIBE_PRODUCERS, WRITE_TXN_MARKERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 27, 65, 66
BROKER_VERSIONS = {DESCRIBE_PRODUCERS: (0, 0), WRITE_TXN_MARKERS: (1, 2)}
COORDINATOR_VERSIONS = {WRITE_TXN_MARKERS: (1, 2), DESCRIBE_TRANSACTIONS: (0, 0), LIST_TRANSACTIONS: (0, 1)}
TXN_STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
              "PrepareEpochFence")


# -- brokers ----------------------------------------------------------------------------------------------
def register_broker(apis) -> None:
    rm = apis.rm

    def describe_producers(header, req) -> dict:
        topics = []
        readable = apis.auth.authorized(acl.READ, acl.TOPIC, [t.name for t in req.topics])
        for t in req.topics:
            parts = []
            for i in t.partition_indexes:
                if t.name not in readable:              # KafkaApis: READ on the topic
                    parts.append({"partition_index": int(i), "error_code": E.TOPIC_AUTHORIZATION_FAILED,
                                  "active_producers": []})
                    continue
                err, entries = rm.active_producer_state(t.name, int(i))
                parts.append({"partition_index": int(i), "error_code": err, "active_producers": [
                    {"producer_id": e.producer_id, "producer_epoch": e.producer_epoch,
                     "last_sequence": e.last_seq, "last_timestamp": e.last_timestamp,
                     "coordinator_epoch": e.coordinator_epoch,
                     "current_txn_start_offset": -1 if e.current_txn_first_offset is None
                     else e.current_txn_first_offset} for e in entries]})
            topics.append({"name": t.name, "partitions": parts})
        return {"topics": topics}

    def write_txn_markers(header, req) -> dict:
        if not apis.auth.authorize_cluster(acl.CLUSTER_ACTION):     # KafkaApis: the whole request refused
            return {"markers": [{"producer_id": int(m.producer_id), "topics": [
                {"name": t.name, "partitions": [{"partition_index": int(p),
                                                 "error_code": E.CLUSTER_AUTHORIZATION_FAILED}
                                                for p in t.partition_indexes]} for t in m.topics]}
                for m in req.markers]}
        pb = broker_pb2.WriteTxnMarkersRequest()
        for m in req.markers:
            pb.markers.add(producer_id=int(m.producer_id), producer_epoch=int(m.producer_epoch),
                           committed=bool(m.transaction_result), coordinator_epoch=int(m.coordinator_epoch),
                           partitions=[common_pb2.TopicPartition(topic=t.name, partition=int(p))
                                       for t in m.topics for p in t.partition_indexes])
        resp = rm.write_txn_markers(pb)
        markers = []
        for mr in resp.markers:
            by_topic: dict[str, list] = {}
            for r in mr.partitions:
                by_topic.setdefault(r.topic, []).append({"partition_index": r.partition, "error_code": r.error})
            markers.append({"producer_id": mr.producer_id,
                            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]})
        return {"markers": markers}

    for key, fn in ((DESCRIBE_PRODUCERS, describe_producers), (WRITE_TXN_MARKERS, write_txn_markers)):
        apis.register(key, *BROKER_VERSIONS[key], fn)


def _not_described(tid: str, err: int) -> dict:
    return {"error_code": err, "transactional_id": tid, "transaction_state": "", "transaction_timeout": 0,
            "transaction_start_time": -1, "producer_id": -1, "producer_epoch": -1, "topics": []}


# -- transaction coordinators ---------------------------------------------------------------------------------
def register_coordinator(apis) -> None:
    coordinator = apis.s.coordinator
    tsm = apis.s.tsm

    def describe_transactions(header, req) -> dict:
        out = []
        for tid in req.transactional_ids:
            if not tid:
                out.append(_not_described(tid, E.INVALID_REQUEST))
                continue
            err, op = tsm.owner_of(tid)
            md = op.cache.get(tid) if err == E.NONE else None
            if err != E.NONE:
                out.append(_not_described(tid, err))
                continue
            if md is None:
                out.append(_not_described(tid, E.TRANSACTIONAL_ID_NOT_FOUND))
                continue
            with md.lock:
                if md.state.value == "Dead":   # being expired: as if gone
                    out.append(_not_described(tid, E.TRANSACTIONAL_ID_NOT_FOUND))
                    continue
                by_topic: dict[str, list] = {}
                for t, p in sorted(md.partitions):
                    by_topic.setdefault(t, []).append(p)
                out.append({"error_code": E.NONE, "transactional_id": tid, "transaction_state": md.state.value,
                            "transaction_timeout": md.txn_timeout_ms, "transaction_start_time": md.txn_start_ms,
                            "producer_id": md.producer_id, "producer_epoch": md.producer_epoch,
                            "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]})
        return {"transaction_states": out}

    def list_transactions(header, req) -> dict:
        states = set(req.state_filters)
        unknown = sorted(states - set(TXN_STATES))
        pids = {int(p) for p in req.producer_id_filters}
        duration = int(getattr(req, "duration_filter", -1))    # v1+ (KIP-994)
        with tsm.lock:
            if any(op.loading for op in tsm.owned.values()):
                return {"error_code": E.COORDINATOR_LOAD_IN_PROGRESS, "unknown_state_filters": unknown,
                        "transaction_states": []}
        now = coordinator.time.milliseconds()
        out = []
        for op in tsm.all_owned():
            for md in list(op.cache.values()):
                with md.lock:
                    state = md.state.value
                    if state == "Dead" or (pids and md.producer_id not in pids) or (states and state not in states):
                        continue
                    if duration >= 0 and now - md.txn_start_ms <= duration:
                        continue
                    out.append({"transactional_id": md.transactional_id, "producer_id": md.producer_id,
                                "transaction_state": state})
        return {"error_code": E.NONE, "unknown_state_filters": unknown, "transaction_states": out}

    def write_txn_markers(header, req) -> dict:
        return {"markers": [{"producer_id": int(m.producer_id), "topics": [
            {"name": t.name, "partitions": [{"partition_index": int(i), "error_code": E.UNKNOWN_TOPIC_OR_PARTITION}
                                            for i in t.partition_indexes]} for t in m.topics]} for m in req.markers]}

    for key, fn in ((WRITE_TXN_MARKERS, write_txn_markers), (DESCRIBE_TRANSACTIONS, describe_transactions),
                    (LIST_TRANSACTIONS, list_transactions)):
        apis.register(key, *COORDINATOR_VERSIONS[key], fn)
