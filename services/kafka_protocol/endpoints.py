"""Where each broker and transaction coordinator listens for Kafka clients, from ZooKeeper.

Guarantees: a service that runs a Kafka listener writes it into its ZooKeeper
registration as Kafka does (`"endpoints": ["PLAINTEXT://host:port"]`);
`KafkaEndpoints` reads those registrations (cached for at most `ttl_s`) and
answers None for a node that is not registered or has no Kafka listener, so
a response never names an address nobody listens on. A transaction
coordinator's listener is where brokers relay its requests (txn_relay.py);
Kafka clients are never given it.
"""
from __future__ import annotations

import threading
import time

from services.common import zk_paths

SECURITY_PROTOCOL = "PLAINTEXT"


def registration_entry(host: str, port: int) -> dict:
    """The fields a registration znode gets for a Kafka listener at host:port."""
    return {"endpoints": [f"{SECURITY_PROTOCOL}://{host}:{port}"]}


def parse_endpoint(data: dict) -> tuple[str, int] | None:
    for ep in data.get("endpoints") or []:
        proto, _, addr = str(ep).partition("://")
        host, _, port = addr.rpartition(":")
        if proto == SECURITY_PROTOCOL and host and port.isdigit():
            return host.strip("[]"), int(port)
    return None


class KafkaEndpoints:
    def __init__(self, zk, ttl_s: float = 1.0):
        self.zk = zk
        self.ttl_s = ttl_s
        self._cache: dict[str, tuple[float, tuple[str, int] | None]] = {}
        self._lock = threading.Lock()

    def _lookup(self, path: str) -> tuple[str, int] | None:
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(path)
        if hit is not None and now - hit[0] < self.ttl_s:
            return hit[1]
        try:
            data, _ = self.zk.get(path)
            ep = parse_endpoint(zk_paths.decode(data))
        except Exception:  # noqa: BLE001 - not registered, or ZooKeeper unreachable: unknown
            ep = None
        with self._lock:
            self._cache[path] = (now, ep)
        return ep

    def broker(self, broker_id: int) -> tuple[str, int] | None:
        return self._lookup(zk_paths.broker_path(broker_id))

    def coordinator(self, coordinator_id: int) -> tuple[str, int] | None:
        return self._lookup(zk_paths.txn_coordinator_path(coordinator_id))
