"""`eoslab transactions` against a fake admin client: Kafka's TransactionsCommand rules without a cluster.

Checked: the table is ToolsUtils.prettyPrintTable's (cells padded to the column, each followed by a tab);
find-hanging keeps an open transaction older than --max-transaction-timeout whose producer id has no
transactional id, whose id its coordinator does not know, or whose coordinator does not list the
partition, and leaves one the coordinator still lists; abort by start offset takes that producer with
coordinator epoch -1 read as 0; input kafka-transactions.sh refuses is one line and exit 1, before any
connection.
"""
import argparse
from types import SimpleNamespace as NS

import pytest
from kafka import errors
from kafka.admin._transactions import PartitionProducerState, ProducerState
from kafka.structs import TopicPartition

from cluster import transactions_cli as tc
from eoslab import cli

pytestmark = pytest.mark.fast
NOW = 10 ** 13
MIN = 60000


def producer(pid, start, last_ts, coordinator_epoch=3):
    return ProducerState(producer_id=pid, producer_epoch=0, last_sequence=0, last_timestamp=last_ts,
                         coordinator_epoch=coordinator_epoch, current_transaction_start_offset=start)


class FakeAdmin:
    def __init__(self, producers, listings, descriptions):
        self.producers, self.listings, self.descriptions = producers, listings, descriptions
        self.aborted = []

    def describe_producers(self, tps, broker_id=None):
        return {tp: PartitionProducerState(self.producers.get(tp, [])) for tp in tps}

    def list_transactions(self, producer_id_filters=None, duration_filter_ms=None):
        return {1001: [NS(transactional_id=t, producer_id=p, state=NS(value="Ongoing"))
                       for p, t in self.listings.items() if not producer_id_filters or p in producer_id_filters]}

    def describe_transactions(self, tids):
        [tid] = tids
        if tid not in self.descriptions:
            raise errors.TransactionalIdNotFoundError(tid)
        return {tid: NS(topic_partitions=self.descriptions[tid])}

    def list_topics(self):
        return ["t"]

    def describe_topics(self, topics):
        return [{"name": "t", "error_code": 0, "partitions": [
            {"partition_index": i, "replica_nodes": [1, 2]} for i in range(5)]}]

    def abort_transaction(self, spec):
        self.aborted.append(spec)


def test_the_table_is_kafkas_pretty_print():
    assert tc.pretty_table(["A", "Long"], [["xyz", "1"]]) == "A  \tLong\t\nxyz\t1   \t\n"


def test_find_hanging_keeps_what_the_coordinator_cannot_finish(monkeypatch):
    monkeypatch.setattr(tc, "now_ms", lambda: NOW)
    tps = [TopicPartition("t", i) for i in range(5)]
    old = NOW - 16 * MIN
    admin = FakeAdmin(
        producers={tps[0]: [producer(1, 5, old)],                       # no transactional id: hanging
                   tps[1]: [producer(2, 6, old)],                       # id unknown to its coordinator
                   tps[2]: [producer(3, 7, old)],                       # coordinator lists other partitions
                   tps[3]: [producer(4, 8, old)],                       # coordinator lists it: it will finish
                   tps[4]: [producer(5, 9, NOW - 15 * MIN), producer(6, -1, old)]},   # too young, not open
        listings={2: "gone", 3: "other", 4: "live"},
        descriptions={"other": {tps[4]}, "live": {tps[3]}})
    args = argparse.Namespace(topic="t", partition=None, broker_id=None, max_transaction_timeout=15)
    rows = tc_rows(tc.find_hanging(admin, args))
    assert [(r[1], r[2], r[5], r[7]) for r in rows] == [("0", "1", "5", "16"), ("1", "2", "6", "16"),
                                                        ("2", "3", "7", "16")]


def tc_rows(text):
    lines = [[c.strip() for c in ln.split("\t")[:-1]] for ln in text.splitlines()]
    assert lines[0] == ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                        "LastTimestamp", "Duration(min)"]
    return lines[1:]


def test_abort_by_start_offset_takes_that_producer_with_coordinator_epoch_at_least_0():
    tp = TopicPartition("t", 0)
    admin = FakeAdmin({tp: [producer(9, 4, NOW, coordinator_epoch=-1), producer(8, 2, NOW)]}, {}, {})
    tc.abort(admin, argparse.Namespace(topic="t", partition=0, start_offset=4, producer_id=None))
    [spec] = admin.aborted
    assert (spec.topic_partition, spec.producer_id, spec.producer_epoch, spec.coordinator_epoch) == (tp, 9, 0, 0)
    with pytest.raises(cli.CliError, match="Could not find any open transactions starting at offset 3 on "
                                           "partition t-0") as e:
        tc.abort(admin, argparse.Namespace(topic="t", partition=0, start_offset=3, producer_id=None))
    assert e.value.code == 1


@pytest.mark.parametrize("args,message", [
    (["abort", "--topic", "t", "--partition", "0"], "must be identified either with --start-offset"),
    (["abort", "--topic", "t", "--partition", "0", "--producer-id", "5", "--coordinator-epoch", "1"],
     "Missing required argument --producer-epoch"),
    (["abort", "--topic", "t", "--partition", "0", "--producer-id", "5", "--producer-epoch", "1"],
     "Missing required argument --coordinator-epoch"),
    (["find-hanging"], "requires either --topic or --broker-id"),
    (["find-hanging", "--broker-id", "1", "--partition", "0"], "The --partition argument requires --topic"),
])
def test_refused_input_is_one_line_and_exit_1_before_connecting(args, message, capsys, monkeypatch):
    monkeypatch.setattr(tc, "admin_client", lambda boot, config=None: pytest.fail("connected"))
    assert cli.main(["transactions", "--bootstrap-server", "127.0.0.1:1", *args]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_cluster_that_does_not_answer_is_one_line_and_exit_1(capsys, monkeypatch):
    import kafka

    def refuse(**config):
        raise errors.NoBrokersAvailable()
    monkeypatch.setattr(kafka, "KafkaAdminClient", refuse)
    assert cli.main(["transactions", "--bootstrap-server", "127.0.0.1:1", "list"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("eoslab: cannot reach the cluster at 127.0.0.1:1: ") and err.count("\n") == 1


def test_command_config_passes_kafkas_settings_to_the_admin_client(tmp_path, capsys, monkeypatch):
    import kafka
    seen = {}

    def admin(**config):
        seen.update(config)
        raise errors.NoBrokersAvailable()
    monkeypatch.setattr(kafka, "KafkaAdminClient", admin)
    props = tmp_path / "admin.properties"
    props.write_text("# a comment\nclient.id = ops-1\nrequest.timeout.ms:5000\nmetadata.max.age.ms 1000\n")
    assert cli.main(["transactions", "--command-config", str(props), "--bootstrap-server", "h:1", "list"]) == 1
    assert (seen["client_id"], seen["request_timeout_ms"], seen["metadata_max_age_ms"], seen["bootstrap_servers"]) \
        == ("ops-1", 5000, 1000, ["h:1"])
    capsys.readouterr()
    missing = str(tmp_path / "missing.properties")
    assert cli.main(["transactions", "--command-config", missing, "--bootstrap-server", "h:1", "list"]) == 1
    assert capsys.readouterr().err.startswith("eoslab: Failed to load admin client properties: ")
