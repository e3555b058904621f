"""The disk faults on the Docker runtime (cluster.docker_disks): host lazyfs mounts bound into real containers.

A compose cluster made with disk="lazy" has its broker's and ZooKeeper's data
on lazy filesystems mounted on the host before their containers start, which
the containers see as their data volume. A lose-unsynced power loss kills the
broker's container, drops what only the page cache held and starts the
container again through the runtime: the log of a topic that fsyncs every
message (flush.messages=1) is there as it was, byte for byte, and every
record acknowledged to it is read back; the log of a topic that never
fsyncs lost what it had been acknowledged. A filesystem whose process died
under a running container is mounted again by `start`, which restarts the
container on it. A harness killed with SIGKILL leaves its mounts (they
outlive it) and `eoslab cluster down` removes them: `mount` lists no lazyfs
mount of the project afterwards.
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap

import pytest

from cluster import docker_disks
from cluster import nemesis as nem
from cluster.docker_compose import project_for, secret_path
from cluster.lazyfs import LazyFs, lazyfs_mounts
from cluster.nemesis_disk import DISK_PACKAGES
from eoslab.common import record_batch as rb
from eoslab.common.errors import KafkaError
from tests.docker.conftest import ROOT, SESSION_TIMEOUT_MS, eoslab, open_cluster
from tests.helpers import leader_address, new_topic, produce_raw, read_partition, values, wait_for

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1200)]

SEGMENT = "{}-0/00000000000000000000.log"


def _need_fuse() -> None:
    reason = LazyFs.available()
    if reason:
        pytest.skip(reason)


@pytest.fixture(scope="module")
def lazy_cluster(docker_engine):
    _need_fuse()
    rt = open_cluster(docker_engine, "lazyfs", brokers=1, controllers=1, txn_coordinators=0, disk="lazy")
    try:
        rt.up(timeout=240)
        yield rt
    finally:
        rt.down()
        assert not _project_mounts(rt.project), "down unmounts every filesystem of the project"
        assert not os.path.exists(secret_path(rt.project)), "down removes the project's cluster secret"


def _project_mounts(project: str) -> list[str]:
    """The project's lazyfs mounts as `mount` lists them (what an operator would look at)."""
    out = subprocess.run(["mount"], capture_output=True, text=True, check=True).stdout
    folder = docker_disks.host_dir(project)
    return [ln for ln in out.splitlines() if "lazyfs" in ln and f" on {folder}/" in ln]


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def test_a_power_loss_keeps_the_fsynced_log_and_drops_the_unsynced_one(lazy_cluster):
    rt = lazy_cluster
    disks = docker_disks.disks(rt)
    assert {disks.mountpoint("broker-1"), disks.mountpoint("zookeeper")} <= set(lazyfs_mounts())
    assert len(_project_mounts(rt.project)) == 2
    code, out = rt.container("broker-1").exec_run(["cat", "/proc/mounts"])
    assert code == 0 and any(ln.split()[1:3] == ["/var/lib/eoslab", "fuse.lazyfs"] for ln in out.decode().splitlines())

    boot = rt.bootstrap_all()
    md = new_topic(boot, "synced", 1, configs={"flush.messages": "1"})
    new_topic(boot, "unsynced", 1)
    n, per = 20, 5
    for topic in ("synced", "unsynced"):
        leader = leader_address(md, topic)
        for i in range(n):
            assert produce_raw(leader, topic, rb.build_batch(values(per, start=i * per)), acks=-1).error == 0
    status = rt.disk("broker-1").status()
    assert status["/" + SEGMENT.format("unsynced")]["unsynced_bytes"] > 0, status
    assert status.get("/" + SEGMENT.format("synced"), {}).get("unsynced_bytes", 0) == 0, status
    synced = os.path.join(disks.mountpoint("broker-1"), SEGMENT.format("synced"))
    unsynced = os.path.join(disks.mountpoint("broker-1"), SEGMENT.format("unsynced"))
    synced_bytes, unsynced_size = _read(synced), os.path.getsize(unsynced)

    ctx = nem.Context(rt, None, "unsynced", 1, md, random.Random(0))
    pkg = DISK_PACKAGES["lose-unsynced"]
    started = pkg.start(ctx)
    assert started["nodes"] == ["broker-1"]
    assert rt.node_state("broker-1") == "dead", "the container is killed before its disk loses anything"
    assert started["hit"]["broker-1"]["bytes_dropped"] > 0
    assert (os.path.getsize(unsynced) if os.path.exists(unsynced) else 0) < unsynced_size
    assert _read(synced) == synced_bytes, "what the broker fsynced survives the power loss"

    pkg.stop(ctx, started)
    rt.wait_ready(120)
    assert rt.node_state("broker-1") == "running"
    assert disks.mountpoint("broker-1") in lazyfs_mounts(), "restarted on the same filesystem"
    expected = [f"v{i}".encode() for i in range(n * per)]
    try:
        wait_for(lambda: _values(boot, "synced") == expected, 120, "every record acknowledged to the fsynced topic")
    except AssertionError:
        raise AssertionError(f"{_values(boot, 'synced')}; broker-1 {rt.node_state('broker-1')}, its log: "
                             f"{rt.logs('broker-1', 30)}") from None
    lost = _values(boot, "unsynced")
    assert lost is not None and len(lost) < n * per, f"the never-fsynced topic lost acknowledged records: {lost}"
    md.close()


