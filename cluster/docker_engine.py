"""The Docker engine as the runtimes see it: is it there, does it have our images, which addresses are free.

Guarantees: `engine_status()` and `image_exists()` speak HTTP to the engine's
unix socket with the standard library only and never take longer than their
timeout (a missing socket or a refused connection answers at once; a hung
engine costs the timeout), so choosing a runtime never hangs; `wait_engine()`
polls until the engine answers or its deadline passes. `pick_net()` returns
the first three octets of a /24 inside 172.28.0.0/16 that no Docker network
and no host route overlaps (the preferred one when it is free), and
`pick_port()` a port on 127.0.0.1 that binds and that no container
publishes: a compose project only ever gets addresses nobody else uses, so
traffic to them reaches only that project's containers. Automatic picks
rotate (the next search starts after the last pick, remembered beside the
lock), so the subnet and port a project just released are not handed out
again at once. `alloc_lock()` is an exclusive lock across processes, held
while a project picks addresses and comes up, so two projects never pick
the same ones.
"""
from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import socket
import time
import urllib.parse

SOCKET = os.environ.get("EOSLAB_DOCKER_SOCKET", "/var/run/docker.sock")
LOCK_PATH = "/run/lock/eoslab-docker-alloc.lock"
CURSOR_PATH = "/run/lock/eoslab-docker-alloc.last"     # "<third octet> <port>" of the last automatic picks
NET_RANGE = ipaddress.IPv4Network("172.28.0.0/16")
DEFAULT_NET, DEFAULT_PORT = "172.28.77", 19092
FIRST_AUTO_NET, FIRST_AUTO_PORT, LAST_AUTO_PORT = 80, 19100, 19999


class EngineUnavailable(RuntimeError):
    pass


def _get(path: str, timeout: float, sock_path: str = SOCKET) -> tuple[int, bytes]:
    """GET path from the engine; (status, body). Raises OSError (incl. timeout) when it does not answer."""
    deadline = time.monotonic() + timeout
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.connect(sock_path)
        s.sendall(f"GET {path} HTTP/1.0\r\nHost: docker\r\n\r\n".encode())
        chunks = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("the engine did not finish answering")
            s.settimeout(left)
            b = s.recv(65536)
            if not b:
                break
            chunks.append(b)
    finally:
        s.close()
    raw = b"".join(chunks)
    head, _, body = raw.partition(b"\r\n\r\n")
    try:
        status = int(head.split(b" ", 2)[1])
    except (IndexError, ValueError):
        raise OSError(f"not an HTTP answer from {sock_path}") from None
    return status, body


def engine_status(timeout: float = 2.0, sock_path: str = SOCKET) -> tuple[bool, str]:
    """(True, version) when an engine answers on the socket within timeout, else (False, why)."""
    if not os.path.exists(sock_path):
        return False, f"no Docker engine: {sock_path} does not exist"
    try:
        status, body = _get("/_ping", timeout, sock_path)
    except socket.timeout:
        return False, f"the Docker engine on {sock_path} did not answer within {timeout:g}s"
    except OSError as e:
        return False, f"no Docker engine answers on {sock_path} ({e.strerror or e})"
    if status != 200:
        return False, f"the Docker engine on {sock_path} answered /_ping with HTTP {status}"
    return True, f"a Docker engine answers on {sock_path}"


def image_exists(image: str, timeout: float = 5.0, sock_path: str = SOCKET) -> bool:
    try:
        status, _ = _get(f"/images/{urllib.parse.quote(image, safe='/:')}/json", timeout, sock_path)
    except OSError:
        return False
    return status == 200


