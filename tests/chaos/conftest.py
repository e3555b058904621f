"""The chaos suites' cluster: one per test module (and pytest-xdist worker), shared by its runs.

A module sets CLUSTER_ARGS (LocalRuntime keyword arguments) to shape it. Each run uses the cluster
through `eoslab run --cluster`, with a topic of its own; the runs' nemesis heals and restarts what it
broke before the next run starts.
"""
import os
import uuid

import pytest

from cluster.local import LocalRuntime
from tests.conftest import _zookeeper_missing


@pytest.fixture(scope="module")
def shared(eoslab_home, request):
    missing = _zookeeper_missing()
    if missing:
        pytest.fail(f"chaos tests need ZooKeeper and Java: {missing}")
    old = os.environ.get("EOSLAB_HOME")
    os.environ["EOSLAB_HOME"] = eoslab_home
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw")
    args = getattr(request.module, "CLUSTER_ARGS", {})
    rt = LocalRuntime(f"chaos-{worker}-{uuid.uuid4().hex[:6]}", home=eoslab_home, **args)
    rt.up()
    yield rt
    # the runs restart nodes through their own LocalRuntime objects: stop what state.json names now
    LocalRuntime.load(rt.cluster_name, home=eoslab_home).down()
    if old is None:
        os.environ.pop("EOSLAB_HOME", None)
    else:
        os.environ["EOSLAB_HOME"] = old
