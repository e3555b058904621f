"""Shared fixtures: real local clusters (ZooKeeper, controllers, brokers as OS processes).

Each pytest-xdist worker gets its own clusters on its own loopback slot, so
workers never clash on addresses or ports. No test is rerun: a test that
fails once fails the run (a flaky test is a bug to fix).
"""
from __future__ import annotations

import os
import uuid

import pytest

from cluster.zookeeper import ZooKeeperMissing, find_zookeeper_classpath, java_binary


def _zookeeper_missing() -> str | None:
    try:
        find_zookeeper_classpath()
        java_binary()
    except ZooKeeperMissing as e:
        return str(e)
    return None


@pytest.fixture(scope="session")
def eoslab_home(tmp_path_factory):
    return str(tmp_path_factory.mktemp("eoslab-home"))


@pytest.fixture
def make_cluster(eoslab_home, request):
    """Factory: make_cluster(brokers=3, controllers=2, broker_args=[...]) -> LocalRuntime (up)."""
    from cluster.local import LocalRuntime
    missing = _zookeeper_missing()
    if missing:
        pytest.fail(f"integration tests need ZooKeeper and Java: {missing}")
    started = []

    def make(brokers=3, controllers=2, broker_args=None, controller_args=None, session_timeout_ms=2000, **kw):
        worker = os.environ.get("PYTEST_XDIST_WORKER", "gw")
        rt = LocalRuntime(f"t-{worker}-{uuid.uuid4().hex[:8]}", home=eoslab_home, brokers=brokers,
                          controllers=controllers, broker_args=broker_args, controller_args=controller_args,
                          session_timeout_ms=session_timeout_ms, **kw)
        started.append(rt)
        rt.up()
        return rt

    yield make
    for rt in started:
        if request.node.rep_call.failed if hasattr(request.node, "rep_call") else False:
            for n in rt.info().nodes:
                print(f"--- {n.name} log tail ---\n{rt.logs(n.name, 40)}")
        rt.down()


@pytest.fixture
def cluster(make_cluster):
    return make_cluster()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)



# An xdist worker talks to the controller over two pipes it holds open from its start. A test (or
# the code it runs in this process) that closes one of them by mistake, a double close of a number
# the kernel has since handed out again, ends the worker's session silently: the controller then
# stops the whole run with an INTERNALERROR naming whichever test it had queued next. These checks
# name the test that did it instead, with the stack of a Python-level close.
_CONTROL_PIPES: dict[int, str] = {}


def _pipes() -> dict[int, str]:
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith("pipe:"):
            out[int(name)] = target
    return out


def pytest_sessionstart(session):
    if os.environ.get("PYTEST_XDIST_WORKER") and os.path.isdir("/proc/self/fd"):
        _CONTROL_PIPES.update({fd: t for fd, t in _pipes().items() if fd > 2})
        real_close = os.close

        def guarded_close(fd, _real=real_close):
            if _CONTROL_PIPES.get(fd) is not None and _pipes().get(fd) == _CONTROL_PIPES[fd]:
                raise AssertionError(f"os.close({fd}) would close this pytest worker's control pipe "
                                     "(a double close of a file descriptor?)")
            return _real(fd)
        os.close = guarded_close


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    _check_control_pipes("during the test")
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    result = yield
    _check_control_pipes("in the test's teardown")
    return result


def _check_control_pipes(when: str) -> None:
    if not _CONTROL_PIPES:
        return
    now = _pipes()
    lost = [fd for fd, t in _CONTROL_PIPES.items() if now.get(fd) != t]
    if lost:
        _CONTROL_PIPES.clear()             # report once
        raise AssertionError(f"this pytest worker's control pipe(s) {lost} were closed or replaced {when}")
