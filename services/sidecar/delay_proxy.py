"""Delay and jitter without netem: a userspace TCP proxy reached by iptables REDIRECT.

Guarantees: bytes of each redirected connection reach the original
destination (SO_ORIGINAL_DST) in order, each chunk no earlier than
delay ± jitter after it was read (and never before the chunk read before
it); the proxy's own outgoing sockets carry PROXY_MARK so the REDIRECT rules
skip them; `stop` closes the listener and every connection. One proxy per
Delay rule, on an ephemeral port, in its own thread running an asyncio loop.
Limit: it delays TCP only, and only connections opened after the rule
(the sidecar closes existing ones so they reconnect through it).
"""
from __future__ import annotations

import asyncio
import logging
import random
import socket
import struct
import threading
import time

from services.sidecar.iptables import PROXY_MARK

SO_ORIGINAL_DST = 80
log = logging.getLogger("sidecar.delay_proxy")


def original_destination(sock: socket.socket) -> tuple[str, int]:
    raw = sock.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
    port = struct.unpack_from("!H", raw, 2)[0]
    return socket.inet_ntoa(raw[4:8]), port


class DelayProxy:
    def __init__(self, delay_ms: int, jitter_ms: int, seed: int | None = None):
        self.delay = delay_ms / 1000.0
        self.jitter = jitter_ms / 1000.0
        self._rng = random.Random(seed)
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task] = set()
        self._thread = threading.Thread(target=self._loop.run_forever, name="delay-proxy", daemon=True)
        self.port = 0

    def start(self) -> int:
        self._thread.start()
        fut = asyncio.run_coroutine_threadsafe(self._listen(), self._loop)
        self.port = fut.result(timeout=5)
        return self.port

    async def _listen(self) -> int:
        self._server = await asyncio.start_server(self._handle, host="0.0.0.0", port=0, reuse_address=True)
        return self._server.sockets[0].getsockname()[1]

    def _due(self, last: float) -> float:
        d = self.delay + (self._rng.uniform(-self.jitter, self.jitter) if self.jitter else 0.0)
        return max(last, time.monotonic() + max(d, 0.0))

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._tasks.add(asyncio.current_task())
        upstream_writer = None
        try:
            host, port = original_destination(writer.get_extra_info("socket"))
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, PROXY_MARK)
            s.setblocking(False)
            await self._loop.sock_connect(s, (host, port))
            up_reader, upstream_writer = await asyncio.open_connection(sock=s)
            await asyncio.gather(self._pump(reader, upstream_writer), self._pump(up_reader, writer))
        except (OSError, asyncio.CancelledError) as e:
            log.debug("delay proxy connection ended: %s", e)
        finally:
            for w in (writer, upstream_writer):
                if w is not None:
                    w.close()
            self._tasks.discard(asyncio.current_task())

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                if data is None:
                    if dst.can_write_eof():
                        dst.write_eof()
                    return
                dst.write(data)
                await dst.drain()

        sender = asyncio.ensure_future(deliver())
        last = 0.0
        try:
            while data := await src.read(65536):
                last = self._due(last)
                queue.put_nowait((last, data))
            queue.put_nowait((self._due(last), None))
            await sender
        finally:
            sender.cancel()

    def stop(self) -> None:
        async def _close() -> None:
            if self._server is not None:
                self._server.close()
            for t in list(self._tasks):
                t.cancel()
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(_close(), self._loop).result(timeout=5)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