def wait_engine(timeout: float = 60.0) -> None:
    """Until the engine answers; EngineUnavailable with the last reason after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        ok, why = engine_status(min(5.0, max(0.5, deadline - time.monotonic())))
        if ok:
            return
        if time.monotonic() >= deadline:
            raise EngineUnavailable(why)
        time.sleep(1.0)


def is_engine_error(text: str) -> bool:
    """Whether an error message means the engine itself was unreachable (worth a retry)."""
    t = text.lower()
    return any(s in t for s in ("error during connect", "cannot connect to the docker daemon",
                                "is the docker daemon running", "docker.sock: connect", "connection refused",
                                "connection aborted", "remotedisconnected", "broken pipe", "unexpected eof"))


# -- addresses ---------------------------------------------------------------------------------
def _host_routes() -> list[ipaddress.IPv4Network]:
    out = []
    try:
        with open("/proc/net/route") as f:
            next(f)
            for line in f:
                parts = line.split()
                dest, mask = int(parts[1], 16), int(parts[7], 16)
                if mask == 0:
                    continue                      # the default route overlaps everything
                addr = ipaddress.IPv4Address(socket.ntohl(dest))
                prefix = bin(mask).count("1")
                out.append(ipaddress.IPv4Network(f"{addr}/{prefix}", strict=False))
    except (OSError, StopIteration, ValueError, IndexError):
        pass
    return out


def _docker_subnets(client) -> list[ipaddress.IPv4Network]:
    out = []
    for n in client.networks.list():
        for cfg in (n.attrs.get("IPAM") or {}).get("Config") or []:
            try:
                net = ipaddress.ip_network(cfg.get("Subnet", ""), strict=False)
            except ValueError:
                continue
            if isinstance(net, ipaddress.IPv4Network):
                out.append(net)
    return out


def _cursor() -> tuple[int, int]:
    try:
        with open(CURSOR_PATH) as f:
            octet, port = (int(x) for x in f.read().split())
        return octet, port
    except (OSError, ValueError):
        return FIRST_AUTO_NET - 1, FIRST_AUTO_PORT - 1


def _remember(octet: int | None = None, port: int | None = None) -> None:
    last_octet, last_port = _cursor()
    try:
        with open(CURSOR_PATH, "w") as f:
            f.write(f"{octet if octet is not None else last_octet} {port if port is not None else last_port}\n")
    except OSError:
        pass                                   # rotation is a nicety; uniqueness comes from the checks


def _rotated(first: int, last: int, after: int) -> list[int]:
    """first..last, starting just after `after`."""
    values = list(range(first, last + 1))
    i = next((k for k, v in enumerate(values) if v > after), 0)
    return values[i:] + values[:i]


def pick_net(client, preferred: str | None = None) -> str:
    taken = _docker_subnets(client) + _host_routes()
    auto = _rotated(FIRST_AUTO_NET, 254, _cursor()[0])
    candidates = ([preferred] if preferred else []) + [f"172.28.{i}" for i in auto]
    for c in candidates:
        net = ipaddress.IPv4Network(f"{c}.0/24")
        if net.subnet_of(NET_RANGE) and not any(net.overlaps(t) for t in taken):
            if c != preferred:
                _remember(octet=int(c.rsplit(".", 1)[1]))
            return c
    raise EngineUnavailable("no free /24 left in 172.28.0.0/16 for another compose project")


def _published_ports(client) -> set[int]:
    ports = set()
    for c in client.containers.list(sparse=True):
        for p in c.attrs.get("Ports") or []:
            if p.get("PublicPort"):
                ports.add(int(p["PublicPort"]))
    return ports


def _binds(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def pick_port(client, preferred: int | None = None) -> int:
    used = _published_ports(client)
    candidates = ([preferred] if preferred else []) + _rotated(FIRST_AUTO_PORT, LAST_AUTO_PORT, _cursor()[1])
    for port in candidates:
        if port not in used and _binds(port):
            if port != preferred:
                _remember(port=port)
            return port
    raise EngineUnavailable(f"no free port on 127.0.0.1 in {FIRST_AUTO_PORT}-{LAST_AUTO_PORT} for a bootstrap port")


@contextlib.contextmanager
def alloc_lock(timeout: float = 600.0):
    os.makedirs(os.path.dirname(LOCK_PATH), exist_ok=True)
    fd = os.open(LOCK_PATH, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise EngineUnavailable(f"{LOCK_PATH} held by another process for {timeout:.0f}s") from None
                time.sleep(0.2)
        yield
    finally:
        os.close(fd)
