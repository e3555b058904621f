"""ChangeNotificationListener on a real ZooKeeper: each notification after the snapshot handled once, in
order, on the listener's one thread; a bad one passed over; old ones purged; `/config/changes` routed by
entity type (Kafka's names kept as written); ACLs and broker configs followed per changed entity."""
import json
import os
import threading
import time
import uuid

import pytest
from kazoo.client import KazooClient

from eoslab.common import acl as a
from eoslab.common import auth
from eoslab.common.config_ops import SET
from eoslab.common.time import MockTime
from services.common import entity_configs
from services.broker.authorizer import AclAuthorizer
from services.common.change_notifications import ChangeNotificationListener, config_change_handler
from services.broker.dynamic_config import DynamicBrokerConfig
from tests import helpers as h

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def zk(eoslab_home):
    from cluster.local import LocalRuntime
    rt = LocalRuntime(f"t-{os.environ.get('PYTEST_XDIST_WORKER', 'gw')}-notes-{uuid.uuid4().hex[:6]}",
                      home=eoslab_home, brokers=1, controllers=1)
    rt.up()
    client = KazooClient(hosts=rt.info().zookeeper, **auth.zk_kwargs(auth.read_secret_file(rt.secret_path)))
    client.start()
    yield client
    client.stop()
    client.close()
    rt.down()


def _notify(zk, path, data: bytes) -> None:
    zk.create(f"{path}/note_", data, sequence=True, makepath=True)


def test_each_notification_after_the_snapshot_is_handled_once_in_order_on_one_thread(zk):
    path = "/test-notes/ordered"
    _notify(zk, path, b"before")                   # there before start: the owner's load covers it
    seen, threads = [], set()

    def process(data):
        threads.add(threading.current_thread().name)
        if data == b"bad":
            raise ValueError("a handler's own error")
        seen.append(data)
    listener = ChangeNotificationListener(zk, path, process, name="notes-listener")
    listener.start()
    try:
        sent = [f"n{i}".encode() for i in range(30)]
        for i, data in enumerate(sent):
            _notify(zk, path, data)
            if i == 10:
                _notify(zk, path, b"bad")          # passed over, the rest still handled
        h.wait_for(lambda: len(seen) == 30, 30, "30 notifications handled")
        assert seen == sent
        assert threads == {"notes-listener"}
        assert listener.process_pending() == 0     # nothing is handled twice
    finally:
        listener.close()


def test_notifications_older_than_the_expiration_are_purged_after_a_pass(zk):
    path = "/test-notes/purged"
    # the listener's wall clock 16 minutes ahead of ZooKeeper's: every notification it has passed is old
    clock = MockTime(wall_ms=int(time.time() * 1000) + 16 * 60 * 1000)
    seen = []
    listener = ChangeNotificationListener(zk, path, seen.append, name="purging-listener", time=clock)
    listener.start()
    try:
        for i in range(3):
            _notify(zk, path, b"%d" % i)
        h.wait_for(lambda: len(seen) == 3 and not zk.get_children(path), 30, "handled, then purged")
        assert seen == [b"0", b"1", b"2"]
    finally:
        listener.close()
    young = []
    fresh = ChangeNotificationListener(zk, "/test-notes/kept", young.append, name="keeping-listener")
    fresh.start()
    try:
        _notify(zk, "/test-notes/kept", b"x")
        h.wait_for(lambda: young == [b"x"], 30, "handled")
        assert len(zk.get_children("/test-notes/kept")) == 1       # 15 minutes have not passed
        asked = []

        class Watched:                     # the listener's ZooKeeper client, its reads of one node counted
            def __getattr__(self, name):
                if name in ("get", "exists"):
                    asked.append(name)
                return getattr(zk, name)
        fresh.zk = Watched()
        assert fresh.process_pending() == 0
        assert asked == []                 # a notification's age is known from its read: no call per pass
    finally:
        fresh.close()


