"""TxnRelay: a broker's Kafka listener serves the transaction coordinators' requests, so Kafka clients
see brokers only, as in Kafka, where the coordinator of a transactional id is the broker that leads the
id's __transaction_state partition.

The lab's transaction coordinators are processes of their own. A broker that leads a
__transaction_state partition relays the requests of its ids to the coordinator that owns that
partition, over the coordinator's Kafka listener.

Guarantees:
- FindCoordinator(TRANSACTION) names the broker that leads the id's __transaction_state partition,
  and only while a coordinator owns that partition (COORDINATOR_NOT_AVAILABLE otherwise), as Kafka's
  FindCoordinator names the partition's leader;
- InitProducerId with a transactional id, AddPartitionsToTxn (v0-3, the clients' versions),
  AddOffsetsToTxn and EndTxn: at a broker that does not lead the id's partition the answer is
  NOT_COORDINATOR, as Kafka's; at one with no coordinator or no connection to it,
  COORDINATOR_NOT_AVAILABLE (clients look the coordinator up again either way). Otherwise the request
  frame goes unchanged to the owning coordinator and its answer comes back unchanged (correlation id
  included). A connection closed before the answer (the coordinator died, or its lost-ACK fault) closes
  the client's connection the same way, so the client sees what it would see from Kafka's coordinator;
- DescribeTransactions: each id is answered by its owning coordinator, NOT_COORDINATOR for an id whose
  partition this broker does not lead; ListTransactions lists the transactions of the ids whose
  partitions this broker leads, as Kafka's broker lists those of the partitions it coordinates;
- an idempotent InitProducerId (no transactional id) stays the broker's own (BrokerApis).
"""
from __future__ import annotations

import logging
import socket
import struct

from eoslab.common import acl
from eoslab.common.errors import E
from eoslab.v1 import broker_pb2
from services.common import internal_topics as it
from services.kafka_protocol import codec
from services.kafka_protocol.auth_helper import AuthHelper
from services.kafka_protocol.forwarding import recv_exactly
from services.kafka_protocol.listener import DROP_RESPONSE
from services.kafka_protocol.txn_admin_apis import _not_described

log = logging.getLogger(__name__)
INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN = 22, 24, 25, 26
DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 65, 66
RELAY_TIMEOUT_S = 30.0       # Kafka clients' request.timeout.ms: a longer wait is one they gave up on
_SIZE = struct.Struct(">i")


class CoordinatorGone(ConnectionError):
    """The coordinator closed the connection before it answered."""


class TxnRelay:
    def __init__(self, server, endpoints, versions: dict[int, tuple[int, int]]):
        self.s = server                 # KafkaServer: find_coordinator, metadata, broker_id
        self.endpoints = endpoints
        self.versions = versions

    # -- where an id's requests go ------------------------------------------------------------------
    def txn_leader(self, partition: int) -> int:
        """The broker that leads __transaction_state-<partition> (-1: none)."""
        with self.s.metadata.lock:
            st = self.s.metadata.partitions.get(it.TRANSACTION_STATE_TOPIC, {}).get(partition)
            return st.leader if st is not None else -1

    def owner(self, transactional_id: str) -> tuple[int, tuple[str, int] | None, int]:
        """(error, the owning coordinator's Kafka address, the id's partition): NOT_COORDINATOR when this
        broker does not lead the partition, COORDINATOR_NOT_AVAILABLE when no coordinator owns it."""
        fc = self.s.find_coordinator(broker_pb2.FindCoordinatorRequest(key_type=broker_pb2.TRANSACTION,
                                                                       key=transactional_id))
        if fc.partition >= 0 and self.txn_leader(fc.partition) != self.s.broker_id:
            return E.NOT_COORDINATOR, None, fc.partition
        if fc.error != 0:
            return fc.error, None, fc.partition
        ep = self.endpoints.coordinator(fc.node_id)
        if ep is None:
            return E.COORDINATOR_NOT_AVAILABLE, None, fc.partition
        return 0, ep, fc.partition

    # -- the relay ----------------------------------------------------------------------------------
    def send(self, ep: tuple[str, int], frame: bytes) -> bytes:
        """The coordinator's whole answer frame (size prefix included); OSError when it cannot be reached,
        CoordinatorGone when it closed the connection without answering."""
        with socket.create_connection(ep, timeout=RELAY_TIMEOUT_S) as s:
            s.sendall(_SIZE.pack(len(frame)) + frame)
            head = _recv(s, 4)
            return head + _recv(s, _SIZE.unpack(head)[0])

    def relay_one(self, frame: bytes, header, transactional_id: str | None):
        """The answer to a request of one transactional id: the coordinator's frame, DROP_RESPONSE, or
        {"error": code} for the handler to answer."""
        if not transactional_id:
            return None
        err, ep, _ = self.owner(transactional_id)
        if err != 0:
            return {"error": err}
        try:
            return self.send(ep, frame)
        except CoordinatorGone:
            log.info("API %d for %r: the coordinator at %s:%d closed the connection unanswered",
                     header.api_key, transactional_id, *ep)
            return DROP_RESPONSE
        except OSError as e:
            log.info("API %d for %r: coordinator at %s:%d unreachable: %r", header.api_key, transactional_id,
                     *ep, e)
            return {"error": E.COORDINATOR_NOT_AVAILABLE}

    def ask(self, ep: tuple[str, int], frame: bytes, header):
        """A coordinator's decoded answer to `frame`, or None when it gave none."""
        try:
            return codec.parse_response(self.send(ep, frame), header.api_key, header.api_version)
        except (OSError, ValueError) as e:
            log.info("API %d: coordinator at %s:%d gave no answer: %r", header.api_key, *ep, e)
            return None


