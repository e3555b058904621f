"""Chaos suites of the queue workload: every fault package that makes sense without transaction
coordinators (all but kill-coordinator) against the safe configuration must come out valid.

The safe configuration: idempotent producer, acks=all, replication factor 3,
min.insync.replicas 2, clean leader election. `make test` runs one short
seed per package (marker integration); `make chaos` adds longer runs over
several seeds (marker slow). The runs share one cluster per module (and
worker), shaped as `eoslab run` shapes a queue run's own cluster (no
transaction coordinators); tests/integration/test_run.py covers a run that
starts its own. The verdict is the checker's (`eoslab check --model
kafka`), read from results.json. The transactional workloads' suites are in
test_workloads.py.
"""
import importlib.util

import pytest

from tests.chaos.runs import FAULTS, assert_valid, run_once

CLUSTER_ARGS = {"txn_coordinators": 0}
PACKAGES = FAULTS["queue"]

needs_checker = pytest.mark.skipif(importlib.util.find_spec("checker.cli") is None,
                                   reason="the Kafka checker (eoslab check) is not in this build")


@needs_checker
@pytest.mark.integration
@pytest.mark.parametrize("package", PACKAGES)
def test_short_run_is_valid(shared, tmp_path, package):
    code, results, meta = run_once(tmp_path, "queue", [package], seed=1, time_limit=8, cluster=shared.cluster_name)
    assert meta["schedule"], "the nemesis scheduled no fault"
    assert_valid(code, results, meta, f"queue x {package}")
    assert results["stats"]["records"]["acked"] > 0


@needs_checker
@pytest.mark.slow
@pytest.mark.parametrize("seed", [11, 12, 13])
@pytest.mark.parametrize("package", PACKAGES)
def test_long_run_is_valid(shared, tmp_path, package, seed):
    code, results, meta = run_once(tmp_path, "queue", [package], seed=seed, time_limit=40,
                                   cluster=shared.cluster_name)
    assert_valid(code, results, meta, f"queue x {package} seed {seed}")
