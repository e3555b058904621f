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

