import pytest

from cluster import nemesis as nem

pytestmark = pytest.mark.fast
NODES = ["b1", "b2", "b3", "c1", "c2"]


def test_same_seed_same_schedule_and_other_seed_differs():
    a = nem.schedule(["kill", "partition", "lost-ack"], 60, seed=7)
    assert a == nem.schedule(["kill", "partition", "lost-ack"], 60, seed=7)
    assert a != nem.schedule(["kill", "partition", "lost-ack"], 60, seed=8)


def test_schedule_is_staggered_one_fault_at_a_time_within_the_limit():
    ev = nem.schedule(["kill", "pause"], 40, seed=1)
    assert len(ev) >= 3
    for prev, nxt in zip(ev, ev[1:]):
        assert prev.at + prev.duration < nxt.at
    assert all(e.at < 40 for e in ev) and {e.package for e in ev} <= {"kill", "pause"}


def _connected(pairs, a, b):
    return frozenset((a, b)) not in {frozenset(p) for p in pairs}


def test_one_and_halves_cut_everything_across():
    cut = nem.cut_pairs("one", NODES)
    assert all(not _connected(cut, "b1", x) for x in NODES[1:])
    assert all(_connected(cut, x, y) for x in NODES[1:] for y in NODES[1:] if x != y)
    cut = nem.cut_pairs("halves", NODES)
    assert len(cut) == 2 * 3


def test_ring_leaves_each_node_its_two_neighbours():
    cut = nem.cut_pairs("ring", NODES)
    for i, n in enumerate(NODES):
        reachable = [m for m in NODES if m != n and _connected(cut, n, m)]
        assert sorted(reachable) == sorted([NODES[i - 1], NODES[(i + 1) % 5]])


def test_bridge_node_sees_both_sides_and_the_sides_do_not_see_each_other():
    cut = nem.cut_pairs("bridge", NODES)      # b1 b2 | b3 | c1 c2
    assert all(_connected(cut, "b3", x) for x in NODES if x != "b3")
    assert all(not _connected(cut, a, b) for a in ("b1", "b2") for b in ("c1", "c2"))


def test_unknown_shape_is_refused():
    with pytest.raises(ValueError):
        nem.cut_pairs("triangle", NODES)


@pytest.mark.parametrize("first", ["cluster.nemesis_clock", "cluster.nemesis_disk", "cluster.nemesis_packages"])
def test_each_family_of_fault_packages_can_be_imported_first_and_all_end_up_in_packages(first):
    import subprocess
    import sys
    code = (f"import {first}\nfrom cluster.nemesis_packages import PACKAGES\n"
            "assert {'lose-unsynced', 'clock-jump', 'kill'} <= set(PACKAGES), sorted(PACKAGES)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=__file__.rsplit("/tests/", 1)[0])
    assert r.returncode == 0, r.stderr.strip().splitlines()[-1:]
