"""cluster.slots: when a slot held by another cluster may be taken over."""
import json
import os
import subprocess
import sys

import pytest

from cluster import slots

pytestmark = pytest.mark.fast


@pytest.fixture
def slot_dir(tmp_path, monkeypatch):
    d = tmp_path / "slots"
    monkeypatch.setattr(slots, "SLOT_DIR", str(d))
    monkeypatch.setattr(slots, "FIRST", 240)     # slots no local cluster of this machine is likely to use
    monkeypatch.setattr(slots, "LAST", 245)
    monkeypatch.setattr(slots, "_listening", lambda slot: False)
    return d


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _hold(slot_dir, slot: int, cluster_dir, holder: int, node_pids: list[int]) -> None:
    os.makedirs(slot_dir, exist_ok=True)
    os.makedirs(cluster_dir, exist_ok=True)
    with open(os.path.join(cluster_dir, "state.json"), "w") as f:
        json.dump({"nodes": {f"n{i}": {"pid": p} for i, p in enumerate(node_pids)}}, f)
    with open(os.path.join(slot_dir, str(slot)), "w") as f:
        json.dump({"dir": str(cluster_dir), "pid": holder}, f)


def test_a_slot_whose_holder_still_runs_is_not_taken_even_with_its_nodes_dead(slot_dir, tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _hold(slot_dir, 240, tmp_path / "a", holder.pid, [_dead_pid()])   # a `down` in progress
        assert slots.acquire(str(tmp_path / "b")) == 241
        assert slots.owned_by(240, str(tmp_path / "a"))
    finally:
        holder.kill()
        holder.wait()


def test_a_slot_whose_holder_and_nodes_are_gone_is_taken_over(slot_dir, tmp_path):
    _hold(slot_dir, 240, tmp_path / "a", _dead_pid(), [_dead_pid()])
    assert slots.acquire(str(tmp_path / "b")) == 240
    assert slots.owned_by(240, str(tmp_path / "b")) and not slots.owned_by(240, str(tmp_path / "a"))


def test_a_slot_with_a_live_node_is_kept_whoever_took_it(slot_dir, tmp_path):
    node = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _hold(slot_dir, 240, tmp_path / "a", _dead_pid(), [node.pid])
        assert slots.acquire(str(tmp_path / "b")) == 241
    finally:
        node.kill()
        node.wait()


def test_acquire_never_gives_a_slot_it_was_told_to_avoid(slot_dir, tmp_path):
    assert slots.acquire(str(tmp_path / "a"), avoid=[240, 241]) == 242


def test_a_slot_where_a_left_behind_node_listens_on_any_address_is_skipped(tmp_path, monkeypatch):
    """A coordinator orphaned by a killed harness listens on .32 while ZooKeeper (.1) and broker 1 (.21)
    are gone; a new cluster given the slot could not bind that address (exited at start)."""
    import socket
    monkeypatch.setattr(slots, "SLOT_DIR", str(tmp_path / "slots"))
    monkeypatch.setattr(slots, "FIRST", 246)
    monkeypatch.setattr(slots, "LAST", 247)
    for family, host in ((socket.AF_INET, "127.77.246.32"), (socket.AF_INET6, "::ffff:127.77.246.32")):
        s = socket.socket(family, socket.SOCK_STREAM)
        s.bind((host, 0))
        s.listen(1)
        try:
            assert slots._listeners_in(246) == [f"127.77.246.32:{s.getsockname()[1]}"]
            assert slots._listeners_in(247) == []
            got = slots.acquire(str(tmp_path / "c"))
            assert got == 247
            slots.release(got)
        finally:
            s.close()
    assert slots._listeners_in(246) == []


@pytest.mark.parametrize("content", ["[]", "5", "\"x\"", "{\"dir\": ", ""])
def test_a_lock_file_that_holds_no_record_is_stale_and_owned_by_nobody(slot_dir, tmp_path, content):
    os.makedirs(slot_dir, exist_ok=True)
    (slot_dir / "240").write_text(content)
    assert slots.lock_record(240) == {} and not slots.owned_by(240, str(tmp_path))
    assert slots.acquire(str(tmp_path / "c")) == 240        # taken over, not a crash
    assert slots.lock_record(240)["dir"] == str(tmp_path / "c")
    assert slots.lock_record(241) is None
