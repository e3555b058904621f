"""Typed service configs (eoslab.common.config and the three services' configs): flags, environment, the
release's defaults, refusals in one line, and docs/configuration.md kept in step with the declarations."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from eoslab.common.config import ConfigError
from services.broker.config import BrokerConfig
from services.controller.config import ControllerConfig
from services.txn_coordinator.config import CoordinatorConfig

pytestmark = pytest.mark.fast
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BROKER = ["--broker-id", "1", "--listen", "127.0.0.1:1", "--zookeeper", "z:1", "--data-dir", "/tmp/x"]


def test_flags_then_environment_then_defaults():
    c = BrokerConfig.parse(BROKER + ["--replica-lag-time-max-ms=7000"],
                           env={"EOSLAB_REPLICA_LAG_TIME_MAX_MS": "9000", "EOSLAB_MIN_INSYNC_REPLICAS": "2"})
    assert c.replica_lag_time_max_ms == 7000          # the flag wins over the environment
    assert c.min_insync_replicas == 2                 # the environment over the default
    assert c.segment_bytes == 16 * 1024 * 1024        # the default
    assert c.advertise is None and c.enable_fault_injection is False


def test_release_fills_the_switches_not_given():
    old = BrokerConfig.parse(BROKER + ["--kafka-version=0.11"], env={})
    assert (old.producer_state_batches, old.unknown_producer, old.transaction_verification) == \
        (1, "OUT_OF_ORDER_SEQUENCE_NUMBER", False)
    new = BrokerConfig.parse(BROKER + ["--kafka-version=4.0", "--no-transaction-verification",
                                       "--producer-state-batches=3"], env={})
    assert (new.producer_state_batches, new.transaction_verification) == (3, False)
    tc = CoordinatorConfig.parse(["--coordinator-id=1", "--listen=a:1", "--zookeeper=z", "--bootstrap=b",
                                  "--kafka-version=3.0"], env={})
    assert (tc.epoch_bump_per_transaction, tc.init_with_producer_id) == (False, True)


@pytest.mark.parametrize("argv,says", [
    (["--replica-lag-time-max-ms=0"], "--replica-lag-time-max-ms must be at least 1 (got 0)"),
    (["--unknown-producer=maybe"], "--unknown-producer: 'maybe' is not one of"),
    (["--kafka-version=9.9"], "--kafka-version: '9.9' is not one of"),
    (["--segment-bytes=big"], "--segment-bytes: 'big' is not an integer"),
])
def test_bad_values_are_one_line(argv, says):
    with pytest.raises(ConfigError) as e:
        BrokerConfig.parse(BROKER + argv, env={})
    assert says in str(e.value) and "\n" not in str(e.value)


def test_a_required_setting_missing_is_named():
    with pytest.raises(ConfigError, match="--zookeeper"):
        ControllerConfig.parse(["--controller-id=1", "--listen=a:1"], env={})


def test_the_service_refuses_a_bad_flag_in_one_line_and_starts_nothing(tmp_path):
    r = subprocess.run([sys.executable, "-m", "services.broker", *BROKER, "--max-message-bytes=-1"],
                       capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode != 0
    assert r.stderr.strip() == "python -m services.broker: --max-message-bytes must be at least 1 (got -1)"


def test_configuration_page_is_generated_from_the_declarations():
    r = subprocess.run([sys.executable, os.path.join(REPO, "tools", "config_docs.py"), "--check"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(REPO, "docs", "configuration.md")) as f:
        page = f.read()
    for cfg in (BrokerConfig, ControllerConfig, CoordinatorConfig):
        for k in cfg.DEF.keys:
            assert f"`{k.flag}` / `{k.env}`" in page
