"""The disk faults on the local runtime: brokers' data directories on the lazy filesystem, the
lose-unsynced package on a real cluster (the broker's own files lose what it left in the page
cache, and the cluster heals it by replication), a short `eoslab run` under it, and the
one-line refusal where FUSE is unusable.

Where FUSE is not usable here the cluster tests skip with the one-line reason
LazyFs.available() gives; the refusal test points the FUSE device setting at a missing path.
"""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import uuid

import pytest

from clients.metadata import ClusterMetadata
from cluster import nemesis as nem
from cluster.lazyfs import LazyFs, lazyfs_mounts
from cluster.lazyfs.control import FUSE_DEVICE_ENV
from cluster.local import ClusterError, LocalRuntime
from cluster.nemesis_disk import DISK_PACKAGES, SPREADS
from cluster.run import RunConfig, run
from eoslab.common import record_batch as rb
from tests.helpers import leader_address, new_topic, produce_raw, read_partition, values, wait_for

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _need_fuse() -> None:
    reason = LazyFs.available()
    if reason:
        pytest.skip(reason)


def _mounts_under(path: str) -> list[str]:
    return [m for m in lazyfs_mounts() if m.startswith(path.rstrip("/") + "/")]


class _Pick(random.Random):
    """The seeded RNG, except that a fault's spread is "one" and, among its choices, the items (or the
    (path, size) pairs whose path) asked for are picked."""

    def __init__(self, *prefer: str):
        super().__init__(0)
        self.prefer = prefer

    def choice(self, seq):
        if tuple(seq) == SPREADS:
            return "one"
        for item in seq:
            if item in self.prefer or (isinstance(item, tuple) and item[0] in self.prefer):
                return item
        return super().choice(seq)


@pytest.mark.integration
def test_a_brokers_data_dir_is_a_lazy_mount_that_outlives_its_restarts_and_goes_with_down(make_cluster):
    _need_fuse()
    rt = make_cluster(brokers=1, controllers=1, txn_coordinators=0, disk="lazy")
    data = os.path.join(rt.dir, "data", "broker-1")
    assert data in lazyfs_mounts()
    assert os.path.join(rt.dir, "zookeeper", "data") in lazyfs_mounts(), "ZooKeeper's dataDir too"
    assert len(_mounts_under(rt.dir)) == 2
    assert os.path.isdir(os.path.join(rt.dir, "data", ".broker-1.backing")), "the backing dir beside it"
    with open(os.path.join(data, "probe"), "wb") as f:    # unsynced: only this filesystem remembers it
        f.write(b"x" * 10)
    assert rt.disk("broker-1").status()["/probe"]["unsynced_bytes"] == 10
    rt.kill("broker-1")
    rt.start("broker-1")
    rt.wait_ready(60)
    assert data in lazyfs_mounts()
    assert rt.disk("broker-1").status()["/probe"]["unsynced_bytes"] == 10, "the same filesystem, not a new mount"
    rt.down()
    assert data not in lazyfs_mounts() and not _mounts_under(rt.dir)
    assert not os.path.exists(rt.dir)


_HARNESS = textwrap.dedent("""
    import sys
    from cluster.local import LocalRuntime
    rt = LocalRuntime(sys.argv[1], home=sys.argv[2], brokers=1, controllers=1, txn_coordinators=0, disk="lazy",
                      standing=True)      # as `cluster up` made it: no other cluster's up stops it meanwhile
    rt.up()
    print(rt.dir, flush=True)
    sys.stdin.read()
""")


