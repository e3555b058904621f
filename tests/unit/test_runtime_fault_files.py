"""Where a clock fault's control file and a disk fault's filesystem live is the runtime's to say.

cluster.faketime writes and reads the file `rt.clock_control_file(node)`
names and turns the preload on with `rt.enable_clock()`, whatever the
runtime; a runtime without them (Kubernetes) refuses in one line. The Docker
runtime's lazy disks (cluster.docker_disks): the compose override binds each
broker's and ZooKeeper's host mount point over its data volume, `disk(node)`
refuses a node or a project without one, and the mounts (real FUSE ones,
where FUSE works here) outlive the process that made them and go with
`forget`, whoever made them.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from cluster import docker_disks, faketime
from cluster.docker_faults import DockerRuntimeError
from cluster.docker_host_files import DockerHostFiles
from cluster.k8s_runtime import K8sRuntime
from cluster.lazyfs import LazyFs, lazyfs_mounts
from cluster.local import ClusterError, LocalRuntime
from cluster.runtime import Unsupported

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class _Compose(DockerHostFiles):
    """What DockerHostFiles needs of a DockerRuntime: a project, its nodes, the node check."""

    name = "docker"

    def __init__(self, project: str, disk: str | None = None):
        self.project, self.disk_kind, self.cluster_name = project, disk, project

    def nodes(self) -> list[str]:
        return ["zookeeper", "controller-1", "broker-1", "broker-2"]

    def _check(self, node: str) -> None:
        if node not in self.nodes():
            raise DockerRuntimeError(f"no node {node!r}")


class _Elsewhere:
    """A runtime of a kind cluster.faketime knows nothing about: only the runtime methods."""

    name, cluster_name = "elsewhere", "c"

    def __init__(self, folder: str):
        self.folder, self.enabled_by = folder, None

    def clock_enabled(self) -> bool:
        return self.enabled_by is not None

    def enable_clock(self) -> None:
        self.enabled_by = "enable_clock"

    def clock_control_file(self, node: str) -> str:
        return os.path.join(self.folder, f"clock-of-{node}")


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(docker_disks, "STATE_DIR", str(tmp_path / "docker"))
    return tmp_path / "docker"


@pytest.mark.fast
def test_faketime_writes_and_reads_the_control_file_the_runtime_names(tmp_path):
    rt = _Elsewhere(str(tmp_path))
    with pytest.raises(RuntimeError, match="without the clock preload"):
        faketime.set_offset(rt, "broker-1", 5)
    faketime.prepare_run(rt, True, ["clock-jump"])
    assert rt.enabled_by == "enable_clock"
    faketime.set_offset(rt, "broker-1", -30)
    assert (tmp_path / "clock-of-broker-1").read_text() == "-30\n"
    assert faketime.offset(rt, "broker-1") == -30 and faketime.offset(rt, "broker-2") == 0


@pytest.mark.fast
def test_the_local_runtime_names_its_control_file_and_refuses_an_unknown_node(tmp_path):
    rt = LocalRuntime("c", home=str(tmp_path), brokers=1, controllers=1, txn_coordinators=0)
    rt.state["slot"] = 1
    assert rt.clock_control_file("broker-1") == os.path.join(rt.dir, "faketime", "broker-1.rc")
    with pytest.raises(ClusterError, match="no node 'broker-9'"):
        rt.clock_control_file("broker-9")
    assert not rt.lazy_disks() and not rt.clock_enabled()


@pytest.mark.fast
def test_a_runtime_without_clock_or_disk_faults_refuses_in_one_line():
    rt = object.__new__(K8sRuntime)
    for call in (lambda: rt.disk("broker-1"), rt.enable_clock, lambda: rt.clock_control_file("broker-1")):
        with pytest.raises(Unsupported) as e:
            call()
        assert "\n" not in str(e.value) and "not k8s" in str(e.value)
    assert not rt.lazy_disks() and not rt.clock_enabled()
    with pytest.raises(ValueError, match="clock-jump: clock faults need the local or the docker runtime, not k8s"):
        faketime.prepare_run(rt, True, ["clock-jump"])


@pytest.mark.fast
def test_the_docker_override_binds_each_lazy_nodes_mount_point_over_its_data_volume(state_dir):
    rt = _Compose("p1", disk="lazy")
    assert rt.lazy_disks() and docker_disks.compose_files(rt) == []      # nothing written yet
    docker_disks._write_override(rt)
    path = str(state_dir / "p1.lazyfs.yml")
    assert docker_disks.compose_files(rt) == ["-f", path]
    with open(path) as f:
        services = json.load(f)["services"]
    folder = str(state_dir / "lazyfs" / "p1")
    zoo_cfg = str(state_dir / "p1.zoo.cfg")
    assert services == {
        "zookeeper": {"volumes": [{"type": "bind", "source": f"{folder}/zookeeper", "target": "/var/lib/zookeeper"},
                                  {"type": "bind", "source": zoo_cfg, "target": "/etc/zookeeper/eoslab/zoo.cfg",
                                   "read_only": True}]},
        "broker-1": {"volumes": [{"type": "bind", "source": f"{folder}/broker-1", "target": "/var/lib/eoslab"}]},
        "broker-2": {"volumes": [{"type": "bind", "source": f"{folder}/broker-2", "target": "/var/lib/eoslab"}]}}
    # ZooKeeper on a lazy disk fsyncs its log (the image's config does not): the rest of its config is the image's
    with open(zoo_cfg) as f:
        cfg = [ln for ln in f.read().splitlines() if ln and not ln.startswith("#")]
    with open(os.path.join(REPO, "docker", "zookeeper", "zoo.cfg")) as f:
        image_cfg = [ln for ln in f.read().splitlines() if ln and not ln.startswith("#")]
    assert "forceSync=no" in image_cfg and [ln for ln in cfg if ln.startswith("forceSync")] == ["forceSync=yes"]
    assert [ln for ln in cfg if not ln.startswith("forceSync")] == [ln for ln in image_cfg if not ln.startswith("forceSync")]
    other = _Compose("p1")              # another process reopening the project: the override says lazy
    assert other.lazy_disks() and other.disk("broker-1").mountpoint == f"{folder}/broker-1"
    with pytest.raises(DockerRuntimeError, match="controller-1's data directory is not on a lazy filesystem"):
        other.disk("controller-1")
    with pytest.raises(DockerRuntimeError, match="no node 'broker-3'"):
        other.disk("broker-3")
    docker_disks.forget(other)
    assert not os.path.exists(path) and not os.path.exists(zoo_cfg) and not other.lazy_disks()
    with pytest.raises(DockerRuntimeError, match="not on a lazy filesystem"):
        other.disk("broker-1")


_MOUNTER = textwrap.dedent("""
    import os, signal, sys
    from cluster import docker_disks
    from tests.unit.test_runtime_fault_files import _Compose
    docker_disks.STATE_DIR = sys.argv[1]
    docker_disks.reset(_Compose("p2", disk="lazy"))
    os.kill(os.getpid(), signal.SIGKILL)
