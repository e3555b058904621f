"""The Kafka-listener half of bench/fuzz.py: hostile frames (random bytes, absurd lengths, unknown API
keys and versions, frames claiming more than they send) sent to a broker's or coordinator's Kafka
listener, one connection each, and what came back tallied (answered, closed, refused, no answer)."""
from __future__ import annotations

import random
import socket
import struct


def kafka_frame(rng: random.Random) -> bytes:
    kind = rng.randrange(4)
    if kind == 0:
        return rng.randbytes(rng.choice([1, 3, 17, 200]))
    if kind == 1:
        return struct.pack(">i", rng.choice([-1, 0, 2 ** 31 - 1, 100 * 1024 * 1024])) + rng.randbytes(8)
    api_key, version = rng.choice([0, 1, 3, 10, 18, 22, 24, 26, 27, 999, -1]), rng.choice([0, 3, 9, 99, -1])
    body = struct.pack(">hhi", api_key, version, rng.randrange(2 ** 31)) + struct.pack(">h", 3) + b"fzz"
    body += rng.randbytes(rng.choice([0, 4, 40, 400]))
    if kind == 2:
        return struct.pack(">i", len(body)) + body
    return struct.pack(">i", len(body) + 1000) + body        # claims more than it sends


def send_kafka(tally, address: str, rng: random.Random) -> None:
    host, _, port = address.rpartition(":")
    frame = kafka_frame(rng)
    try:
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(frame)
            s.shutdown(socket.SHUT_WR)
            s.settimeout(10)
            got = s.recv(65536)
            tally.count("status", ("kafka", "answered" if got else "closed"))
    except socket.timeout:
        tally.count("hangs", "kafka")
        tally.count("status", ("kafka", "no answer in 10 s"))
    except ConnectionRefusedError:
        tally.count("status", ("kafka", "refused"))
    except OSError as e:
        tally.count("status", ("kafka", type(e).__name__))


def _kafka_port(rt, node) -> int | None:
    if node.role not in ("broker", "txn-coordinator"):
        return None
    from cluster import local
    return getattr(local, "KAFKA_PORT", None)
