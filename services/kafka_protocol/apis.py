"""ApiHandlers: dispatch of Kafka requests to per-API functions, ApiVersions, and Kafka's answer to
what is not served; Metadata and FindCoordinator answers shared by brokers and coordinators.

Guarantees: ApiVersions lists exactly the (API, version range) pairs that
have a handler, cut to what the emulated release served (`limit_to_release`),
and every request outside them is answered as Kafka does:
ApiVersions at a version not served gets a v0 response with
UNSUPPORTED_VERSION and the served list (the client then retries with a
version it finds there); any other API or version not served closes the
connection, as Kafka's SocketServer closes it (a request header whose API
and version are not enabled is an InvalidRequestException there).
Addresses in Metadata and FindCoordinator answers are Kafka listeners, never
gRPC ports; Metadata lists the brokers only (the transaction coordinators are reached through the
brokers that lead their __transaction_state partitions, txn_relay.py), and a node without a known
Kafka listener is left out (Metadata) or answered COORDINATOR_NOT_AVAILABLE (FindCoordinator).
"""
from __future__ import annotations

import copy
import dataclasses
import logging

from eoslab.v1 import broker_pb2
from services.kafka_protocol import codec, legacy_versions
from services.kafka_protocol.auth_helper import AuthHelper
from services.kafka_protocol.codec import MalformedRequest, UnsupportedVersion
from services.kafka_protocol.listener import DROP_RESPONSE, NO_RESPONSE
from eoslab.common.errors import E
from eoslab.common.topics import topic_id_uuid

log = logging.getLogger(__name__)
UNSUPPORTED_VERSION = 35
CLUSTER_AUTHORIZATION_FAILED = 31
# Kafka's inter-broker and controller APIs: the lab's services speak them over gRPC with the cluster's
# secret; a client sending one here is refused as Kafka refuses a principal without ClusterAction.
INTER_BROKER_APIS = {4: "LeaderAndIsr", 5: "StopReplica", 6: "UpdateMetadata", 7: "ControlledShutdown",
                     27: "WriteTxnMarkers", 52: "Vote", 53: "BeginQuorumEpoch", 54: "EndQuorumEpoch",
                     55: "DescribeQuorum", 56: "AlterPartition", 62: "BrokerRegistration",
                     63: "BrokerHeartbeat", 67: "AllocateProducerIds"}
CLUSTER_ID = "eoslab-cluster-0000000"   # 22 characters like Kafka's base64 UUIDs

API_VERSIONS, METADATA, FIND_COORDINATOR = 18, 3, 10
# The lab's hanging-transaction toolkit (`eoslab transactions`) works on every release's cluster, so
# KIP-664's APIs (WriteTxnMarkers from an admin, DescribeProducers, DescribeTransactions,
# ListTransactions; in Kafka from 2.8 / 3.0) keep the lab's ranges whatever --kafka-version says.
RELEASE_EXEMPT = frozenset({27, 61, 65, 66})
FINALIZED_FEATURES_EPOCH = 1    # the features are finalized once, when the cluster is made, and never change


class Dropped:
    """A handler's result whose response is lost on the connection (the lost-ACK fault)."""

    def __init__(self, values):
        self.values = values


def ms(value) -> int:
    """Milliseconds of a kio duration field (a timedelta) or a plain int."""
    return int(value.total_seconds() * 1000) if hasattr(value, "total_seconds") else int(value)


def field(req, name: str):
    """A duration field by kio's name (`timeout`, a timedelta) or by the schema's (`timeout_ms`), as the
    versions read through legacy_versions carry it."""
    value = getattr(req, name, None)
    return getattr(req, name + "_ms") if value is None else value


def replace(req, **changes):
    """A copy of request `req` with `changes`: a kio entity (a frozen dataclass) or a version read through
    legacy_versions (a kafka-python message)."""
    if dataclasses.is_dataclass(req):
        return dataclasses.replace(req, **changes)
    out = copy.copy(req)
    for name, value in changes.items():
        setattr(out, name, value)
    return out


def fenced_error(code: int, version: int, first_version: int) -> int:
    """PRODUCER_FENCED as a client at this version understands it: before KIP-588 (the version that
    introduced it, `first_version`) Kafka answers INVALID_PRODUCER_EPOCH instead."""
    return E.INVALID_PRODUCER_EPOCH if code == E.PRODUCER_FENCED and version < first_version else code


def int_error(code) -> int:
    return int(code.value) if hasattr(code, "value") else int(code)


