"""KafkaListener: Kafka's binary protocol on a TCP port, beside a service's gRPC server.

Guarantees:
- an asyncio server runs its event loop in its own thread; each request is
  handled in a worker thread (the service's handlers block), one request at
  a time per connection, so responses leave in request order as Kafka
  requires (Kafka mutes a connection while its request is processed);
  requests that may wait long (PARKED_APIS) run on a pool of their own, so
  however many of them wait, the other requests still find a thread;
- a frame larger than `max_request_bytes` (Kafka's socket.request.max.bytes)
  or one that does not parse closes that connection only; an API or version
  not served is answered as Kafka does (see `ApiHandlers.unsupported`) and
  the connection stays open; an exception in a handler closes that
  connection and is logged, the service keeps serving;
- `acks=0` produce requests get no response; when a handler asks for its
  response to be dropped (the lost-ACK fault), the request has taken effect
  and the connection is closed without the response, which is how a
  response gets lost on TCP (the client sees a disconnect and retries);
- `start` returns once the port is bound (or raises the bind error);
  `stop` closes the server and every connection, cancels their tasks and lets them end (up to
  STOP_GRACE_S) before the loop stops, so none is destroyed pending;
- a connection that sends no request for `idle_timeout_s` (Kafka's
  connections.max.idle.ms, 10 minutes) is closed, as Kafka's Selector does;
  a request that has arrived when the deadline fires is served, never cut
  off unread (which the client would see as a reset).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import struct
import threading

from services.kafka_protocol.codec import MalformedRequest

log = logging.getLogger(__name__)
_SIZE = struct.Struct(">i")
_SIZE_KEY = struct.Struct(">h")   # a request's first field: its API key
MAX_REQUEST_BYTES = 104857600   # Kafka's socket.request.max.bytes
CONNECTIONS_MAX_IDLE_S = 600.0   # Kafka's connections.max.idle.ms (10 minutes)
# Requests that may wait long on the broker (a Produce for acks=all, a Fetch's long poll, JoinGroup and
# SyncGroup for a rebalance, CreateTopics / DeleteTopics for the metadata, DeleteRecords for the
# followers, a transaction coordinator's requests, which a broker relays and a paused coordinator may
# hold, and every request forwarded to the controller, which waits through a controller failover:
# CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs, IncrementalAlterConfigs): Kafka parks
# them in purgatory and frees its request threads; here they run on a pool of their own, so any
# number of them cannot hold the threads every other request needs.
PARKED_APIS = frozenset({0, 1, 11, 14, 19, 20, 21, 22, 24, 25, 26, 33, 37, 44, 65, 66})
PARKED_WORKERS = 256
NO_RESPONSE = object()          # acks=0
DROP_RESPONSE = object()        # lost-ACK fault: processed, connection closed without the answer
STOP_GRACE_S = 2.0              # how long `stop` waits for the cancelled connections to end
ANONYMOUS = "User:ANONYMOUS"    # Kafka's KafkaPrincipal.ANONYMOUS: what a PLAINTEXT listener authenticates
_request = threading.local()


def client_host() -> str:
    """The peer address of the connection whose request this thread is handling ("" outside one)."""
    return getattr(_request, "host", "")


def client_principal() -> str:
    return ANONYMOUS


def _handle_for(handle, host: str, frame: bytes):
    _request.host = host
    try:
        return handle(frame)
    finally:
        _request.host = ""


class KafkaListener:
    def __init__(self, listen: str, handle, name: str = "kafka", max_request_bytes: int = MAX_REQUEST_BYTES,
                 workers: int = 32, idle_timeout_s: float = CONNECTIONS_MAX_IDLE_S,
                 parked_workers: int = PARKED_WORKERS):
        host, _, port = listen.rpartition(":")
        self.idle_timeout_s = idle_timeout_s
        self.host, self.port = host or "0.0.0.0", int(port)
        self.handle = handle          # frame bytes -> response bytes | NO_RESPONSE | DROP_RESPONSE
        self.name = name
        self.max_request_bytes = max_request_bytes
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"{name}-req")
        self.parked_pool = concurrent.futures.ThreadPoolExecutor(max_workers=parked_workers,
                                                                 thread_name_prefix=f"{name}-parked")
        self.loop: asyncio.AbstractEventLoop | None = None
        self._server = None
        self._thread: threading.Thread | None = None
        self._writers: set = set()

    def start(self) -> None:
        ready = threading.Event()
        error: list[BaseException] = []

        def run():
            self.loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self.loop)
            try:
                self._server = self.loop.run_until_complete(
                    asyncio.start_server(self._connection, self.host, self.port, reuse_address=True))
                self.port = self._server.sockets[0].getsockname()[1]
            except BaseException as e:  # noqa: BLE001 - reported to start()
                error.append(e)
                ready.set()
                return
            ready.set()
            self.loop.run_forever()
            self.loop.close()

        self._thread = threading.Thread(target=run, name=f"{self.name}-listener", daemon=True)
        self._thread.start()
        ready.wait()
        if error:
            raise error[0]
        log.info("%s listener on %s:%d", self.name, self.host, self.port)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        peer = writer.get_extra_info("peername")
        host = peer[0] if isinstance(peer, tuple) and peer else ""
        try:
            while True:
                try:
                    head = await self._next_head(reader)
                except asyncio.TimeoutError:
                    log.info("%s: %s idle for %.0f s (connections.max.idle.ms): closing the connection",
                             self.name, peer, self.idle_timeout_s)
                    return
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                (size,) = _SIZE.unpack(head)
                if size < 0 or size > self.max_request_bytes:
                    log.warning("%s: frame of %d bytes from %s (limit %d): closing the connection",
                                self.name, size, peer, self.max_request_bytes)
                    return
                try:
                    frame = await reader.readexactly(size)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                try:
                    key = _SIZE_KEY.unpack_from(frame)[0] if len(frame) >= 2 else -1
                    pool = self.parked_pool if key in PARKED_APIS else self.pool
                    out = await self.loop.run_in_executor(pool, _handle_for, self.handle, host, frame)
                except MalformedRequest as e:
                    log.warning("%s: malformed request from %s (%s): closing the connection", self.name, peer, e)
                    return
                except Exception:  # noqa: BLE001 - a bug closes one connection, not the service
                    log.exception("%s: request from %s failed: closing the connection", self.name, peer)
                    return
                if out is DROP_RESPONSE:
                    log.info("%s: response to %s dropped (lost-ack fault): closing the connection", self.name, peer)
                    return
                if out is NO_RESPONSE:
                    continue
                writer.write(out)
                await writer.drain()
        except ConnectionError:
            return
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _next_head(self, reader: asyncio.StreamReader) -> bytes:
        """The next request's size field; TimeoutError when none came in `idle_timeout_s`. A request
        already read off the socket when the deadline fires is still served: a loop that wakes late (a
        loaded machine) finds the request and the deadline due at once, and Kafka's Selector reads what
        is ready before it expires idle connections."""
        try:
            async with asyncio.timeout(self.idle_timeout_s):    # no inner task to leave behind
                return await reader.readexactly(4)
        except asyncio.TimeoutError:
            async with asyncio.timeout(0):      # what is buffered already, without waiting
                return await reader.readexactly(4)

    def stop(self) -> None:
        loop = self.loop
        if loop is None or self._thread is None or loop.is_closed():
            return

        async def close():
            self._server.close()
            for w in list(self._writers):
                w.close()
            tasks = [t for t in asyncio.all_tasks(loop) if t is not asyncio.current_task()]
            for t in tasks:                 # the connections end here, not destroyed pending by close()
                t.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=STOP_GRACE_S)
            loop.stop()

        try:
            asyncio.run_coroutine_threadsafe(close(), loop)
        except RuntimeError:
            pass
        self._thread.join(5)
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.parked_pool.shutdown(wait=False, cancel_futures=True)
