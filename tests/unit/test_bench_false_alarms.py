"""bench/false_alarms.py plays each fault package in a configuration Kafka is safe under: a disk package's
power loss with an fsync per append, unless Kafka's default flush is asked for."""
from __future__ import annotations

import pytest

from cluster.nemesis import PACKAGES
from cluster.nemesis_disk import DISK_PACKAGES
from tests.helpers import script_module

pytestmark = pytest.mark.fast


def _bench():
    return script_module("bench", "false_alarms.py")


def _settings(cmd: list[str]) -> list[str]:
    return [cmd[i + 1] for i, a in enumerate(cmd) if a == "--set"]


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_a_disk_package_runs_with_an_fsync_per_append_and_no_other_does(package):
    fa = _bench()
    for workload in ("queue", "txn"):
        cmd = fa.run_command(workload, package, 7, "/tmp/out", 10.0, [])
        assert cmd[cmd.index("--nemesis") + 1] == package and cmd[cmd.index("--workload") + 1] == workload
        assert ("broker.flush-messages=1" in _settings(cmd)) == (package in DISK_PACKAGES), cmd
        if workload == "txn":
            assert "isolation.level=read_committed" in _settings(cmd)


def test_kafka_default_flush_plays_the_disk_packages_without_the_fsync():
    fa = _bench()
    for package in DISK_PACKAGES:
        cmd = fa.run_command("queue", package, 1, "/tmp/out", 10.0, ["--set", "broker.zk-session-timeout-ms=500"],
                             kafka_default_flush=True)
        assert _settings(cmd) == ["broker.zk-session-timeout-ms=500"], cmd
