"""The fault sidecar against real network namespaces: refusals, faults with effect, reports, removal.

Each test runs a sidecar process inside namespace A (see conftest.py) with
peer namespace B, and checks both what the sidecar reports and what the
traffic between the namespaces actually does.
"""
from __future__ import annotations

import signal
import time

import grpc
import pytest

from services.sidecar.client import SidecarError
from tests.sidecar.conftest import (A_IP, B_IP, PEER_PORT, SERVICE_PORT, ns_iptables, ns_qdiscs)

pytestmark = pytest.mark.integration


def refused(call) -> SidecarError:
    with pytest.raises(SidecarError) as e:
        call()
    return e.value


def only_guards(ns: str) -> None:
    """The sidecar's chains hold nothing but its loopback / control-port guards, and no qdisc of ours."""
    rules = [ln for ln in ns_iptables(ns).splitlines() if ln.startswith("-A EOSLAB-SC")]
    assert all("RETURN" in ln for ln in rules), rules
    assert "htb" not in ns_qdiscs(ns)


def test_requests_without_the_token_are_refused(sidecar):
    for token in ("", "wrong-token"):
        with sidecar.client(token) as c:
            for call in (c.rules, c.heal, lambda: c.partition(["peer-b"])):
                assert refused(call).code == grpc.StatusCode.UNAUTHENTICATED
    with sidecar.client() as c:
        assert list(c.rules().rules) == []
    only_guards(sidecar.nss.a)


@pytest.mark.parametrize("call, field", [
    (lambda c: c.partition(["no-such-peer"]), "unknown peer 'no-such-peer'"),
    (lambda c: c.partition([]), "at least one peer"),
    (lambda c: c.partition(["127.0.0.1"]), "loopback"),
    (lambda c: c.bandwidth(-1000, ["peer-b"]), "rate_bits_per_second: must be positive"),
    (lambda c: c.bandwidth(1000, ["peer-b"], burst_bytes=-1), "burst_bytes"),
    (lambda c: c.loss(-0.1, ["peer-b"]), "probability: must be in (0, 1]"),
    (lambda c: c.loss(1.5), "probability: must be in (0, 1]"),
    (lambda c: c.loss(float("nan")), "probability"),
    (lambda c: c.reset(["peer-b"], port=70000), "port: must be in [0, 65535]"),
    (lambda c: c.delay(-5, peers=["peer-b"]), "delay_ms"),
    (lambda c: c.delay(10, jitter_ms=20, peers=["peer-b"]), "jitter_ms"),
    (lambda c: c.drop_responses(["peer-b"], probability=2.0), "probability"),
])
def test_nonsense_is_refused_with_a_clear_error_and_changes_nothing(sidecar, call, field):
    with sidecar.client() as c:
        err = refused(lambda: call(c))
        assert err.code == grpc.StatusCode.INVALID_ARGUMENT
        assert field in err.message
        assert list(c.rules().rules) == []
    only_guards(sidecar.nss.a)


def test_partition_cuts_the_peer_off_and_heal_restores_it(sidecar, tmp_path):
    nss = sidecar.nss
    nss.echo_server(nss.a, SERVICE_PORT, str(tmp_path / "a.log"))
    assert nss.roundtrip(nss.b, A_IP, SERVICE_PORT)[0] == 0
    with sidecar.client() as c:
        r = c.partition(["peer-b"])
        assert [(x.kind, x.id) for x in r.rules] == [("partition", "r1")]
        assert f"peer-b ({B_IP})" in r.rules[0].description
        assert any(f"-s {B_IP}/32" in ln and "DROP" in ln for ln in r.iptables)
        assert any(f"-d {B_IP}/32" in ln and "DROP" in ln for ln in r.iptables)
        assert nss.roundtrip(nss.b, A_IP, SERVICE_PORT)[0] == 3        # timed out: packets dropped
        healed = c.heal()
        assert list(healed.rules) == [] and not any("DROP" in ln for ln in healed.iptables)
    assert nss.roundtrip(nss.b, A_IP, SERVICE_PORT)[0] == 0
    only_guards(nss.a)


def test_one_way_partition_blocks_only_that_direction(sidecar, tmp_path):
    nss = sidecar.nss
    nss.echo_server(nss.b, PEER_PORT, str(tmp_path / "b.log"))
    with sidecar.client() as c:
        r = c.partition([B_IP], direction="inbound")
        assert all(f"-d {B_IP}" not in ln for ln in r.iptables)
    # A's SYN leaves, B's answer is dropped on the way in: the connection never completes.
    assert nss.roundtrip(nss.a, B_IP, PEER_PORT)[0] == 3


def test_reset_answers_with_tcp_reset(sidecar, tmp_path):
    nss = sidecar.nss
    nss.echo_server(nss.a, SERVICE_PORT, str(tmp_path / "a.log"))
    with sidecar.client() as c:
        r = c.reset(["peer-b"], port=SERVICE_PORT)
        assert any("tcp-reset" in ln for ln in r.iptables)
    code, _ = nss.roundtrip(nss.b, A_IP, SERVICE_PORT, timeout=3)
    assert code == 4                                                 # reset, not a timeout


