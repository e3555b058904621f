"""The ZooKeeper client every service holds, reconnecting as Kafka's ZooKeeper client does.

Guarantees: `zk_client(zk_connect, session_timeout_ms)` is a KazooClient for the hosts and chroot of
`zk_connect`, with the cluster member's credentials and ACLs (eoslab.common.auth.zk_kwargs), whose
session timeout is `session_timeout_ms`, and which, after it lost its connection, tries again at most
RECONNECT_MAX_DELAY_S apart, however long the server has been gone. That is the Java client's rule
(ClientCnxn waits a random 0-1 s between connection attempts); kazoo's default backs off up to 60 s,
so after a ZooKeeper server restart the lab's brokers and controllers came back seconds after their
sessions had expired, where Kafka's keep theirs, and every ZooKeeper fault cost the cluster more
elections and re-registrations than it costs Kafka.
"""
from __future__ import annotations

from kazoo.client import KazooClient

from eoslab.common import auth
from services.common import zk_paths

RECONNECT_FIRST_DELAY_S = 0.1
RECONNECT_MAX_DELAY_S = 1.0


def connection_retry() -> dict:
    """kazoo's connection retry: forever, from 0.1 s doubling to at most 1 s (with kazoo's +-40 % jitter)."""
    return {"max_tries": -1, "delay": RECONNECT_FIRST_DELAY_S, "backoff": 2, "max_jitter": 0.4,
            "max_delay": RECONNECT_MAX_DELAY_S}


def zk_client(zk_connect: str, session_timeout_ms: int) -> KazooClient:
    hosts, chroot = zk_paths.split_hosts(zk_connect)
    return KazooClient(hosts=hosts + chroot, timeout=session_timeout_ms / 1000.0,
                       connection_retry=connection_retry(), **auth.zk_kwargs())
