"""Tagged iptables rules (cluster.netfilter): packet loss and a client's own cut, removed without
touching the other rules of the chain. Needs root, iptables and cgroup v2 (as partitions do)."""
import os
import subprocess
import sys

import pytest

from cluster import netfilter, slots

pytestmark = pytest.mark.integration


@pytest.fixture
def slot(tmp_path):
    if os.geteuid() != 0 or netfilter.cgroup2_root() is None:
        pytest.skip("needs root and a cgroup-v2 hierarchy")
    s = slots.acquire(str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    assert netfilter.place(s, "client-x", proc.pid)
    yield s
    netfilter.heal(s)
    proc.kill()
    proc.wait()
    netfilter.unplace(s, "client-x")
    netfilter.remove_cgroups(s)
    slots.release(s)


def test_loss_rules_and_cuts_come_off_by_tag_only(slot):
    addr = slots.address(slot, 21)
    netfilter.drop(slot, "client-x", slots.address(slot, 31), tag="cut-x")
    netfilter.drop(slot, "client-x", slots.address(slot, 32))                    # untagged (a partition)
    netfilter.loss(slot, "client-x", addr, 0.25, tag="loss")
    rules = netfilter.rules(slot)
    assert len(rules) == 4
    assert sum("--probability 0.25" in r and "--mode random" in r for r in rules) == 2
    assert any(f"-d {addr}/32" in r and "statistic" in r for r in rules)          # packets to the node
    assert any("eoslab/%d/client-x" % slot in r and "statistic" in r for r in rules)   # and from it
    assert netfilter.remove_tagged(slot, "loss") == 2
    assert netfilter.remove_tagged(slot, "loss") == 0
    left = netfilter.rules(slot)
    assert len(left) == 2 and not any("statistic" in r for r in left)
    assert netfilter.remove_tagged(slot, "cut-x") == 1
    assert netfilter.rules(slot) == [r for r in left if "cut-x" not in r] and len(netfilter.rules(slot)) == 1
    netfilter.heal(slot)
    assert netfilter.rules(slot) == []


def test_loss_probability_is_checked(slot):
    with pytest.raises(ValueError):
        netfilter.loss(slot, "client-x", slots.address(slot, 21), 1.5, tag="loss")
