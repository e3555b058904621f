"""Start an eoslab service in a container: `eoslab-launch MODULE [ARGS...]` (used by the entrypoint).

Guarantees: the service's modules (gRPC, protobuf, kazoo, the service) are
imported first, then it waits until ZooKeeper serves, then it runs the
module's main() with ARGS in this same process (so the container's signals
reach the service directly). "ZooKeeper serves" means that for every
HOST:PORT in $EOSLAB_WAIT_ZK the four-letter word `srvr` reports a mode
(polled every 50 ms) and then a kazoo session opens and reads "/" (what the
local runtime waits for before it starts services); after $EOSLAB_WAIT_S
seconds (default 120) it exits 1 with one line. So a container's Python
start overlaps ZooKeeper's JVM start, and the service's first ZooKeeper
connection meets a server that already serves sessions, instead of a JVM
still warming up or kazoo's exponential reconnect backoff (0.1 s doubling).
Without $EOSLAB_WAIT_ZK it runs the service at once.
"""
import importlib
import logging
import os
import socket
import sys
import time


def zk_serves(address: str) -> bool:
    host, _, port = address.rpartition(":")
    out = b""
    try:
        with socket.create_connection((host, int(port)), timeout=1) as s:
            s.sendall(b"srvr")
            while chunk := s.recv(4096):
                out += chunk
    except (OSError, ValueError):
        return False
    return b"Mode:" in out


def zk_session_ok(address: str) -> bool:
    from kazoo.client import KazooClient
    zk = KazooClient(hosts=address, timeout=4)
    try:
        zk.start(timeout=4)
        zk.exists("/")
        return True
    except Exception:  # noqa: BLE001 - not serving sessions yet
        return False
    finally:
        try:
            zk.stop()
            zk.close()
        except Exception:  # noqa: BLE001
            pass


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: eoslab-launch MODULE [ARGS...]", file=sys.stderr)
        return 2
    module, args = sys.argv[1], sys.argv[2:]
    service = importlib.import_module(f"{module}.__main__")
    kazoo_log, quiet = logging.getLogger("kazoo"), logging.NullHandler()
    kazoo_log.addHandler(quiet)                 # its reconnect chatter while ZooKeeper starts
    kazoo_log.propagate = False
    deadline = time.monotonic() + float(os.environ.get("EOSLAB_WAIT_S", "120"))
    for address in filter(None, (a.strip() for a in os.environ.get("EOSLAB_WAIT_ZK", "").split(","))):
        while not (zk_serves(address) and zk_session_ok(address)):
            if time.monotonic() > deadline:
                print(f"eoslab-launch: ZooKeeper at {address} did not serve within {os.environ.get('EOSLAB_WAIT_S', '120')} s",
                      file=sys.stderr)
                return 1
            time.sleep(0.05)
    kazoo_log.removeHandler(quiet)
    kazoo_log.propagate = True
    sys.argv = [f"python -m {module}", *args]
    service.main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