""")


@pytest.mark.integration
def test_docker_lazy_disks_outlive_the_process_that_mounted_them_and_go_with_forget(state_dir):
    if LazyFs.available():
        pytest.skip(LazyFs.available())
    r = subprocess.run([sys.executable, "-c", _MOUNTER, str(state_dir)], cwd=REPO, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == -signal.SIGKILL, r.stderr
    rt = _Compose("p2")
    folder = str(state_dir / "lazyfs" / "p2")
    try:
        assert sorted(m for m in lazyfs_mounts() if m.startswith(folder + "/")) == [
            f"{folder}/broker-1", f"{folder}/broker-2", f"{folder}/zookeeper"]
        assert rt.lazy_disks()
        with open(f"{folder}/broker-1/f", "wb") as f:
            f.write(b"abc")
        assert rt.disk("broker-1").status()["/f"]["unsynced_bytes"] == 3, "found again through its socket"
        assert not docker_disks.ensure(rt, "broker-1"), "a live filesystem is kept"
        assert not docker_disks.ensure(rt, "controller-1"), "a node without one has nothing to mount"
    finally:
        gone = docker_disks.forget(rt)
    assert sorted(gone) == [f"{folder}/broker-1", f"{folder}/broker-2", f"{folder}/zookeeper"]
    assert not [m for m in lazyfs_mounts() if m.startswith(folder)] and not os.path.exists(folder)


@pytest.mark.fast
def test_a_filesystem_process_dying_while_asked_is_a_lazyfs_error_not_a_reset(tmp_path):
    """Its peer gone with the request unread: recv raises ECONNRESET, which `live` must read as dead."""
    import socket

    from cluster.lazyfs.control import LazyFsError, request
    path = str(tmp_path / "ctl.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(path)
        server.listen(1)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(path)
            client.sendall(b'{"op": "status"}\n')
            server.accept()[0].close()          # closed with the request unread: the client sees a reset
            with pytest.raises(ConnectionResetError):
                client.recv(10)
        import threading
        t = threading.Thread(target=lambda: server.accept()[0].close())
        t.start()
        try:
            with pytest.raises(LazyFsError, match="lazyfs control socket"):
                request(path, {"op": "status"}, timeout=10)
        finally:
            t.join()


@pytest.mark.fast
def test_a_run_with_disk_faults_is_taken_on_docker_and_refused_on_kubernetes(tmp_path, monkeypatch):
    from cluster import lazy_disks
    from cluster.nemesis_packages import PACKAGES
    from cluster.nemesis_disk import DISK_PACKAGES, refusal, run_disk
    from cluster.run import RunConfig
    monkeypatch.setattr(lazy_disks.LazyFs, "available", staticmethod(lambda: None))     # FUSE usable

    def cfg(runtime: str, **kw) -> RunConfig:
        return RunConfig(workload="queue", nemesis=["lose-unsynced"], time_limit=5, seed=1,
                         out=str(tmp_path / "run"), runtime=runtime, **kw)
    assert refusal(cfg("docker")) is None and run_disk(cfg("docker")) == "lazy"
    assert all("docker" in PACKAGES[name].runtimes for name in DISK_PACKAGES)
    assert refusal(cfg("k8s", cluster="eoslab")) == ("lose-unsynced: the disk faults need the local or the docker "
                                                     "runtime (brokers on the lazy filesystem)")
