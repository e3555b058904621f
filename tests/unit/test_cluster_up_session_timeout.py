"""`cluster up`'s ZooKeeper session timeout: without --session-timeout-ms each runtime keeps its own default
(2 s on the local runtime, EOSLAB_ZK_SESSION_TIMEOUT_MS or 2 s on Docker); the flag, when given,
reaches the runtime as given. None of these tests needs a Docker engine."""
import pytest

from cluster import cli, runtimes

pytestmark = pytest.mark.fast


class Stop(Exception):
    pass


def up_kwargs(monkeypatch, argv) -> dict:
    """The keyword arguments `cluster up` opens its runtime with (the runtime is never started)."""
    seen = {}

    def capture(kind, name, **kw):
        seen.update(kw, kind=kind)
        raise Stop

    monkeypatch.setattr(runtimes, "open_runtime", capture)
    import argparse
    ap = argparse.ArgumentParser()
    cli.register(ap.add_subparsers(dest="cmd"))
    args = ap.parse_args(["cluster", "up", *argv])
    with pytest.raises(Stop):
        args.func(args)
    return seen


def test_without_the_flag_the_runtime_keeps_its_own_default(monkeypatch, tmp_path):
    kw = up_kwargs(monkeypatch, ["--name", "t"])
    assert "session_timeout_ms" not in kw and kw["kind"] == "local"
    from cluster.local import LocalRuntime
    rt = LocalRuntime("t", home=str(tmp_path))
    assert rt.state["session_timeout_ms"] == LocalRuntime.DEFAULT_SESSION_TIMEOUT_MS == 2000


def test_the_flag_reaches_the_runtime(monkeypatch):
    assert up_kwargs(monkeypatch, ["--name", "t", "--session-timeout-ms", "900"])["session_timeout_ms"] == 900


def test_docker_takes_its_environment_s_session_timeout(monkeypatch):
    """`cluster up --runtime docker` used to pass 2000 whatever EOSLAB_ZK_SESSION_TIMEOUT_MS said."""
    from cluster.docker_runtime import DockerRuntime
    monkeypatch.setenv("EOSLAB_ZK_SESSION_TIMEOUT_MS", "3000")
    assert DockerRuntime.resolve_session_timeout_ms(None) == 3000
    assert DockerRuntime.resolve_session_timeout_ms(900) == 900
    monkeypatch.delenv("EOSLAB_ZK_SESSION_TIMEOUT_MS")
    assert DockerRuntime.resolve_session_timeout_ms(None) == 2000
    with pytest.raises(Exception, match="at least 400"):
        DockerRuntime.resolve_session_timeout_ms(100)