def test_a_listener_started_through_a_connection_loss_waits_for_zookeeper_instead_of_failing(zk):
    """A broker restarted during a ZooKeeper fault exited at start when the snapshot's read met a
    ConnectionLoss (a false-alarm sweep's lab error, 2026-11-27): the snapshot is retried as Kafka's
    ZooKeeperClient retries."""
    from kazoo.exceptions import ConnectionLoss
    path, failures = "/test-notes/flaky-start", [2]

    class Flaky:                            # the real client, its first two reads of the path lost
        def get_children(self, *args, **kw):
            if failures[0]:
                failures[0] -= 1
                raise ConnectionLoss()
            return zk.get_children(*args, **kw)

        def __getattr__(self, name):
            return getattr(zk, name)
    seen = []
    listener = ChangeNotificationListener(Flaky(), path, seen.append, name="flaky-start-listener")
    listener.start()
    try:
        assert failures == [0]
        _notify(zk, path, b"after")
        h.wait_for(lambda: seen == [b"after"], 30, "handled")
    finally:
        listener.close()


def test_config_changes_reach_the_entity_types_handler_with_kafkas_names(zk):
    got = []
    process = config_change_handler({"groups": lambda n: got.append(("groups", n)),
                                     "brokers": lambda n: got.append(("brokers", n))})
    entity_configs.write(zk, "groups", "team/a b", {"consumer.session.timeout.ms": "50000"}, None)
    entity_configs.write(zk, "brokers", "<default>", {"message.max.bytes": "2000"}, None)
    # Kafka's AdminZkClient writes a broker entity's name as it is, a user's sanitized
    assert zk.exists("/config/brokers/<default>") and zk.exists("/config/groups/team%2Fa%20b")
    notes = sorted(zk.get_children(entity_configs.CHANGES))[-2:]
    for note in notes:
        process(zk.get(f"{entity_configs.CHANGES}/{note}")[0])
    process(json.dumps({"version": 2, "entity_path": "users/alice"}).encode())      # no handler: ignored
    assert got == [("groups", "team/a b"), ("brokers", "<default>")]


def test_a_second_brokers_authorizer_follows_the_first_ones_acl_changes(zk):
    writer, reader = AclAuthorizer(zk), AclAuthorizer(zk)
    writer.start()
    reader.start()
    try:
        topic = a.AclBinding(a.TOPIC, "notes-topic", a.LITERAL, "User:alice", "*", a.READ, a.ALLOW)
        other = a.AclBinding(a.GROUP, "notes-", a.PREFIXED, "User:bob", "*", a.READ, a.ALLOW)
        assert writer.create([topic, other]) == [None, None]
        h.wait_for(lambda: {topic, other} <= set(reader.acls), 30, "the reader has both bindings")
        assert reader.authorize("User:alice", "1.2.3.4", a.READ, a.TOPIC, "notes-topic")
        writer.delete([a.AclBindingFilter(a.TOPIC, "notes-topic", a.LITERAL)])
        h.wait_for(lambda: topic not in reader.acls, 30, "the deletion reached the reader")
        assert other in reader.acls                # only the changed resource was read again
        assert reader.acls.count(other) == 1
    finally:
        writer.close()
        reader.close()


def test_a_broker_applies_its_own_and_the_default_configs_but_not_another_brokers(zk):
    applied = []
    config = DynamicBrokerConfig(zk, broker_id=7, apply=applied.append)
    listener = ChangeNotificationListener(zk, entity_configs.CHANGES, config_change_handler(
        {"brokers": config.changed}), name="broker-7-config-changes")
    listener.start()
    config.load()
    try:
        other = DynamicBrokerConfig(zk, broker_id=8)
        assert other.alter("8", [("log.flush.interval.messages", SET, "5")], True, False)[0] == 0
        assert other.alter("7", [("log.flush.interval.messages", SET, "9")], True, False)[0] == 0
        h.wait_for(lambda: applied and applied[-1].get("log.flush.interval.messages") == "9", 30,
                   "broker 7 applied its own config")
        assert all(overrides.get("log.flush.interval.messages") != "5" for overrides in applied)
    finally:
        listener.close()
