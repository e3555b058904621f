"""cluster.orphans: a local cluster whose owner died is found and stopped by the next cluster's `up`
(and by `eoslab cluster down --orphans`); a standing cluster (`cluster up`) never is."""
import json
import os
import signal
import subprocess
import sys

import pytest

from cluster import orphans, procfs
from tests import helpers as h

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAKER = """
import json, sys, time
from cluster.local import LocalRuntime
rt = LocalRuntime(sys.argv[1], home=sys.argv[2], brokers=1, controllers=1, txn_coordinators=0,
                  standing=sys.argv[3] == "standing")
rt.up()
print(json.dumps({n: s["pid"] for n, s in rt.state["nodes"].items()}), flush=True)
time.sleep(600)                         # the owner lives on until it is killed
"""


def _made_by_a_process(name: str, home: str, kind: str) -> tuple[subprocess.Popen, dict[str, int]]:
    """A process that makes a cluster and lives on; the cluster's node pids by node name."""
    p = subprocess.Popen([sys.executable, "-c", MAKER, name, home, kind], cwd=REPO, stdout=subprocess.PIPE,
                         text=True)
    line = p.stdout.readline()
    assert line, f"the cluster maker exited with {p.wait()}"
    return p, json.loads(line)


@pytest.mark.fast
def test_an_owner_record_is_alive_only_while_that_very_process_runs():
    me = orphans.owner_record()
    assert orphans.owner_alive(me) and orphans.owner_alive(None)
    assert not orphans.owner_alive({**me, "start": me["start"] + 1})         # another process under the pid
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    assert not orphans.owner_alive({"pid": p.pid, "start": None})


def _ended(pid: int, started: dict[int, int | None]) -> bool:
    """The process that had this pid has exited: gone, or the pid now names a newer process (a full
    CI run wraps this machine's pid_max of 32768, and another worker's node may get the pid)."""
    return procfs.gone(pid) or procfs.start_time(pid) != started[pid]

@pytest.mark.integration
def test_a_cluster_whose_owner_was_killed_is_stopped_by_the_next_up_and_a_standing_one_is_not(eoslab_home):
    from cluster.local import LocalRuntime
    owner, pids = _made_by_a_process("orphan-of-a-killed-run", eoslab_home, "owned")
    maker, standing_pids = _made_by_a_process("standing", eoslab_home, "standing")
    rt = None
    try:
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait()
        maker.kill()
        maker.wait()                                   # `cluster up` has returned: the cluster stays
        found = {o["name"]: o for o in orphans.find()}
        assert "standing" not in found
        assert sorted(found["orphan-of-a-killed-run"]["live_nodes"]) == sorted(pids)
        assert all(not procfs.gone(p) for p in pids.values())   # nothing stops them on its own
        orphan_started = {p: procfs.start_time(p) for p in pids.values()}
        rt = LocalRuntime("next", home=eoslab_home, brokers=1, controllers=1, txn_coordinators=0)
        rt.up()
        h.wait_for(lambda: all(_ended(p, orphan_started) for p in pids.values()), 30, "the orphan's nodes gone")
        assert not os.path.exists(os.path.join(eoslab_home, "clusters", "orphan-of-a-killed-run"))
        assert "orphan-of-a-killed-run" not in {o["name"] for o in orphans.find()}
        assert all(not procfs.gone(p) for p in standing_pids.values())
        assert "next" not in {o["name"] for o in orphans.find()}    # its owner (this process) lives
    finally:
        for p in (owner, maker):
            if p.poll() is None:
                p.kill()
        for name in ("orphan-of-a-killed-run", "standing"):
            if os.path.exists(os.path.join(eoslab_home, "clusters", name)):
                LocalRuntime.load(name, home=eoslab_home).down()
        if rt is not None:
            rt.down()


@pytest.mark.integration
def test_a_cluster_whose_directory_was_removed_under_it_is_found_by_its_slot_and_stopped(eoslab_home):
    from cluster import netfilter, slots
    from cluster.local import LocalRuntime
    if netfilter.cgroup2_root() is None or os.geteuid() != 0:
        pytest.skip("nodes get their own cgroups only as root on a cgroup-v2 hierarchy")
    owner, pids = _made_by_a_process("lost-home", eoslab_home, "owned")
    cluster_dir = os.path.join(eoslab_home, "clusters", "lost-home")
    with open(os.path.join(cluster_dir, "state.json")) as f:
        slot = json.load(f)["slot"]
    try:
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait()
        subprocess.run(["rm", "-rf", cluster_dir], check=True)     # state.json goes with it
        assert all(not procfs.gone(p) for p in pids.values())    # the nodes run on, nobody knows them
        started = {p: procfs.start_time(p) for p in pids.values()}   # a pid is reused (pid_max 32768 wraps)
        lost = [o for o in orphans.find() if o.get("lost") and o["slot"] == slot]
        assert len(lost) == 1 and lost[0]["dir"] == os.path.realpath(cluster_dir)
        assert set(lost[0]["live_nodes"]) <= set(pids) and lost[0]["live_nodes"]
        assert orphans.reap(log=open(os.devnull, "w")).count("lost-home") == 1
        h.wait_for(lambda: all(_ended(p, started) for p in pids.values()), 30, "the lost cluster's nodes gone")
        # the freed slot may already hold the next cluster of another pytest worker: nothing of this one is left
        left = netfilter.slot_cgroups().get(slot, {})
        ours = {p for ps in left.values() for p in ps if p in started and not _ended(p, started)}
        assert not ours                              # an exited node not yet reaped by init may still be listed
        lock = slots.lock_record(slot)
        assert lock is None or lock.get("dir") != os.path.realpath(cluster_dir)
        assert not [o for o in orphans.find() if o.get("slot") == slot and o["dir"] == os.path.realpath(cluster_dir)]
    finally:
        if owner.poll() is None:
            owner.kill()
        for p in pids.values():
            if not procfs.gone(p):
                os.kill(p, signal.SIGKILL)
        if os.path.exists(cluster_dir):
            LocalRuntime.load("lost-home", home=eoslab_home).down()
