"""Choosing a runtime is quick and never hangs, whatever is (or is not) behind the Docker socket.

`make cluster-up` and `--runtime auto` probe /var/run/docker.sock first; a
missing socket, a socket nobody listens on, an engine that accepts and never
answers, and one that answers nonsense must each give `local` with the
reason, within the probe's timeout. Real unix sockets, no engine needed:
these run under `make test`.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from cluster.runtimes import ENGINE_PROBE_S, RuntimeChoiceError, choose, open_runtime
from tests.docker.conftest import ROOT, eoslab

pytestmark = pytest.mark.fast


@pytest.fixture
def sock_path(tmp_path):
    return str(tmp_path / "docker.sock")


def timed_choice(path: str):
    t0 = time.monotonic()
    kind, why = choose("auto", sock_path=path)
    return kind, why, time.monotonic() - t0


def test_no_socket_means_local_at_once(sock_path):
    kind, why, took = timed_choice(sock_path)
    assert (kind, took < 0.5) == ("local", True) and "does not exist" in why


def test_a_socket_nobody_listens_on_means_local_at_once(sock_path):
    s = socket.socket(socket.AF_UNIX)
    s.bind(sock_path)                      # bound, never listening: connect is refused
    try:
        kind, why, took = timed_choice(sock_path)
    finally:
        s.close()
    assert (kind, took < 0.5) == ("local", True) and "no Docker engine answers" in why


def _serve(path: str, answer: bytes | None, stop: threading.Event, listening: threading.Event):
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(4)
    listening.set()
    srv.settimeout(0.1)
    conns = []
    while not stop.is_set():
        try:
            c, _ = srv.accept()
        except socket.timeout:
            continue
        conns.append(c)
        if answer is not None:
            c.recv(4096)
            c.sendall(answer)
            c.close()
    for c in conns:
        c.close()
    srv.close()


@pytest.mark.parametrize("answer, needle", [(None, "did not answer within"), (b"nonsense", "not an HTTP answer"),
                                            (b"HTTP/1.0 500 Oops\r\n\r\n", "HTTP 500")])
def test_a_hung_or_strange_engine_means_local_within_the_probe_timeout(sock_path, answer, needle):
    stop, listening = threading.Event(), threading.Event()
    t = threading.Thread(target=_serve, args=(sock_path, answer, stop, listening), daemon=True)
    t.start()
    assert listening.wait(10)
    try:
        kind, why, took = timed_choice(sock_path)
    finally:
        stop.set()
        t.join(5)
    assert kind == "local" and needle in why, why
    assert took < ENGINE_PROBE_S + 1.0


def test_make_and_the_cli_say_local_and_why_when_no_engine_is_there(tmp_path):
    env = dict(os.environ, EOSLAB_DOCKER_SOCKET=str(tmp_path / "none.sock"), EOSLAB_HOME=str(tmp_path))
    r = subprocess.run([sys.executable, "-m", "cluster.runtimes", "choose", "auto", "--images-optional"],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=30)
    assert r.returncode == 0 and r.stdout.startswith("local no Docker engine"), r.stdout + r.stderr
    r = eoslab("cluster", "status", "--name", "nowhere", env=env, timeout=30)
    assert r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1 and "no local cluster" in r.stderr


@pytest.mark.parametrize("args, needle", [
    (["choose", "podman"], "unknown runtime 'podman'"),
    (["pick"], "usage:"),
])
def test_bad_choices_are_one_line(args, needle):
    r = subprocess.run([sys.executable, "-m", "cluster.runtimes", *args], capture_output=True, text=True,
                       cwd=ROOT, timeout=30)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and needle in r.stderr, r.stderr


def test_the_factory_refuses_nonsense_before_touching_any_engine():
    from cluster.docker_runtime import DockerRuntimeError
    with pytest.raises(RuntimeChoiceError, match="unknown runtime 'vm'"):
        open_runtime("vm", "x")
    with pytest.raises(DockerRuntimeError, match="1 to 3 brokers, not 5"):
        open_runtime("docker", "x", brokers=5)
    with pytest.raises(DockerRuntimeError, match="without spaces"):
        open_runtime("docker", "x", broker_args=["--a b"])
    with pytest.raises(DockerRuntimeError, match="172.28.0.0/16"):
        open_runtime("docker", "x", net="10.0.0")
