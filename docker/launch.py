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

A service that loses its ZooKeeper connection while it starts exits (its
start does not retry); on two busy cores a 2 s session can be lost that way.
So when main() raises kazoo's ConnectionLoss or SessionExpiredError within
START_WINDOW_S of the launch, the launcher says so on stderr and execs
itself again (same process, same container), at most MAX_ATTEMPTS times in
all; any other failure, or one later in the service's life, ends the
process as before. A SIGKILL (the nemesis) never reaches this path.
"""
import importlib
import logging
import os
import socket
import sys
import time

START_WINDOW_S = 60.0
MAX_ATTEMPTS = 3
RETRYABLE = ("ConnectionLoss", "SessionExpiredError")


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
    launched = time.monotonic()
    attempt = int(os.environ.get("EOSLAB_LAUNCH_ATTEMPT", "1"))
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
    try:
        service.main()
    except Exception as e:  # noqa: BLE001 - only start-time ZooKeeper losses are retried
        if type(e).__name__ not in RETRYABLE or time.monotonic() - launched > START_WINDOW_S \
                or attempt >= MAX_ATTEMPTS:
            raise
        print(f"eoslab-launch: {module} lost ZooKeeper while starting ({type(e).__name__}); "
              f"starting it again (attempt {attempt + 1} of {MAX_ATTEMPTS})", file=sys.stderr, flush=True)
        os.environ["EOSLAB_LAUNCH_ATTEMPT"] = str(attempt + 1)
        os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), module, *args])
    return 0


if __name__ == "__main__":
    sys.exit(main())
