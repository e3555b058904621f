"""AclStore on a real ZooKeeper: Kafka's znodes and JSON, idempotent creates, filtered deletes, and two stores
racing on one resource losing nothing."""
import json
import threading

import pytest
from kazoo.client import KazooClient

from eoslab.common import acl as a
from eoslab.common import auth
from services.broker.acl_store import AclStore

pytestmark = pytest.mark.integration


def _zk(rt):
    zk = KazooClient(hosts=rt.info().zookeeper, **auth.zk_kwargs(auth.read_secret_file(rt.secret_path)))
    zk.start()
    return zk


def bind(name="orders", pattern=a.LITERAL, principal="User:alice", op=a.READ, perm=a.ALLOW):
    return a.AclBinding(a.TOPIC, name, pattern, principal, "*", op, perm)


def test_bindings_are_kafkas_znodes_and_a_filter_deletes_exactly_what_it_matches(make_cluster):
    rt = make_cluster(brokers=1, controllers=1)
    zk = _zk(rt)
    try:
        store = AclStore(zk)
        assert store.create([bind(), bind(), bind(name="ord", pattern=a.PREFIXED, op=a.WRITE),
                             bind(pattern=a.MATCH)]) == [None, None, None, "invalid pattern type 2"]
        data = json.loads(zk.get("/kafka-acl/Topic/orders")[0])
        assert data == {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow",
                                                "operation": "Read", "host": "*"}]}
        assert zk.exists("/kafka-acl-extended/prefixed/Topic/ord")
        assert zk.get_children("/kafka-acl-changes") and zk.get_children("/kafka-acl-extended-changes")
        assert sorted(store.acls(a.AclBindingFilter(a.TOPIC, "orders", a.MATCH)), key=str) == sorted(
            [bind(), bind(name="ord", pattern=a.PREFIXED, op=a.WRITE)], key=str)
        [removed] = store.delete([a.AclBindingFilter(a.TOPIC, None, a.PREFIXED)])
        assert removed == [bind(name="ord", pattern=a.PREFIXED, op=a.WRITE)]
        assert not zk.exists("/kafka-acl-extended/prefixed/Topic/ord")     # no ACE left: the node goes
        assert store.bindings() == [bind()]
    finally:
        zk.stop()


def test_two_stores_adding_to_one_resource_at_once_lose_nothing(make_cluster):
    rt = make_cluster(brokers=1, controllers=1)
    clients = [_zk(rt) for _ in range(2)]
    try:
        def add(zk, who):
            AclStore(zk).create([bind(principal=f"User:{who}-{i}") for i in range(15)])
        ts = [threading.Thread(target=add, args=(zk, f"w{n}")) for n, zk in enumerate(clients)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert len(AclStore(clients[0]).bindings()) == 30
    finally:
        for zk in clients:
            zk.stop()
