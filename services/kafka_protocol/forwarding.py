"""Admin requests that reach a transaction coordinator, relayed to a broker (as Kafka's brokers forward
admin requests to the controller, KIP-590).

A client given a coordinator's own Kafka address may send it topic and config requests (admin clients
send them to "the least loaded node" they know). Guarantees: a coordinator serves each API of
`FORWARDED` at the versions the brokers serve (cut to the release like every other API); the request
frame goes unchanged to the Kafka listener of a registered broker (the next one on a connection error)
and the broker's answer comes back unchanged, correlation id included. When no broker answers, the
client gets the API's error response at its version: NOT_CONTROLLER for every resource or topic it
named where the response has per-item errors (clients retry it), else an empty answer.
"""
from __future__ import annotations

import logging
import socket
import struct

from kazoo.exceptions import KazooException

from services.common import zk_paths
from services.kafka_protocol import codec
from services.kafka_protocol.broker_apis import VERSIONS as BROKER_VERSIONS
from services.kafka_protocol.config_apis import VERSIONS as CONFIG_VERSIONS

log = logging.getLogger(__name__)
CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS, DESCRIBE_CONFIGS = 19, 20, 37, 32
FORWARDED = {CREATE_TOPICS: BROKER_VERSIONS[CREATE_TOPICS], DELETE_TOPICS: BROKER_VERSIONS[DELETE_TOPICS],
             CREATE_PARTITIONS: BROKER_VERSIONS[CREATE_PARTITIONS], **CONFIG_VERSIONS}
RELAY_TIMEOUT_S = 120.0       # CreateTopics and DeleteTopics wait up to their own timeout on the broker
_SIZE = struct.Struct(">i")


class Forwarder:
    def __init__(self, zk, endpoints):
        self.zk = zk
        self.endpoints = endpoints

    def brokers(self) -> list[tuple[str, int]]:
        try:
            ids = sorted(int(c) for c in self.zk.get_children(zk_paths.BROKER_IDS) if c.isdigit())
        except KazooException:
            return []
        return [ep for ep in (self.endpoints.broker(b) for b in ids) if ep is not None]

    def relay(self, frame: bytes, header=None, req=None) -> bytes | None:
        """The first registered broker's answer to `frame` (size prefix included), or None."""
        for host, port in self.brokers():
            try:
                with socket.create_connection((host, port), timeout=RELAY_TIMEOUT_S) as s:
                    s.sendall(_SIZE.pack(len(frame)) + frame)
                    head = recv_exactly(s, 4)
                    return head + recv_exactly(s, _SIZE.unpack(head)[0])
            except OSError as e:
                log.info("relaying API %d to broker %s:%d failed: %r", struct.unpack_from(">h", frame)[0],
                         host, port, e)
        return None


def recv_exactly(s, n: int, closed=ConnectionError, who: str = "the broker") -> bytes:
    """n bytes from socket s; `closed(...)` raised when the peer closes the connection first."""
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise closed(f"{who} closed the connection")
        out += chunk
    return bytes(out)



def register_forwarded(apis, zk, endpoints) -> None:
    """Serve FORWARDED on a coordinator's ApiHandlers by relaying each request to a broker."""
    fwd = Forwarder(zk, endpoints)
    for key, (lo, hi) in FORWARDED.items():
        apis.register(key, lo, hi, _unavailable(key))
        apis.raw[key] = fwd.relay


def _unavailable(key: int):
    """The answer when no broker could be reached: NOT_CONTROLLER per item, as a broker without a
    controller answers (clients retry it)."""
    from eoslab.common.errors import E

    def answer(header, req) -> dict:
        if key == CREATE_TOPICS:
            return {"topics": [{"name": t.name, "error_code": E.NOT_CONTROLLER, "num_partitions": -1,
                                "replication_factor": -1} for t in req.topics]}
        if key == DELETE_TOPICS:
            names = [t.name for t in req.topics] if header.api_version >= 6 else list(req.topic_names)
            return {"responses": [{"name": n, "error_code": E.NOT_CONTROLLER, "topic_id": codec.ZERO_UUID}
                                  for n in names]}
        if key == CREATE_PARTITIONS:
            return {"results": [{"name": t.name, "error_code": E.NOT_CONTROLLER} for t in req.topics]}
        items = [{"resource_type": int(r.resource_type), "resource_name": r.resource_name,
                  "error_code": E.NOT_CONTROLLER, "error_message": "no broker reachable", "configs": []}
                 for r in req.resources]
        return {"results": items} if key == DESCRIBE_CONFIGS else {"responses": items}
    return answer