def _recv(s, n: int) -> bytes:
    return recv_exactly(s, n, CoordinatorGone, "the coordinator")


# -- the handlers on a broker's ApiHandlers -------------------------------------------------------------
def register_txn_relay(apis, versions: dict[int, tuple[int, int]]) -> TxnRelay:
    """Serve the coordinators' APIs on a broker: `versions` are the coordinators' (cut to the release
    later, with every other API)."""
    relay = TxnRelay(apis.s, apis.endpoints, versions)
    own_init = apis.handlers[INIT_PRODUCER_ID][2]        # the broker's idempotent InitProducerId

    def txn_id(key, req):
        if key == ADD_PARTITIONS_TO_TXN:
            return req.v3_and_below_transactional_id
        return req.transactional_id

    def raw(frame, header, req):
        tid = txn_id(header.api_key, req)
        if tid:
            refused_answer = authorization_refused(apis.auth, header, req, tid)
            if refused_answer is not None:
                return refused_answer
        out = relay.relay_one(frame, header, tid)
        return error_answer(header, req, out["error"]) if isinstance(out, dict) else out

    def init_producer_id(header, req):
        return own_init(header, req)         # reached only without a transactional id (raw relays the rest)

    def refused(header, req):                # reached only when raw gave nothing: no id
        return error_answer(header, req, E.INVALID_REQUEST)

    apis.register(INIT_PRODUCER_ID, *versions[INIT_PRODUCER_ID], init_producer_id)
    for key in (ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN):
        apis.register(key, *versions[key], refused)
    for key in (INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN):
        apis.raw[key] = raw
    apis.register(DESCRIBE_TRANSACTIONS, *versions[DESCRIBE_TRANSACTIONS],
                  lambda header, req: describe_transactions(relay, header, req, auth=apis.auth))
    apis.raw[DESCRIBE_TRANSACTIONS] = lambda frame, header, req: describe_transactions(relay, header, req, frame,
                                                                                       apis.auth)
    apis.raw[LIST_TRANSACTIONS] = lambda frame, header, req: list_transactions(relay, header, req, frame, apis.auth)
    apis.register(LIST_TRANSACTIONS, *versions[LIST_TRANSACTIONS],
                  lambda header, req: {"error_code": 0, "unknown_state_filters": [], "transaction_states": []})
    return relay


