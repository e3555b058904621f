"""Service flags and topic configs given to `eoslab cluster up` / `eoslab run` are checked against the services'
typed configs before anything starts: one readable line, at once (not a service exiting at start), in-process."""
import pytest

from cluster import service_args
from cluster.local import ClusterError, LocalRuntime
from cluster.run import RunConfig


def _run_config(tmp_path, **settings):
    return RunConfig(workload="queue", nemesis=[], time_limit=5, seed=0, out=str(tmp_path / "run"),
                     settings=settings)


@pytest.mark.fast
@pytest.mark.parametrize("key,value,says", [
    ("broker.bogus-flag", "1", "unrecognized arguments: --bogus-flag=1"),
    ("broker.producer-state-batches", "many", "--producer-state-batches: 'many' is not an integer"),
    ("broker.max-message-bytes", "-1", "--max-message-bytes must be at least 1 (got -1)"),
    ("broker.replica.lag.time.max.ms", "0", "--replica-lag-time-max-ms must be at least 1 (got 0)"),
    ("broker.data-dir", "/elsewhere", "--data-dir is set by the runtime, not by hand"),
    ("controller.pid-block-size", "0", "--pid-block-size must be at least 1 (got 0)"),
    ("coordinator.transaction-max-timeout-ms", "0", "--transaction-max-timeout-ms must be at least 1 (got 0)"),
    ("coordinator.epoch-bump-per-transaction", "maybe", "'maybe' is not true or false"),
    ("topic.max.message.bytes", "1" + "0" * 40, "for configuration max.message.bytes: out of the int range"),
    ("topic.no.such.config", "1", "Unknown topic config name: no.such.config"),
])
def test_run_refuses_bad_settings_before_starting(tmp_path, key, value, says):
    with pytest.raises(ValueError) as e:
        _run_config(tmp_path, **{key: value}).validate()
    assert says in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "run").exists()


@pytest.mark.fast
def test_good_flags_pass():
    service_args.check("broker", ["--producer-state-batches=3", "--transaction-verification"])
    service_args.check("txn-coordinator", ["--epoch-bump-per-transaction"])
    service_args.check("controller", ["--pid-block-size=10"])


@pytest.mark.fast
def test_run_takes_kafka_names_and_false_switches(tmp_path):
    _run_config(tmp_path, **{"broker.replica.lag.time.max.ms": "10000", "broker.transaction-verification": "false",
                             "coordinator.init.with.producer.id": "true"}).validate()


@pytest.mark.integration
def test_cluster_up_refuses_an_unknown_broker_flag_at_once(tmp_path):
    rt = LocalRuntime("args-check", home=str(tmp_path), brokers=1, controllers=1, txn_coordinators=0,
                      broker_args=["--bogus-flag=1"])
    with pytest.raises(ClusterError) as e:
        rt.up(timeout=30)
    assert str(e.value) == "broker flags --bogus-flag=1: unrecognized arguments: --bogus-flag=1"
    assert not rt.state.get("nodes")                      # nothing was started
