"""Fixtures for the sidecar tests: two network namespaces joined by a veth pair, a sidecar in one.

The sidecar runs in namespace A (its "service" namespace) and its peer is
namespace B; the test never touches the host's own rules or interfaces
except for creating and deleting these two namespaces. The sidecar's API is
a unix socket, reachable from the host without any route into A.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "netns_tools.py")
A_IP, B_IP, UNUSED_IP = "198.18.211.1", "198.18.211.2", "198.18.211.3"
SERVICE_PORT, PEER_PORT = 7000, 7001
TOKEN = "test-token-" + uuid.uuid4().hex[:8]


def _why_no_netns() -> str | None:
    if os.geteuid() != 0:
        return "sidecar tests need root (network namespaces, iptables)"
    for tool in ("ip", "iptables", "tc"):
        if shutil.which(tool) is None:
            return f"sidecar tests need {tool!r} on PATH"
    return None


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(list(args), capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(args)}: {r.stderr.strip()}")
    return r


def in_ns(ns: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return sh("ip", "netns", "exec", ns, *args, check=check)


class Namespaces:
    def __init__(self, tmp: str):
        tag = uuid.uuid4().hex[:6]
        self.a, self.b = f"eoslab-sc-{tag}-a", f"eoslab-sc-{tag}-b"
        self.tmp = tmp
        self.procs: list[subprocess.Popen] = []

    def create(self) -> None:
        sh("ip", "netns", "add", self.a)
        sh("ip", "netns", "add", self.b)
        va, vb = f"v{self.a[-8:]}", f"v{self.b[-8:]}"
        sh("ip", "link", "add", va, "type", "veth", "peer", "name", vb)
        sh("ip", "link", "set", va, "netns", self.a)
        sh("ip", "link", "set", vb, "netns", self.b)
        for ns, dev, ip in ((self.a, va, A_IP), (self.b, vb, B_IP)):
            in_ns(ns, "ip", "link", "set", "lo", "up")
            in_ns(ns, "ip", "addr", "add", f"{ip}/24", "dev", dev)
            in_ns(ns, "ip", "link", "set", dev, "up")

    def spawn(self, ns: str, *args: str, **kw) -> subprocess.Popen:
        p = subprocess.Popen(["ip", "netns", "exec", ns, *args], cwd=ROOT, **kw)
        self.procs.append(p)
        return p

    def echo_server(self, ns: str, port: int, log: str) -> None:
        p = self.spawn(ns, sys.executable, TOOLS, "echo-server", str(port), log,
                       stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "ready"

    def roundtrip(self, ns: str, host: str, port: int, timeout: float = 1.0) -> tuple[int, float | None]:
        r = in_ns(ns, sys.executable, TOOLS, "roundtrip", host, str(port), str(timeout), check=False)
        return r.returncode, (float(r.stdout) if r.returncode == 0 else None)

    def destroy(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for ns in (self.a, self.b):
            sh("ip", "netns", "del", ns, check=False)


class SidecarProcess:
    def __init__(self, nss: Namespaces, socket_path: str):
        self.nss = nss
        self.address = f"unix:{socket_path}"
        self.socket_path = socket_path
        self.proc: subprocess.Popen | None = None
        self.log = os.path.join(nss.tmp, "sidecar.log")

    def start(self) -> None:
        env = dict(os.environ, EOSLAB_SIDECAR_TOKEN=TOKEN, PYTHONPATH=ROOT)
        self.proc = self.nss.spawn(self.nss.a, sys.executable, "-m", "services.sidecar",
                                   "--listen", self.address, "--service-port", str(SERVICE_PORT),
                                   "--peer", f"peer-b={B_IP}", "--peer", f"peer-c={UNUSED_IP}",
                                   env=env, stdout=open(self.log, "a"), stderr=subprocess.STDOUT)
        from services.sidecar.client import SidecarClient, SidecarError
        deadline = time.monotonic() + 15
        while True:
            try:
                with SidecarClient(self.address, TOKEN, timeout=1) as c:
                    c.rules()
                return
            except SidecarError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(f"sidecar did not start: {open(self.log).read()[-2000:]}")
                time.sleep(0.1)

    def client(self, token: str = TOKEN):
        from services.sidecar.client import SidecarClient
        return SidecarClient(self.address, token, timeout=5)


@pytest.fixture
def nss(tmp_path):
    why = _why_no_netns()
    if why:
        pytest.skip(why)
    n = Namespaces(str(tmp_path))
    try:
        n.create()
    except AssertionError as e:
        n.destroy()
        pytest.skip(f"cannot create network namespaces here: {e}")
    yield n
    n.destroy()


@pytest.fixture
def sidecar(nss):
    sock_dir = tempfile.mkdtemp(prefix="eoslab-sc-")   # short: unix socket paths are capped at 108 bytes
    s = SidecarProcess(nss, os.path.join(sock_dir, "api.sock"))
    s.start()
    yield s
    if s.proc.poll() is None:
        s.proc.terminate()
        s.proc.wait(10)
    shutil.rmtree(sock_dir, ignore_errors=True)


def ns_iptables(ns: str) -> str:
    return in_ns(ns, "iptables", "-S").stdout + in_ns(ns, "iptables", "-t", "nat", "-S").stdout


def ns_qdiscs(ns: str) -> str:
    return in_ns(ns, "tc", "qdisc", "show").stdout
