"""KafkaController._on_broker_change for a broker that went and came back within one change (its
registration's epoch changed between two reads of /brokers/ids): as Kafka's processBrokerChange runs
onBrokerFailure then onBrokerStartup for a bounced broker, the partitions it alone could lead are
elected again once it is back, not left offline. ZooKeeper's reads and writes are replaced by the
controller context they would fill (no ZooKeeper here)."""
import pytest

from services.controller.context import BrokerInfo, LeaderIsr
from services.controller.kafka_controller import KafkaController

pytestmark = pytest.mark.fast


def _controller(monkeypatch, elr: bool):
    c = KafkaController(1, "127.0.0.1", 1, "127.0.0.1:1", eligible_leader_replicas=elr, min_insync_replicas=2)
    c.active = True
    c.ctx.brokers = {b: BrokerInfo(b, "127.0.0.1", 9000 + b, 10 * b) for b in (1, 2, 3)}
    c.ctx.assignments = {"t": {0: [3, 1, 2], 1: [1, 2, 3]}}
    c.ctx.configs = {"t": {}}
    c.ctx.states = {("t", 0): LeaderIsr(3, 5, [3], 1), ("t", 1): LeaderIsr(1, 2, [1, 2, 3], 1)}
    writes = []

    def write_state(topic, p, new):
        writes.append((topic, p, new.leader, new.leader_epoch, list(new.isr)))
        c.ctx.states[(topic, p)] = new

    def bounced():             # broker 3 re-registered: a new znode, a new epoch (its czxid)
        c.ctx.brokers = {**c.ctx.brokers, 3: BrokerInfo(3, "127.0.0.1", 9003, 31)}
        return c.ctx.brokers
    monkeypatch.setattr(c, "_load_brokers", bounced)
    monkeypatch.setattr(c, "_write_state", write_state)
    monkeypatch.setattr(c, "_sync_channels", lambda: None)
    monkeypatch.setattr(c, "_unclean_shutdowns_owed", lambda: frozenset())
    return c, writes


@pytest.mark.parametrize("elr", [False, True], ids=["before-kip-966", "kip-966"])
def test_a_bounced_lone_isr_leader_leads_again(monkeypatch, elr):
    c, writes = _controller(monkeypatch, elr)
    c._on_broker_change()
    st = c.ctx.states[("t", 0)]
    assert (st.leader, st.isr) == (3, [3]), writes
    assert st.leader_epoch > 5
    assert [w for w in writes if w[1] == 0][0][2] == -1         # its failure first took the leadership


def test_a_bounced_follower_changes_no_leader(monkeypatch):
    c, writes = _controller(monkeypatch, elr=False)
    c._on_broker_change()
    assert c.ctx.states[("t", 1)].leader == 1