def _values(boot: str, topic: str) -> list[bytes] | None:
    """The partition's values, or None while the restarted broker does not serve it yet."""
    try:
        return [r.value for r in read_partition(boot, topic)]
    except KafkaError:
        return None


def test_start_mounts_a_dead_filesystem_again_and_restarts_the_container_on_it(lazy_cluster):
    rt = lazy_cluster
    fs = rt.disk("broker-1")
    os.kill(_mount_process(fs.mountpoint), signal.SIGKILL)
    wait_for(lambda: not docker_disks.disks(rt).live("broker-1"), 30, "the filesystem's process gone")
    c = rt.container("broker-1")
    c.reload()                               # the runtime lists containers sparsely: their full state
    started_at = c.attrs["State"]["StartedAt"]
    rt.start("broker-1")
    assert docker_disks.disks(rt).live("broker-1")
    c = rt.container("broker-1")
    c.reload()
    assert c.status == "running" and c.attrs["State"]["StartedAt"] != started_at, "restarted on the new mount"
    code, out = c.exec_run(["sh", "-c", "echo ok > /var/lib/eoslab/probe && cat /var/lib/eoslab/probe"])
    assert code == 0 and out.strip() == b"ok", out
    assert rt.disk("broker-1").status()["/probe"]["unsynced_bytes"] == 3, "the container writes to the new mount"
    rt.wait_ready(120)


def _mount_process(mountpoint: str) -> int:
    """The pid of the lazyfs process serving `mountpoint` (its command line names it)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"cluster.lazyfs" in argv and mountpoint.encode() in argv:
            return int(pid)
    raise AssertionError(f"no lazyfs process serves {mountpoint}")


_HARNESS = textwrap.dedent("""
    import sys
    from cluster.docker_runtime import DockerRuntime
    rt = DockerRuntime(sys.argv[1], cluster_name=sys.argv[2], eoslab_image=sys.argv[3], brokers=1, controllers=1,
                       txn_coordinators=0, session_timeout_ms=int(sys.argv[4]), disk="lazy", engine_wait=120)
    rt.up(timeout=240)
    print("up", flush=True)
    sys.stdin.read()
""")


def test_cluster_down_removes_the_mounts_of_a_sigkilled_harness(docker_engine):
    _need_fuse()
    name = f"lazy-dk-{os.getpid()}"
    project = project_for(name)
    with subprocess.Popen([sys.executable, "-c", _HARNESS, project, name, docker_engine, str(SESSION_TIMEOUT_MS)],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT) as harness:
        try:
            assert harness.stdout.readline().decode().strip() == "up", "the harness's cluster is up on lazy disks"
            assert len(_project_mounts(project)) == 2
            harness.send_signal(signal.SIGKILL)
            harness.wait()
            assert len(_project_mounts(project)) == 2, "the mounts outlive the harness"
            r = eoslab("cluster", "down", "--name", name, "--runtime", "docker", timeout=300)
            assert r.returncode == 0, r.stderr
            assert not _project_mounts(project), "cluster down leaves no lazyfs mount"
            assert not os.path.exists(docker_disks.host_dir(project))
            assert not os.path.exists(docker_disks.override_file(project))
        finally:
            harness.kill()                  # a no-op once it is gone
            eoslab("cluster", "down", "--name", name, "--runtime", "docker", timeout=300)
