"""LocalRuntime.down stops everything of its cluster, even what another runtime object started."""
import os
import subprocess
import sys
import time

import pytest

from cluster import netfilter
from cluster.local import LocalRuntime

pytestmark = pytest.mark.integration


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_down_on_a_stale_object_stops_a_node_restarted_elsewhere(make_cluster, eoslab_home):
    rt = make_cluster(brokers=1, controllers=1, txn_coordinators=0)
    old = next(n.pid for n in rt.info().nodes if n.name == "broker-1")
    other = LocalRuntime.load(rt.cluster_name, home=eoslab_home)    # as the CLI or a nemesis would
    other.kill("broker-1")
    other.start("broker-1")
    new = next(n.pid for n in other.info().nodes if n.name == "broker-1")
    assert new and new != old and _alive(new)
    rt.down()                                                        # rt still holds the old pid
    deadline = time.monotonic() + 5
    while _alive(new) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(new), "the restarted broker outlived cluster down"


def test_down_kills_its_nodes_left_in_the_cluster_cgroups_and_nothing_else(make_cluster):
    if os.geteuid() != 0 or netfilter.cgroup2_root() is None:
        pytest.skip("needs root and a cgroup-v2 hierarchy")
    rt = make_cluster(brokers=1, controllers=1, txn_coordinators=0)
    slot = rt.slot
    stray = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], cwd=rt.dir)   # a node
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])     # not one of its nodes
    try:
        assert netfilter.place(rt.slot, "client-stray", stray.pid)
        assert netfilter.place(rt.slot, "client-other", other.pid)
        rt.down()
        assert stray.wait(timeout=5) == -9
        assert other.poll() is None
    finally:
        for p in (stray, other):
            if p.poll() is None:
                p.kill()
                p.wait()
        netfilter.remove_cgroups(slot)      # the empty group `other` left (rmdir only removes empty ones)


def test_down_twice_leaves_the_next_cluster_in_the_slot_alone(make_cluster, eoslab_home):
    first = make_cluster(brokers=1, controllers=1, txn_coordinators=0)
    stale = LocalRuntime.load(first.cluster_name, home=eoslab_home)    # a second handle on the same cluster
    slot = first.slot
    first.down()
    second = make_cluster(brokers=1, controllers=1, txn_coordinators=0)
    if second.slot != slot:
        pytest.skip("the slot went to another worker's cluster meanwhile")
    before = {n.name: n.pid for n in second.info().nodes}
    stale.down()                          # its cluster is long gone; the slot is second's now
    after = {n.name: (n.pid, n.state) for n in second.info().nodes}
    assert all(after[n][0] == pid and pid for n, pid in before.items()), (before, after)
    assert all(s == "running" for _, s in after.values()), after
    from cluster import slots
    assert slots.owned_by(slot, second.dir)


def test_up_moves_to_another_slot_when_zookeepers_address_is_taken(eoslab_home, monkeypatch, capsys):
    """The first slot `up` gets has its ZooKeeper address taken right after the slot was acquired (as
    a ZooKeeper still shutting down would hold it): ZooKeeper exits at start and `up` starts again in
    another slot, saying so. The squatter binds to whichever slot `up` is given, so another test
    worker taking slots meanwhile changes nothing."""
    import socket

    from cluster import slots
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    real_acquire, squatted = slots.acquire, []

    def acquire(cluster_dir, avoid=()):
        slot = real_acquire(cluster_dir, avoid)
        if not squatted:
            squatter.bind((slots.address(slot, 1), 12181))
            squatter.listen()
            squatted.append(slot)
        return slot
    monkeypatch.setattr(slots, "acquire", acquire)
    rt = LocalRuntime(f"squat-{os.getpid()}", home=eoslab_home, brokers=1, controllers=1, txn_coordinators=0)
    try:
        rt.up()
        assert squatted and rt.slot != squatted[0]
        assert all(n.state == "running" for n in rt.info().nodes)
        assert "starting again in another slot" in capsys.readouterr().err
    finally:
        rt.down()
        squatter.close()
