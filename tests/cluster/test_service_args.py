"""Service flags and topic configs given to `eoslab cluster up` / `eoslab run` are checked by the services' own
parsers before anything starts: one readable line, at once (not a service exiting at start)."""
import time

import pytest

from cluster import service_args
from cluster.local import ClusterError, LocalRuntime
from cluster.run import RunConfig

pytestmark = pytest.mark.integration    # runs the services' parsers in child processes


def _run_config(tmp_path, **settings):
    return RunConfig(workload="queue", nemesis=[], time_limit=5, seed=0, out=str(tmp_path / "run"),
                     settings=settings)


@pytest.mark.parametrize("key,value,says", [
    ("broker.bogus-flag", "1", "unrecognized arguments: --bogus-flag=1"),
    ("broker.producer-state-batches", "many", "invalid int value: 'many'"),
    ("broker.max-message-bytes", "-1", "--max-message-bytes must be positive"),
    ("coordinator.transaction-max-timeout-ms", "0", "--transaction-max-timeout-ms must be positive"),
    ("topic.max.message.bytes", "1" + "0" * 40, "max.message.bytes must be between 1 and 2147483647"),
    ("topic.no.such.config", "1", "unknown topic config 'no.such.config'"),
])
def test_run_refuses_bad_settings_before_starting(tmp_path, key, value, says):
    t0 = time.monotonic()
    with pytest.raises(ValueError) as e:
        _run_config(tmp_path, **{key: value}).validate()
    assert says in str(e.value) and "\n" not in str(e.value)
    assert time.monotonic() - t0 < 20
    assert not (tmp_path / "run").exists()


def test_good_flags_pass():
    service_args.check("broker", ["--producer-state-batches=3", "--transaction-verification"])
    service_args.check("txn-coordinator", ["--epoch-bump-per-transaction"])


def test_cluster_up_refuses_an_unknown_broker_flag_at_once(tmp_path):
    rt = LocalRuntime("args-check", home=str(tmp_path), brokers=1, controllers=1, txn_coordinators=0,
                      broker_args=["--bogus-flag=1"])
    with pytest.raises(ClusterError) as e:
        rt.up(timeout=30)
    assert str(e.value) == "broker flags --bogus-flag=1: unrecognized arguments: --bogus-flag=1"
    assert not rt.state.get("nodes")                      # nothing was started
