"""`eoslab run` plumbing without a cluster: the workload registry, settings, error classification."""
import os
import subprocess
import sys

import pytest

from eoslab.common.errors import E, KafkaError
from cluster import nemesis as nem
from cluster.run import RunConfig
from cluster.workloads import WORKLOADS, workload_class
from cluster.workloads.base import outcome

pytestmark = pytest.mark.fast
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cfg(**kw):
    base = dict(workload="txn", nemesis=["loss"], time_limit=5, seed=1, out="/nonexistent")
    base.update(kw)
    return RunConfig(**base)


def test_every_registered_workload_has_the_queue_interface():
    for name in WORKLOADS:
        cls = workload_class(name)
        assert cls.name == name
        for method in ("setup", "start", "halt", "final_reads", "transactional_ids", "notes"):
            assert callable(getattr(cls, method)), (name, method)
    assert workload_class("txn").transactional and not workload_class("queue").transactional
    assert workload_class("copier").strict_unseen


def test_new_fault_packages_are_known_and_scheduled_from_the_seed():
    assert {"loss", "kill-coordinator", "delay-end-txn"} <= set(nem.PACKAGES)
    a = nem.schedule(["loss", "kill-coordinator"], 30, seed=4)
    assert a == nem.schedule(["loss", "kill-coordinator"], 30, seed=4)
    assert {e.package for e in a} == {"loss", "kill-coordinator"}
    for prev, nxt in zip(a, a[1:]):
        assert prev.at + prev.duration < nxt.at          # start/stop pairs, one at a time


def test_settings_are_routed_by_prefix():
    s = cfg(settings={"broker.transaction.verification": "true", "broker.producer-state-batches": "5",
                      "coordinator.epoch-bump-per-transaction": "true", "controller.pid-block-size": "7",
                      "topic.min.insync.replicas": "2", "workload.abort-ratio": "0.5",
                      "isolation.level": "read_uncommitted", "acks": "all",
                      "broker.transaction-verification": "false"}).split_settings()
    assert s.broker_args() == ["--kafka-version=4.0", "--transaction-verification", "--producer-state-batches=5",
                               "--no-transaction-verification"]
    assert s.coordinator_args() == ["--kafka-version=4.0", "--epoch-bump-per-transaction"]
    assert s.controller_args() == ["--kafka-version=4.0", "--pid-block-size=7"]   # KIP-966 is a release rule
    assert s.topic == {"min.insync.replicas": "2"}
    assert s.workload == {"abort-ratio": "0.5"}
    assert s.consumer == {"isolation.level": "read_uncommitted"}
    assert s.producer == {"acks": "all", "kafka.version": "4.0"}
    assert s.sets_services_beyond_brokers()


def test_only_broker_settings_run_on_every_runtime():
    """The release flag the lab adds is not a coordinator setting of the user's: a run on Docker with
    broker.* settings only is fine; a controller.* or coordinator.* one needs the local runtime."""
    assert not cfg(settings={"broker.producer-state-batches": "5"}).split_settings().sets_services_beyond_brokers()
    for key in ("controller.pid-block-size", "coordinator.epoch-bump-per-transaction"):
        with pytest.raises(ValueError, match="need the local runtime"):
            cfg(runtime="docker", settings={key: "7" if "pid" in key else "true"}).validate()


def test_kafka_version_reaches_every_service_and_the_producer():
    s = cfg(kafka_version="2.5", settings={"coordinator.epoch-bump-per-transaction": "true"}).split_settings()
    assert s.broker_args() == ["--kafka-version=2.5"]
    assert s.coordinator_args() == ["--kafka-version=2.5", "--epoch-bump-per-transaction"]   # the override comes last
    assert s.producer["kafka.version"] == "2.5"
    with pytest.raises(ValueError, match="unknown Kafka version"):
        cfg(kafka_version="9.9").validate()


@pytest.mark.parametrize("kw,message", [
    (dict(workload="nope"), "unknown workload"),
    (dict(nemesis=["flood"]), "unknown fault package"),
    (dict(settings={"workload.nope": "1"}), "unknown setting workload.nope"),
    (dict(settings={"workload.abort-ratio": "lots"}), "expected float"),
    (dict(workload="copier", settings={"workload.offsets": "nowhere"}), "must be one of"),
    (dict(settings={"isolation.level": "serializable"}), "isolation.level"),
    (dict(workload="queue", settings={"workload.producers": "1", "workload.resend": "restart"}),
     "cannot go with workload.producers"),
    (dict(workload="queue", settings={"workload.resend": "twice"}), "must be one of"),
    (dict(settings={"transactional.id": "mine"}), "set by the workload"),
    (dict(settings={"linger": "1"}), "unknown producer setting"),
    (dict(runtime="mainframe"), "not available"),
    (dict(time_limit=0), "positive"),
])
def test_bad_settings_are_refused_before_anything_starts(kw, message):
    with pytest.raises(ValueError, match=message):
        cfg(**kw).validate()


def test_bad_input_on_the_command_line_is_one_line_on_stderr(tmp_path):
    r = subprocess.run([sys.executable, "-m", "eoslab", "run", "--workload", "txn", "--nemesis", "loss",
                        "--set", "workload.max-sends=many", "--out", str(tmp_path / "x")],
                       capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "workload.max-sends" in r.stderr
    assert "Traceback" not in r.stderr


def test_outcome_follows_the_errors_table_and_unanswered_attempts():
    assert outcome(KafkaError(E.NOT_ENOUGH_REPLICAS)) == ("fail", "NOT_ENOUGH_REPLICAS")
    assert outcome(KafkaError(E.NOT_LEADER_OR_FOLLOWER)) == ("info", "NOT_LEADER_OR_FOLLOWER")
    assert outcome(KafkaError(E.PRODUCER_FENCED)) == ("fail", "PRODUCER_FENCED")
    retried = KafkaError(E.PRODUCER_FENCED)
    retried.maybe_applied = True             # an EndTxn whose first attempt got no answer
    assert outcome(retried) == ("info", "PRODUCER_FENCED")
    assert outcome(TimeoutError()) == ("info", "TimeoutError")


def test_on_0_11_the_workload_producer_gets_one_request_in_flight():
    assert cfg(kafka_version="0.11").split_settings().producer["max.in.flight.requests.per.connection"] == "1"
    cfg(kafka_version="0.11").validate()                      # the txn workload's producer is idempotent
    s = cfg(kafka_version="0.11", settings={"max.in.flight": "3", "enable.idempotence": "false"}).split_settings()
    assert "max.in.flight.requests.per.connection" not in s.producer