@pytest.mark.integration
def test_cluster_down_removes_the_mounts_of_a_sigkilled_harness(eoslab_home):
    _need_fuse()
    name = f"dk-{uuid.uuid4().hex[:8]}"
    harness = subprocess.Popen([sys.executable, "-c", _HARNESS, name, eoslab_home], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, cwd=REPO)
    cdir = ""
    try:
        cdir = harness.stdout.readline().decode().strip()
        assert cdir and _mounts_under(cdir), "the harness's cluster is up on lazy disks"
        harness.send_signal(signal.SIGKILL)
        harness.wait()
        assert _mounts_under(cdir), "the mounts outlive the harness"
        env = dict(os.environ, EOSLAB_HOME=eoslab_home)
        r = subprocess.run([sys.executable, "-m", "eoslab.cli", "cluster", "down", "--name", name,
                            "--runtime", "local"], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert not _mounts_under(cdir) and not os.path.exists(cdir)
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
        harness.stdin.close()
        harness.stdout.close()
        if cdir and os.path.exists(os.path.join(cdir, "state.json")):
            LocalRuntime.load(name, home=eoslab_home).down()


def _isr(md: ClusterMetadata, topic: str) -> list[int]:
    resp = md.refresh([topic])
    return next(sorted(p.isr) for t in resp.topics if t.name == topic for p in t.partitions)


@pytest.mark.integration
def test_lose_unsynced_drops_what_a_broker_only_had_in_page_cache_and_replication_heals_it(make_cluster):
    _need_fuse()
    rt = make_cluster(brokers=3, controllers=1, txn_coordinators=0, disk="lazy")
    boot = rt.bootstrap_all()
    topic = "disk-t"
    md = new_topic(boot, topic, 1, configs={"min.insync.replicas": "2"})
    leader = leader_address(md, topic)
    n, per = 40, 5
    for i in range(n):
        r = produce_raw(leader, topic, rb.build_batch(values(per, start=i * per)), acks=-1)
        assert r.error == 0, r
    wait_for(lambda: _isr(md, topic) == [1, 2, 3], 30, "every replica in sync")
    lead_id = md.leader(topic, 0)[0]
    victim = next(f"broker-{i}" for i in (1, 2, 3) if i != lead_id)
    seg = os.path.join(rt.dir, "data", victim, f"{topic}-0", "00000000000000000000.log")
    before = os.path.getsize(seg)
    unsynced = rt.disk(victim).status()
    assert unsynced[f"/{topic}-0/00000000000000000000.log"]["unsynced_bytes"] > 0, unsynced

    ctx = nem.Context(rt, None, topic, 1, md, _Pick(victim))
    pkg = DISK_PACKAGES["lose-unsynced"]
    assert pkg.process_fault
    started = pkg.start(ctx)
    assert started["nodes"] == [victim] and started["spread"] == "one"
    assert rt.info().node(victim).state == "dead", "the broker is killed before its disk loses anything"
    hit = started["hit"][victim]
    assert hit["bytes_dropped"] >= before and hit["files"] > 0
    after = os.path.getsize(seg) if os.path.exists(seg) else 0
    assert after < before, "the victim's own segment lost what was only in its page cache"
    assert json.loads(json.dumps(started)) == started, "what it hit goes into the history as JSON"

    pkg.stop(ctx, started)
    rt.wait_ready(60)
    assert rt.info().node(victim).state == "running"
    wait_for(lambda: os.path.exists(seg) and os.path.getsize(seg) >= before, 60,
             f"{victim} re-replicated its log")
    wait_for(lambda: _isr(md, topic) == [1, 2, 3], 60, f"{victim} back in sync")
    got = [r.value for r in read_partition(boot, topic)]
    assert got == [f"v{i}".encode() for i in range(n * per)], "every record acknowledged with acks=all"
    md.close()


class _All(random.Random):
    """The seeded RNG, except that a fault's spread is "all": a power loss of the whole cluster."""

    def choice(self, seq):
        return "all" if tuple(seq) == SPREADS else super().choice(seq)


@pytest.mark.integration
def test_a_whole_cluster_power_loss_takes_zookeepers_disk_too_and_fsynced_state_survives(make_cluster):
    """Spread "all": every broker and ZooKeeper are killed, then their unsynced writes dropped. ZooKeeper
    fsyncs its transaction log before it answers (forceSync) and the topic fsyncs every append: the
    cluster comes back with its topic, its registrations and every acknowledged record."""
    _need_fuse()
    rt = make_cluster(brokers=2, controllers=1, txn_coordinators=0, disk="lazy")
    boot = rt.bootstrap_all()
    topic = "power-t"
    md = new_topic(boot, topic, 1, configs={"min.insync.replicas": "1", "flush.messages": "1"})
    leader = leader_address(md, topic)
    for i in range(20):
        assert produce_raw(leader, topic, rb.build_batch(values(5, start=i * 5)), acks=-1).error == 0
    wait_for(lambda: _isr(md, topic) == [1, 2], 30, "both replicas in sync")
    ctx = nem.Context(rt, None, topic, 1, md, _All(0))
    pkg = DISK_PACKAGES["lose-unsynced"]
    started = pkg.start(ctx)
    assert started["spread"] == "all" and started["nodes"] == ["broker-1", "broker-2", "zookeeper"], started
    assert all(rt.info().node(n).state == "dead" for n in started["nodes"])
    assert "zookeeper" in started["hit"] and json.loads(json.dumps(started)) == started
    pkg.stop(ctx, started)
    rt.wait_ready(90)
    assert {n.name: n.state for n in rt.info().nodes} == {n.name: "running" for n in rt.info().nodes}
    wait_for(lambda: _isr(md, topic) == [1, 2], 90, "the topic back, both replicas in sync")
    got = [r.value for r in read_partition(boot, topic)]
    assert got == [f"v{i}".encode() for i in range(100)], "every acknowledged record"
    # ZooKeeper never fsyncs its snapshots: its first one was gone, and it replayed its fsynced log instead
    zk_snapshot = started["hit"]["zookeeper"]["by_file"]
    assert any("snapshot" in path and f.get("removed") for path, f in zk_snapshot.items()), zk_snapshot
    assert "No snapshot found, but there are log entries" in rt.logs("zookeeper", 100_000)
    md.close()


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.integration
def test_a_torn_write_and_a_corrupt_segment_tail_are_cut_by_recovery_and_healed_by_replication(make_cluster):
    _need_fuse()
    rt = make_cluster(brokers=3, controllers=1, txn_coordinators=0, disk="lazy")
    boot = rt.bootstrap_all()
    topic = "disk-c"
    md = new_topic(boot, topic, 1, configs={"min.insync.replicas": "2"})
    leader = leader_address(md, topic)
    n, per = 30, 5
    for i in range(n):
        assert produce_raw(leader, topic, rb.build_batch(values(per, start=i * per)), acks=-1).error == 0
    wait_for(lambda: _isr(md, topic) == [1, 2, 3], 30, "every replica in sync")
    victim = next(f"broker-{i}" for i in (1, 2, 3) if i != md.leader(topic, 0)[0])
    name = f"{topic}-0/00000000000000000000.log"
    seg = os.path.join(rt.dir, "data", victim, name)
    before = _read(seg)

    torn = DISK_PACKAGES["torn-write"]
    ctx = nem.Context(rt, None, topic, 1, md, _Pick(victim))
    started = torn.start(ctx)
    assert started["nodes"] == [victim] and {"seed", "ordered"} <= set(started)
    rec = started["hit"][victim]["by_file"]["/" + name]
    assert rec["lost_bytes"] > 0 and 0 <= rec["kept_prefix"] and "torn_offset" in rec, rec
    assert _read(seg) != before, "the victim's segment lost its unsynced tail"
    torn.stop(ctx, started)
    wait_for(lambda: _read(seg) == before, 60, f"{victim}'s segment rebuilt by replication")

    corrupt = DISK_PACKAGES["corrupt"]
    ctx = nem.Context(rt, None, topic, 1, md, _Pick(victim, "segment-tail", name))
    wait_for(lambda: rt.info().node(victim).state == "running" and _isr(md, topic) == [1, 2, 3], 60,
             f"{victim} back in sync")
    started = corrupt.start(ctx)
    hit = started["hit"][victim]
    assert started["nodes"] == [victim] and hit["kind"] == "segment-tail" and hit["path"] == name, hit
    off, k = hit["offset"], hit["bytes_flipped"]
    assert len(before) - 64 <= off < len(before) and 1 <= k <= 4
    after = _read(seg)
    assert [a != b for a, b in zip(after[off:off + k], before[off:off + k])] == [True] * k
    assert after[:off] == before[:off] and after[off + k:] == before[off + k:], "exactly those bytes flipped"
    corrupt.stop(ctx, started)
    wait_for(lambda: _read(seg) == before, 60, f"{victim} cut the corrupt batch and fetched it again")
    wait_for(lambda: _isr(md, topic) == [1, 2, 3], 60, f"{victim} back in sync")
    assert [r.value for r in read_partition(boot, topic)] == [f"v{i}".encode() for i in range(n * per)]
    md.close()


@pytest.mark.integration
def test_a_run_under_lose_unsynced_records_what_it_hit_and_gets_a_verdict(tmp_path, eoslab_home, monkeypatch):
    _need_fuse()
    monkeypatch.setenv("EOSLAB_HOME", eoslab_home)
    out = tmp_path / "run"
    cfg = RunConfig(workload="queue", nemesis=["lose-unsynced"], time_limit=15, seed=5, out=str(out),
                    settings={"acks": "all", "enable.idempotence": "true"})
    code = run(cfg)
    with open(out / "run.json") as f:
        meta = json.load(f)
    with open(out / "results.json") as f:
        results = json.load(f)
    assert code in (0, 1), (code, meta.get("lab_errors"), meta.get("error"))
    assert meta["lab_errors"] == [] and results["verdict"] in ("valid", "invalid"), results.get("verdict")
    assert (code == 0) == (results["verdict"] == "valid")
    with open(out / "history.jsonl") as f:
        hist = [json.loads(line) for line in f]
    starts = [o for o in hist if o["f"] == "start-lose-unsynced" and o["value"] is not None]   # the info half
    assert starts, "the schedule played lose-unsynced"
    for o in starts:
        v = o["value"]
        assert v["nodes"] and set(v["hit"]) == set(v["nodes"]) and v["spread"] in SPREADS
        assert all("bytes_dropped" in h and "files" in h for h in v["hit"].values())
    assert any(h["bytes_dropped"] > 0 for o in starts for h in o["value"]["hit"].values()), starts
    stops = [o for o in hist if o["f"].startswith("stop-") and o["value"] is not None]
    assert [o["value"] for o in stops] == [o["value"] for o in starts]
    assert [f["target"] for f in meta["fault_windows"] if f["package"] == "lose-unsynced"] == \
        [o["value"] for o in starts], "run.json's fault windows name what each fault hit"
    assert not _mounts_under(eoslab_home), "the run's cluster left no mount"


@pytest.mark.integration
def test_with_every_message_flushed_a_power_loss_of_every_broker_loses_nothing(tmp_path, eoslab_home, monkeypatch):
    """flush.messages=1: each append is fsynced before it is acknowledged, so the same seed's power loss
    of every broker loses no acknowledged record (the run is valid) and drops at most the batch in flight."""
    _need_fuse()
    monkeypatch.setenv("EOSLAB_HOME", eoslab_home)
    out = tmp_path / "run"
    cfg = RunConfig(workload="queue", nemesis=["lose-unsynced"], time_limit=15, seed=5, out=str(out),
                    settings={"acks": "all", "enable.idempotence": "true", "topic.flush.messages": "1"})
    code = run(cfg)
    with open(out / "run.json") as f:
        meta = json.load(f)
    assert code == 0, (code, meta.get("lab_errors"))
    with open(out / "history.jsonl") as f:
        hist = [json.loads(line) for line in f]
    starts = [o["value"] for o in hist if o["f"] == "start-lose-unsynced" and o["value"] is not None]
    assert any(v["spread"] == "all" for v in starts), starts
    # what a power loss can still take is the batch being appended at the kill (written, its fsync not
    # yet done, so never acknowledged): at most one small frame per log file, never an acknowledged record
    lost = [f["lost_bytes"] for v in starts for h in v["hit"].values() for f in h.get("by_file", {}).values()]
    assert all(n <= 8192 for n in lost), starts


@pytest.mark.fast
def test_disk_faults_are_refused_in_one_line_where_fuse_is_unusable(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(FUSE_DEVICE_ENV, str(tmp_path / "no-fuse"))
    cfg = RunConfig(workload="queue", nemesis=["lose-unsynced", "kill"], time_limit=5, seed=1,
                    out=str(tmp_path / "run"))
    with pytest.raises(ValueError) as e:
        cfg.validate()
    assert str(e.value) == ("lose-unsynced: the disk faults need the lazy filesystem, which cannot mount "
                            f"here: no {tmp_path / 'no-fuse'} on this machine (pass --device /dev/fuse "
                            "to a container)")
    RunConfig(workload="queue", nemesis=["kill"], time_limit=5, seed=1, out=str(tmp_path / "r2")).validate()

    from eoslab.cli import main
    rc = main(["run", "--workload", "queue", "--nemesis", "torn-write", "--time-limit", "5",
               "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "torn-write: the disk faults need the lazy filesystem" in err, err
    assert not os.path.exists(tmp_path / "run"), "nothing ran"

    rt = LocalRuntime("refused", home=str(tmp_path / "home"), brokers=1, controllers=1, txn_coordinators=0,
                      disk="lazy")
    with pytest.raises(ClusterError, match=f"no {tmp_path / 'no-fuse'} on this machine"):
        rt.up()
    assert not os.path.exists(rt.dir), "nothing started"


@pytest.mark.integration
def test_a_cluster_up_with_a_lazy_disk_takes_disk_faults_from_runs_on_it(tmp_path, eoslab_home, monkeypatch, capsys):
    """`eoslab cluster up --disk lazy` puts a standing cluster's data on the lazy filesystem: a run with
    --cluster plays lose-unsynced on it (refused on a plain cluster, in one line), and `cluster down`
    leaves no mount."""
    _need_fuse()
    from eoslab.cli import main
    monkeypatch.setenv("EOSLAB_HOME", eoslab_home)
    name = f"lazy-{uuid.uuid4().hex[:6]}"
    assert main(["cluster", "up", "--name", name, "--disk", "lazy", "--controllers", "1"]) == 0
    up = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    try:
        assert up["disk"] == "lazy" and _mounts_under(eoslab_home)
        out = tmp_path / "run"
        code = run(RunConfig(workload="queue", nemesis=["lose-unsynced"], time_limit=10, seed=5, out=str(out),
                             cluster=name, settings={"acks": "all", "enable.idempotence": "true"}))
        with open(out / "history.jsonl") as f:
            starts = [json.loads(line) for line in f]
        starts = [o for o in starts if o["f"] == "start-lose-unsynced" and o["value"] is not None]
        assert code in (0, 1) and starts, code
        assert all(v["hit"] for v in (o["value"] for o in starts))
    finally:
        assert main(["cluster", "down", "--name", name]) == 0
    assert not _mounts_under(eoslab_home), "cluster down left a mount"
    plain = f"plain-{uuid.uuid4().hex[:6]}"
    assert main(["cluster", "up", "--name", plain, "--controllers", "1", "--txn-coordinators", "0"]) == 0
    try:
        with pytest.raises(ValueError, match="start it with `eoslab cluster up --disk lazy`"):
            RunConfig(workload="queue", nemesis=["lose-unsynced"], time_limit=5, seed=1, out=str(tmp_path / "r2"),
                      cluster=plain).validate()
    finally:
        main(["cluster", "down", "--name", plain])