def test_drop_responses_loses_the_answer_but_the_request_arrives(sidecar, tmp_path):
    """The lost ACK: the service gets the request; the peer never sees the answer."""
    nss = sidecar.nss
    log = tmp_path / "a.log"
    nss.echo_server(nss.a, SERVICE_PORT, str(log))
    # The connection is set up before the fault (the SYN-ACK would be dropped too).
    script = ("import socket,sys,time\n"
              f"s=socket.create_connection(('{A_IP}',{SERVICE_PORT}),timeout=2)\n"
              "print('connected',flush=True); sys.stdin.readline()\n"
              "s.sendall(b'ping')\n"
              "try:\n  s.recv(16); print('answered')\nexcept (TimeoutError, OSError): print('lost')\n")
    import subprocess
    import sys
    p = nss.spawn(nss.b, sys.executable, "-c", script, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "connected"
    with sidecar.client() as c:
        r = c.drop_responses(["peer-b"])                         # port defaults to --service-port
        assert r.rules[0].kind == "drop-responses"
        assert any(f"--sport {SERVICE_PORT}" in ln and "DROP" in ln for ln in r.iptables)
    p.stdin.write("\n")
    p.stdin.flush()
    assert p.stdout.readline().strip() == "lost"
    p.wait(5)
    assert "ping" in log.read_text()                              # the request was handled


def test_loss_and_bandwidth_are_reported_and_removed(sidecar):
    with sidecar.client() as c:
        c.loss(0.25, ["peer-b"], direction="outbound")
        r = c.bandwidth(1_000_000, ["peer-b", "peer-c"])
        assert [x.kind for x in r.rules] == ["loss", "bandwidth"]
        assert any("statistic" in ln and "0.25" in ln for ln in r.iptables)
        assert any("htb" in ln for ln in r.tc) and any("1Mbit" in ln for ln in r.tc)
        assert "htb" in ns_qdiscs(sidecar.nss.a)
        assert c.rules().rules[1].commands                       # the tc commands that made it
        c.heal()
    only_guards(sidecar.nss.a)


def test_bandwidth_limit_slows_a_transfer(sidecar, tmp_path):
    nss = sidecar.nss
    nss.echo_server(nss.b, PEER_PORT, str(tmp_path / "b.log"))
    send = ("import socket,time\n"
            f"s=socket.create_connection(('{B_IP}',{PEER_PORT}),timeout=10)\n"
            "t=time.monotonic(); s.sendall(b'x'*200000); s.shutdown(1)\n"
            "n=0\nwhile n<200000:\n  d=s.recv(65536)\n  if not d: break\n  n+=len(d)\n"
            "print(time.monotonic()-t)\n")
    import sys
    from tests.sidecar.conftest import in_ns
    fast = float(in_ns(nss.a, sys.executable, "-c", send).stdout)
    with sidecar.client() as c:
        c.bandwidth(2_000_000, ["peer-b"])                        # 200 kB out at 2 Mbit/s: >= 0.8 s
    slow = float(in_ns(nss.a, sys.executable, "-c", send).stdout)
    assert fast < 0.5 and slow > 0.6, (fast, slow)


def test_delay_without_netem_goes_through_the_proxy(sidecar, tmp_path):
    nss = sidecar.nss
    nss.echo_server(nss.b, PEER_PORT, str(tmp_path / "b.log"))
    nss.echo_server(nss.a, SERVICE_PORT, str(tmp_path / "a.log"))
    code, before = nss.roundtrip(nss.a, B_IP, PEER_PORT)
    assert code == 0 and before < 0.1
    with sidecar.client() as c:
        r = c.delay(150, jitter_ms=10, peers=["peer-b"])
        if r.delay_mode == "netem":
            pytest.skip("this kernel has netem: the proxy fallback is not used")
        assert r.rules[0].kind == "delay" and "proxy" in r.rules[0].description
        assert any("REDIRECT" in ln for ln in r.iptables)
        code, out = nss.roundtrip(nss.a, B_IP, PEER_PORT, timeout=5)     # A -> B: request and answer delayed
        assert code == 0 and out >= 0.28, out
        code, inb = nss.roundtrip(nss.b, A_IP, SERVICE_PORT, timeout=5)  # B -> A: through PREROUTING
        assert code == 0 and inb >= 0.28, inb
        c.heal()
    code, after = nss.roundtrip(nss.a, B_IP, PEER_PORT)
    assert code == 0 and after < 0.1
    only_guards(nss.a)


def test_sigterm_removes_every_rule_and_the_chains(sidecar):
    with sidecar.client() as c:
        c.partition(["peer-b"])
        c.bandwidth(1_000_000)
        c.delay(50, peers=["peer-c"])
    assert "EOSLAB-SC" in ns_iptables(sidecar.nss.a)
    sidecar.proc.send_signal(signal.SIGTERM)
    assert sidecar.proc.wait(10) == 0
    assert "EOSLAB-SC" not in ns_iptables(sidecar.nss.a)
    assert "htb" not in ns_qdiscs(sidecar.nss.a)


def test_a_new_sidecar_removes_what_a_killed_one_left(sidecar, tmp_path):
    with sidecar.client() as c:
        c.partition(["peer-b"])
        c.bandwidth(1_000_000)
    sidecar.proc.kill()
    sidecar.proc.wait(5)
    assert "DROP" in ns_iptables(sidecar.nss.a)                 # SIGKILL: nothing cleaned
    sidecar.start()
    with sidecar.client() as c:
        assert list(c.rules().rules) == []
    only_guards(sidecar.nss.a)
    time.sleep(0)
