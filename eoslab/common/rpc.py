"""gRPC setup shared by services and clients: message limits, server start, cached channels.

Guarantees: every server accepts messages large enough that an oversize batch
reaches the broker and gets Kafka's MESSAGE_TOO_LARGE rather than a transport
error; every service server checks the cluster's secret on internal RPCs and
answers undecodable requests INVALID_ARGUMENT (eoslab.common.auth); every
channel sends the secret of the cluster it leads to, when this process knows
one; channels are reused per address and closed on `close_all`; a service's
log file ($EOSLAB_LOG_FILE) rotates at $EOSLAB_LOG_MAX_BYTES (10 MB), 3 kept.
"""
from __future__ import annotations

import logging
import logging.handlers
import os
import signal
import sys
import threading
from concurrent import futures

import grpc

from eoslab.common import auth

MAX_MESSAGE = 64 * 1024 * 1024
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE),
    ("grpc.max_send_message_length", MAX_MESSAGE),
    ("grpc.enable_retries", 0),
    ("grpc.keepalive_time_ms", 10000),
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 500),
]


def make_server(max_workers: int = 128, secret: str | None = None) -> grpc.Server:
    """A service's server; refuses to exist without the cluster's secret (the process's by default)."""
    try:
        guard = auth.ServerGuard(secret or auth.require_process_secret())
    except auth.NoSecret as e:
        raise SystemExit(str(e)) from None
    return grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers), interceptors=[guard],
                       options=CHANNEL_OPTIONS + [("grpc.so_reuseport", 0)])


def bind(server: grpc.Server, listen: str) -> int:
    port = server.add_insecure_port(listen)
    if port == 0:
        raise SystemExit(f"cannot listen on {listen}")
    return port


def channel(address: str) -> grpc.Channel:
    ch = grpc.insecure_channel(address, options=CHANNEL_OPTIONS)
    secret = auth.secret_for(address)
    return grpc.intercept_channel(ch, auth.SecretClientInterceptor(secret)) if secret else ch


class ChannelCache:
    """One channel per address, shared by the threads of one process, and one stub per channel and
    service (building a stub builds a callable per method: too dear for every request)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}
        self._stubs: dict[tuple[str, type], object] = {}

    def stub(self, address: str, stub_class):
        key = (address, stub_class)
        st = self._stubs.get(key)
        if st is None:
            ch = self.get(address)
            with self._lock:
                if self._channels.get(address) is not ch:
                    return stub_class(ch)       # dropped meanwhile: do not cache a stub of a closed channel
                st = self._stubs.setdefault(key, stub_class(ch))
        return st

    def get(self, address: str) -> grpc.Channel:
        with self._lock:
            ch = self._channels.get(address)
            if ch is None:
                ch = self._channels[address] = channel(address)
            return ch

    def drop(self, address: str) -> None:
        with self._lock:
            ch = self._channels.pop(address, None)
            for key in [k for k in self._stubs if k[0] == address]:
                del self._stubs[key]
        if ch is not None:
            ch.close()

    def close_all(self) -> None:
        with self._lock:
            chans, self._channels = list(self._channels.values()), {}
            self._stubs.clear()
        for ch in chans:
            ch.close()


def setup_logging(name: str) -> None:
    level = os.environ.get("EOSLAB_LOG_LEVEL", "INFO").upper()
    fmt = f"%(asctime)s {name} %(levelname)s %(name)s: %(message)s"
    path = os.environ.get("EOSLAB_LOG_FILE")
    if path:
        size = int(os.environ.get("EOSLAB_LOG_MAX_BYTES", str(10 << 20)))
        handler: logging.Handler = logging.handlers.RotatingFileHandler(path, maxBytes=max(size, 4096),
                                                                        backupCount=3)
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(fmt))
    logging.basicConfig(level=level, handlers=[handler])
    logging.getLogger("kazoo").setLevel(logging.WARNING)


def split_address(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, got {addr!r}")
    return host, int(port)


def wait_for_termination() -> None:
    """Block until SIGTERM or SIGINT: how every service process waits before its clean shutdown."""
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    done.wait()