class ApiHandlers:
    authorizer = None              # no authorizer.class.name: every request allowed (a broker sets its own)
    auth = AuthHelper()

    def __init__(self):
        self.handlers: dict[int, tuple[int, int, object]] = {API_VERSIONS: (0, 4, self.api_versions)}
        self.features: dict[str, tuple[int, int, int]] = {}     # limit_to_release: name -> (min, max, level)
        # API key -> (frame, header, request) -> the whole response frame, DROP_RESPONSE, an answer (a dict),
        # or None to fall back on the handler (forwarding.py, txn_relay.py)
        self.raw: dict[int, object] = {}

    def register(self, api_key: int, min_version: int, max_version: int, fn) -> None:
        self.handlers[api_key] = (min_version, max_version, fn)

    def limit_to_release(self, release: str | None) -> None:
        """Serve only what the emulated release served: each API's versions cut to that release's
        (eoslab.kafka_version.request_versions), an API it did not have dropped; on 4.0 the lab's ranges
        without the versions KIP-896 removed (legacy_versions.REMOVED_IN_4_0). KIP-664's operator
        APIs keep the lab's ranges on every release (RELEASE_EXEMPT)."""
        from eoslab import kafka_version
        self.features = kafka_version.features(release)
        caps = kafka_version.request_versions(release)
        if caps is None:        # the newest release: KIP-896 removed the oldest versions in 4.0
            caps = {k: (legacy_versions.lowest_in_4_0(k, lo), hi) for k, (lo, hi, _) in self.handlers.items()}
        for key, (lo, hi, fn) in list(self.handlers.items()):
            if key in RELEASE_EXEMPT:
                continue
            cap = caps.get(key)
            lo, hi = (max(lo, cap[0]), min(hi, cap[1])) if cap else (1, 0)
            if lo > hi:
                del self.handlers[key]
            else:
                self.handlers[key] = (lo, hi, fn)

    @property
    def served(self) -> dict[int, tuple[int, int]]:
        return {k: (lo, hi) for k, (lo, hi, _) in self.handlers.items()}

    def __call__(self, frame: bytes):
        try:
            header, req = codec.parse_request(frame, self.served)
        except UnsupportedVersion as u:
            return self.unsupported(u)
        relay = self.raw.get(header.api_key)
        result = relay(frame, header, req) if relay is not None else None
        if isinstance(result, bytes) or result is DROP_RESPONSE:
            return result
        if result is None:
            fn = self.handlers[header.api_key][2]
            if log.isEnabledFor(logging.DEBUG):
                log.debug("API %d v%d from %s (correlation id %d)", header.api_key, header.api_version,
                          header.client_id, header.correlation_id)
            result = fn(header, req)
        if result is NO_RESPONSE:
            return NO_RESPONSE
        dropped = isinstance(result, Dropped)
        if dropped:
            result = result.values
        if isinstance(result, dict) and legacy_versions.is_legacy(header.api_key, header.api_version):
            out = legacy_versions.encode_response(header.api_key, header.api_version, header.correlation_id,
                                                  result)
            return DROP_RESPONSE if dropped else out
        if isinstance(result, dict):
            result = codec.make(codec.response_class(header.api_key, header.api_version), result)
        out = codec.encode_response(header.api_key, header.api_version, header.correlation_id, result)
        return DROP_RESPONSE if dropped else out

    def api_versions(self, header, req) -> dict:
        out = {"error_code": E.NONE, "api_keys": [
            {"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in sorted(self.served.items())]}
        version = header.api_version if header is not None else 0
        if version >= 3 and self.features:    # KIP-584's feature flags, tagged fields from v3
            # KAFKA-17011: up to v3 a supported feature whose lowest version is 0 is left out
            out["supported_features"] = [{"name": n, "min_version": lo, "max_version": hi}
                                         for n, (lo, hi, _) in sorted(self.features.items()) if version >= 4 or lo > 0]
            out["finalized_features_epoch"] = FINALIZED_FEATURES_EPOCH
            out["finalized_features"] = [{"name": n, "max_version_level": lvl, "min_version_level": lvl}
                                         for n, (_, _, lvl) in sorted(self.features.items()) if lvl > 0]
        return out

    def unsupported(self, u: UnsupportedVersion):
        if u.api_key in INTER_BROKER_APIS:
            return self.cluster_action_refused(u)
        log.info("API %d v%d is not served (correlation id %d)", u.api_key, u.api_version, u.correlation_id)
        if u.api_key == API_VERSIONS:
            values = self.api_versions(None, None)
            values["error_code"] = UNSUPPORTED_VERSION
            resp = codec.make(codec.response_class(API_VERSIONS, 0), values)
            return codec.encode_response(API_VERSIONS, 0, u.correlation_id, resp)
        # SocketServer.parseRequestHeader: an API or version the listener does not enable is an
        # InvalidRequestException, and the connection is closed (only ApiVersions is answered, at v0)
        raise MalformedRequest(f"API {u.api_key} version {u.api_version} is not enabled on this listener")

    def cluster_action_refused(self, u: UnsupportedVersion):
        """An inter-broker API from a client: CLUSTER_AUTHORIZATION_FAILED at the version it asked for
        (top-level error code where the response has one), and the connection stays open."""
        log.info("%s from a client refused (correlation id %d)", INTER_BROKER_APIS[u.api_key], u.correlation_id)
        try:
            cls = codec.response_class(u.api_key, u.api_version)
        except Exception:  # noqa: BLE001 - a version nobody can describe: Kafka closes too
            raise MalformedRequest(f"unknown API {u.api_key} version {u.api_version}") from None
        names = {f.name for f in dataclasses.fields(cls)}
        resp = codec.make(cls, {"error_code": CLUSTER_AUTHORIZATION_FAILED} if "error_code" in names else {})
        return codec.encode_response(u.api_key, u.api_version, u.correlation_id, resp)


# -- answers shared by brokers and transaction coordinators ------------------------------------------
def metadata_values(resp: broker_pb2.MetadataResponse, endpoints, controller_id: int) -> dict:
    """A Kafka Metadata response from the lab's, with every broker at its Kafka listener."""
    brokers = []
    for b in resp.brokers:
        ep = endpoints.broker(b.broker_id)
        if ep is not None:
            brokers.append({"node_id": b.broker_id, "host": ep[0], "port": ep[1], "rack": b.rack or None})
    topics = []
    for t in resp.topics:
        topics.append({"error_code": t.error, "name": t.name, "topic_id": topic_id_uuid(t.topic_id),
                       "is_internal": t.name.startswith("__"),
                       "partitions": [{"error_code": p.error, "partition_index": p.partition, "leader_id": p.leader,
                                       "leader_epoch": p.leader_epoch, "replica_nodes": list(p.replicas),
                                       "isr_nodes": list(p.isr), "offline_replicas": []}
                                      for p in t.partitions]})
    listed = [b["node_id"] for b in brokers]
    if controller_id not in listed:   # clients send CreateTopics there: it must be a broker they know
        controller_id = listed[0] if listed else -1
    return {"brokers": brokers, "cluster_id": CLUSTER_ID, "controller_id": controller_id, "topics": topics}


def metadata_topics(header, req) -> list[str] | None:
    """The topics asked for: None for all (v0 with an empty list, v1+ with null)."""
    if req.topics is None:
        return None
    names = [t.name for t in req.topics]
    if not names and header.api_version == 0:
        return None
    return names


def coordinator_answer(fc: broker_pb2.FindCoordinatorResponse, key_type: int, endpoints, txn_leader) -> dict:
    """Kafka's fields for one key from the lab's FindCoordinator answer: a group's coordinator is the broker
    the lab names, a transactional id's the broker that leads its __transaction_state partition
    (`txn_leader(partition)`, -1 for none), which relays its requests (txn_relay.py)."""
    if fc.error != E.NONE:
        return {"error_code": fc.error, "error_message": fc.error_message or None, "node_id": -1, "host": "",
                "port": -1}
    node = txn_leader(fc.partition) if key_type == 1 else fc.node_id
    ep = endpoints.broker(node) if node >= 0 else None
    if ep is None:
        return {"error_code": E.COORDINATOR_NOT_AVAILABLE, "error_message": "the coordinator has no Kafka listener",
                "node_id": -1, "host": "", "port": -1}
    return {"error_code": E.NONE, "error_message": None, "node_id": node, "host": ep[0], "port": ep[1]}


def find_coordinator(header, req, find, endpoints, txn_leader, refused=lambda key_type, key: None) -> dict:
    """FindCoordinator v0-v4; `find(FindCoordinatorRequest) -> FindCoordinatorResponse` is the lab's,
    `txn_leader(partition)` the leader of a __transaction_state partition; `refused(key_type, key)` is
    the authorization error of a key (None: allowed), answered with no coordinator."""
    key_type = int(getattr(req, "key_type", 0))
    if key_type not in (0, 1):
        err = {"error_code": E.INVALID_REQUEST, "error_message": f"key type {key_type} is not served",
               "node_id": -1, "host": "", "port": -1}
        keys = list(req.coordinator_keys) if header.api_version >= 4 else [req.key]
        return {"coordinators": [dict(err, key=k) for k in keys]} if header.api_version >= 4 else err
    pb_type = broker_pb2.TRANSACTION if key_type == 1 else broker_pb2.GROUP

    def one(key):
        err = refused(key_type, key)
        if err is not None:
            return {"error_code": err, "error_message": None, "node_id": -1, "host": "", "port": -1}
        return coordinator_answer(find(broker_pb2.FindCoordinatorRequest(key_type=pb_type, key=key)), key_type,
                                  endpoints, txn_leader)
    if header.api_version >= 4:
        return {"coordinators": [dict(one(k), key=k) for k in req.coordinator_keys]}
    return one(req.key)