def authorization_refused(auth, header, req, tid: str) -> dict | None:
    """KafkaApis' checks before a coordinator sees the request (None: allowed): WRITE on the
    transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); AddPartitionsToTxn WRITE on each topic
    (its partitions TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED); AddOffsetsToTxn
    READ on the group (GROUP_AUTHORIZATION_FAILED)."""
    if not auth.authorize(acl.WRITE, acl.TRANSACTIONAL_ID, tid):
        return error_answer(header, req, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if header.api_key == ADD_PARTITIONS_TO_TXN:
        names = [t.name for t in req.v3_and_below_topics]
        writable = auth.authorized(acl.WRITE, acl.TOPIC, names)
        if len(writable) != len(set(names)):
            return {"results_by_topic_v3_and_below": [
                {"name": t.name, "results_by_partition": [
                    {"partition_index": int(p), "partition_error_code":
                     E.OPERATION_NOT_ATTEMPTED if t.name in writable else E.TOPIC_AUTHORIZATION_FAILED}
                    for p in t.partitions]} for t in req.v3_and_below_topics]}
    if header.api_key == ADD_OFFSETS_TO_TXN and not auth.authorize(acl.READ, acl.GROUP, req.group_id):
        return error_answer(header, req, E.GROUP_AUTHORIZATION_FAILED)
    return None


def error_answer(header, req, err: int) -> dict:
    """Kafka's answer to a coordinator request refused with `err`."""
    key = header.api_key
    if key == INIT_PRODUCER_ID:
        return {"error_code": err, "producer_id": -1, "producer_epoch": -1}
    if key == ADD_PARTITIONS_TO_TXN:
        return {"results_by_topic_v3_and_below": [
            {"name": t.name, "results_by_partition": [{"partition_index": int(p), "partition_error_code": err}
                                                      for p in t.partitions]}
            for t in req.v3_and_below_topics]}
    if key == END_TXN and header.api_version >= 5:
        return {"error_code": err, "producer_id": -1, "producer_epoch": -1}
    return {"error_code": err}


def _entry(state) -> dict:
    return {"error_code": int(state.error_code), "transactional_id": state.transactional_id,
            "transaction_state": state.transaction_state,
            "transaction_timeout": int(state.transaction_timeout.total_seconds() * 1000),
            "transaction_start_time": _millis(state.transaction_start_time),
            "producer_id": int(state.producer_id), "producer_epoch": int(state.producer_epoch),
            "topics": [{"topic": t.topic, "partitions": [int(p) for p in t.partitions]} for t in state.topics]}


def _millis(ts) -> int:
    return -1 if ts is None else int(ts.timestamp() * 1000)


def describe_transactions(relay: TxnRelay, header, req, frame: bytes | None = None, auth=None) -> dict:
    """Each id answered by its coordinator: the whole request goes to every coordinator that owns one of
    them (a coordinator answers NOT_COORDINATOR for the others), and each id's answer is its owner's; an
    id without DESCRIBE is answered TRANSACTIONAL_ID_AUTHORIZATION_FAILED."""
    auth = auth or AuthHelper()
    owners: dict[tuple[str, int], list[str]] = {}
    answers: dict[str, dict] = {}
    for tid in req.transactional_ids:
        if tid and not auth.authorize(acl.DESCRIBE, acl.TRANSACTIONAL_ID, tid):
            answers[tid] = _not_described(tid, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            continue
        err, ep, _ = relay.owner(tid) if tid else (E.INVALID_REQUEST, None, -1)
        if err != 0:
            answers[tid] = _not_described(tid, err)
        else:
            owners.setdefault(ep, []).append(tid)
    for ep, tids in owners.items():
        resp = relay.ask(ep, frame, header) if frame is not None else None
        got = {s.transactional_id: _entry(s) for s in resp.transaction_states} if resp is not None else {}
        for tid in tids:
            answers[tid] = got.get(tid) or _not_described(tid, E.COORDINATOR_NOT_AVAILABLE)
    return {"transaction_states": [answers[tid] for tid in req.transactional_ids]}


def list_transactions(relay: TxnRelay, header, req, frame: bytes, auth=None) -> dict:
    """The transactions of the ids whose __transaction_state partitions this broker leads (those with
    DESCRIBE on the id, as Kafka lists them)."""
    auth = auth or AuthHelper()
    with relay.s.metadata.lock:
        led = {p for p, st in relay.s.metadata.partitions.get(it.TRANSACTION_STATE_TOPIC, {}).items()
               if st.leader == relay.s.broker_id}
    count = len(relay.s.metadata.partitions.get(it.TRANSACTION_STATE_TOPIC, {}))
    coordinators = set()
    for p in sorted(led):
        owner = relay.s.txn_assignment.get(p)
        if owner is not None and owner.get("coordinator", -1) >= 0:
            coordinators.add(owner["coordinator"])
    states, unknown, error = [], [], 0
    for cid in sorted(coordinators):
        ep = relay.endpoints.coordinator(cid)
        resp = relay.ask(ep, frame, header) if ep is not None else None
        if resp is None:
            error = error or E.COORDINATOR_NOT_AVAILABLE
            continue
        if int(resp.error_code) != 0:
            error = error or int(resp.error_code)
            continue
        unknown = list(resp.unknown_state_filters)
        states += [{"transactional_id": s.transactional_id, "producer_id": int(s.producer_id),
                    "transaction_state": s.transaction_state}
                   for s in resp.transaction_states if it.partition_for(s.transactional_id, count) in led
                   and auth.authorize(acl.DESCRIBE, acl.TRANSACTIONAL_ID, s.transactional_id)]
    return {"error_code": error, "unknown_state_filters": unknown, "transaction_states": [] if error else states}
