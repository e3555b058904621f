"""ZooKeeper healthcheck: exit 0 when the server on localhost:2181 answers `ruok` with `imok`
and `srvr` says it serves (standalone or quorum member). Standard library only."""
import socket
import sys


def four_letter(cmd: bytes, host: str = "127.0.0.1", port: int = 2181) -> bytes:
    with socket.create_connection((host, port), timeout=2) as s:
        s.sendall(cmd)
        out = b""
        while chunk := s.recv(4096):
            out += chunk
        return out


try:
    ok = four_letter(b"ruok") == b"imok" and b"Mode:" in four_letter(b"srvr")
except OSError as e:
    print(f"zookeeper: {e}", file=sys.stderr)
    ok = False
sys.exit(0 if ok else 1)
