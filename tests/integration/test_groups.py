"""Consumer groups in the brokers: join/sync with the range assignor, rebalances, offsets in
__consumer_offsets, and KIP-447's fence on transactional offset commits."""
import threading
import time

import pytest

from clients.consumer import KafkaConsumer
from eoslab.common.errors import E, KafkaError
from clients.producer import ConsumerGroupMetadata, KafkaProducer, ProducerConfig
from tests import helpers as h

pytestmark = pytest.mark.integration


def fill(boot, topic, partitions, n):
    p = KafkaProducer(boot, ProducerConfig(linger_ms=2))
    try:
        for i in range(n):
            p.send(topic, f"{i}".encode(), partition=i % partitions)
        p.flush()
    finally:
        p.close()


class Member(threading.Thread):
    """A consumer polling in its own thread, as an application would."""

    def __init__(self, boot, group, topic):
        super().__init__(daemon=True)
        self.c = KafkaConsumer(boot, group_id=group, session_timeout_ms=3000)
        self.c.subscribe([topic])
        self.got, self.stop, self.lock = [], threading.Event(), threading.Lock()
        self.state = ((), -1)

    def run(self):
        while not self.stop.is_set():
            recs = self.c.poll(100)
            with self.lock:
                self.got += recs
                self.state = (tuple(sorted(self.c.assignment())), self.c.group_metadata().generation_id)
        self.c.commit()


def test_two_members_split_partitions_and_commit(cluster):
    boot = cluster.bootstrap_all()
    h.new_topic(boot, "g", 4)
    a, b = Member(boot, "grp", "g"), Member(boot, "grp", "g")
    a.start()
    b.start()
    try:
        deadline = time.monotonic() + 60
        while not (len(a.state[0]) == len(b.state[0]) == 2 and a.state[1] == b.state[1]):   # range assignor
            assert time.monotonic() < deadline, f"the group did not settle: {a.state} {b.state}"
            time.sleep(0.05)
        assert sorted(a.state[0] + b.state[0]) == [("g", p) for p in range(4)]
        fill(boot, "g", 4, 40)
        while len(a.got) + len(b.got) < 40:
            assert time.monotonic() < deadline + 30, "records did not arrive"
            time.sleep(0.05)
        assert sorted(int(r.value) for r in a.got + b.got) == list(range(40))
    finally:
        a.stop.set()
        b.stop.set()
        a.join(30)
        b.join(30)
    assert a.c.committed([("g", p) for p in range(4)]) == {("g", p): 10 for p in range(4)}
    a.c.close()
    b.c.close()
    c = KafkaConsumer(boot, group_id="grp")
    try:
        c.subscribe(["g"])
        assert c.poll(200) == []                                                 # resumes at the commits
        assert sorted(c.assignment()) == [("g", p) for p in range(4)]
    finally:
        c.close()


def test_kip447_stale_member_txn_offset_commit_is_fenced(cluster):
    boot = cluster.bootstrap_all()
    h.new_topic(boot, "k447", 2)
    fill(boot, "k447", 2, 10)
    old = KafkaConsumer(boot, group_id="g447", session_timeout_ms=1500)
    old.subscribe(["k447"])
    old.poll(100)
    stale = old.group_metadata()
    assert stale.generation_id >= 1
    # the old member stalls (no poll, no heartbeat); a new member joins and the group moves on without it
    new = KafkaConsumer(boot, group_id="g447", session_timeout_ms=1500)
    new.subscribe(["k447"])
    deadline = time.monotonic() + 30
    while new.group_metadata().generation_id <= stale.generation_id or len(new.assignment()) != 2:
        assert time.monotonic() < deadline, "the group did not rebalance"
        new.poll(100)
    p = KafkaProducer(boot, ProducerConfig(transactional_id="k447-copier", linger_ms=0))
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send("k447", b"out")
        with pytest.raises(KafkaError) as e:
            p.send_offsets_to_transaction({("k447", 0): 5}, stale)             # the zombie's generation
        assert e.value.code in (E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID)
        p.abort_transaction()
        p.begin_transaction()
        p.send("k447", b"out")
        p.send_offsets_to_transaction({("k447", 0): 5}, new.group_metadata())   # the current member
        # pending transactional offsets are unstable until the commit's markers land (KIP-447)
        p.commit_transaction()
    finally:
        p.close()
    deadline = time.monotonic() + 20
    while new.committed([("k447", 0)])[("k447", 0)] != 5:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    old.group = None   # it was dropped from the group: nothing to leave
    old.close()
    new.close()


def test_unstable_offset_commit_while_transaction_is_open(cluster):
    boot = cluster.bootstrap_all()
    h.new_topic(boot, "uoc")
    p = KafkaProducer(boot, ProducerConfig(transactional_id="uoc-1", linger_ms=0))
    c = KafkaConsumer(boot, group_id="guoc")
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send_offsets_to_transaction({("uoc", 0): 7}, ConsumerGroupMetadata("guoc"))
        with pytest.raises(KafkaError) as e:
            c.group.committed([("uoc", 0)], timeout=0.5)
        assert e.value.code == E.UNSTABLE_OFFSET_COMMIT
        p.commit_transaction()
        assert c.committed([("uoc", 0)]) == {("uoc", 0): 7}
    finally:
        p.close()
        c.close()
