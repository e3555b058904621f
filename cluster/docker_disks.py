"""The lazy disks of a Docker cluster: each broker's and ZooKeeper's data on a lazy filesystem on the host.

Guarantees, for a DockerRuntime made with `disk="lazy"` (what `eoslab cluster
up --runtime docker --disk lazy` and a run playing a disk package ask for):
- The filesystems run on the host, not in the containers: before compose
  starts the project, `reset(rt)` mounts one lazyfs (cluster.lazyfs) per
  broker and for ZooKeeper at .eoslab/docker/lazyfs/PROJECT/NODE (backing
  directory .NODE.backing beside it) and writes the compose override
  .eoslab/docker/PROJECT.lazyfs.yml, which binds each mount point over the
  service's data volume (/var/lib/eoslab, /var/lib/zookeeper). The bind is
  made when the container starts, so a container started after its mount
  sees the filesystem; the mount points are never remounted under a running
  container (`ensure` restarts a running container whose filesystem had to
  be mounted again, because its bind still names the dead one).
- A mount process runs in a session of its own and is found again by path
  (its control socket is a function of the mount point), so it outlives the
  process that mounted it (`eoslab cluster up`, `eoslab run`) and any later
  process reaches the same filesystems: `enabled(rt)` is True while the
  override exists (written by `reset`, removed by `forget`).
- A container kill leaves its filesystem as it was (the disk outlives the
  process): the disk faults kill the container, drop or tear the unsynced
  writes through the control socket, and start it through the runtime.
- ZooKeeper fsyncs its transaction log there: the image's zoo.cfg turns
  forceSync off (a killed process loses nothing, and fsync stalls on a
  shared disk cost sessions), which a power loss of its disk would turn into
  a ZooKeeper without its data; the override binds the same config with
  forceSync=yes (PROJECT.zoo.cfg beside it) over the image's, as ZooKeeper
  runs by default and on the local runtime.
- `forget(rt)` (after compose down, and by `up` before it starts a project)
  unmounts every lazyfs mount under the project's folder, whoever mounted it,
  then removes the folder and the override: a harness killed with SIGKILL
  leaves mounts that `eoslab cluster down` removes.
"""
from __future__ import annotations

import json
import os
import shutil

from cluster import lazy_disks
from cluster.docker_compose import REPO
from cluster.lazyfs import LazyFs, LazyFsError

STATE_DIR = os.path.join(REPO, ".eoslab", "docker")
TARGETS = {"broker": "/var/lib/eoslab", "zookeeper": "/var/lib/zookeeper"}   # the data volumes of compose


def host_dir(project: str) -> str:
    return os.path.join(STATE_DIR, "lazyfs", project)


def override_file(project: str) -> str:
    return os.path.join(STATE_DIR, f"{project}.lazyfs.yml")


def zookeeper_config_file(project: str) -> str:
    return os.path.join(STATE_DIR, f"{project}.zoo.cfg")


IMAGE_ZOOKEEPER_CONFIG = "/etc/zookeeper/eoslab/zoo.cfg"      # docker/Dockerfile.zookeeper copies it there
_REPO_ZOOKEEPER_CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                      "docker", "zookeeper", "zoo.cfg")


def _write_zookeeper_config(project: str) -> str:
    """The image's zoo.cfg with every forceSync line replaced by forceSync=yes; its path."""
    with open(_REPO_ZOOKEEPER_CONFIG) as f:
        lines = [ln for ln in f.read().splitlines() if not ln.strip().startswith("forceSync")]
    lines += ["# on a lazy disk, whose power loss drops what was not fsynced: ZooKeeper's default",
              "forceSync=yes"]
    path = zookeeper_config_file(project)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)
    return path


class DockerDisks(lazy_disks.LazyDisks):
    """The lazy filesystems of one compose project, in its host folder."""

    def mountpoint(self, node: str) -> str:
        return os.path.join(self.dir, node)


def disks(rt) -> DockerDisks:
    return DockerDisks(host_dir(rt.project))


def lazy_nodes(rt) -> list[str]:
    """The nodes whose data is on a lazy filesystem: every broker and ZooKeeper."""
    from cluster.docker_runtime import TOPOLOGY
    return [n for n in rt.nodes() if TOPOLOGY[n][0] in TARGETS]


def wanted(rt) -> bool:
    return getattr(rt, "disk_kind", None) == "lazy"


def enabled(rt) -> bool:
    """Whether this project's data is on lazy filesystems (asked for here, or its override exists)."""
    return wanted(rt) or os.path.exists(override_file(rt.project))


def compose_files(rt) -> list[str]:
    """The extra `-f` arguments of every compose call: the override when the project has lazy disks."""
    return ["-f", override_file(rt.project)] if enabled(rt) and os.path.exists(override_file(rt.project)) else []


def _write_override(rt) -> None:
    from cluster.docker_runtime import TOPOLOGY
    d = disks(rt)
    services = {n: {"volumes": [{"type": "bind", "source": d.mountpoint(n), "target": TARGETS[TOPOLOGY[n][0]]}]}
                for n in lazy_nodes(rt)}
    path = override_file(rt.project)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if "zookeeper" in services:
        services["zookeeper"]["volumes"].append({"type": "bind", "source": _write_zookeeper_config(rt.project),
                                                 "target": IMAGE_ZOOKEEPER_CONFIG, "read_only": True})
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump({"services": services}, f, indent=1)      # JSON is YAML: compose reads it as an override
    os.replace(tmp, path)


def reset(rt) -> None:
    """Before `up`: what an earlier project of this name left is unmounted and removed; with lazy disks
    wanted, every lazy node's filesystem is mounted (empty) and the override written. A filesystem that
    cannot mount raises DockerRuntimeError with one line, before any container starts."""
    from cluster.docker_faults import DockerRuntimeError
    forget(rt)
    if not wanted(rt):
        return
    why = lazy_disks.refusal("lazy")
    if why is not None:
        raise DockerRuntimeError(why)
    _write_override(rt)                   # first: a process killed while mounting leaves what `down` finds
    try:
        for n in lazy_nodes(rt):
            disks(rt).ensure(n)
    except LazyFsError as e:
        forget(rt)
        raise DockerRuntimeError(str(e)) from None


def forget(rt) -> list[str]:
    """Unmount every lazyfs mount under the project's folder, remove it and the override; returns the
    mount points unmounted."""
    from cluster.docker_faults import DockerRuntimeError
    try:
        gone = lazy_disks.unmount_all(host_dir(rt.project))
    except LazyFsError as e:
        raise DockerRuntimeError(str(e)) from None
    shutil.rmtree(host_dir(rt.project), ignore_errors=True)
    for path in (override_file(rt.project), zookeeper_config_file(rt.project)):
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
    return gone


def disk(rt, node: str) -> LazyFs:
    """The node's lazy filesystem, for the disk faults; DockerRuntimeError when it has none."""
    from cluster.docker_faults import DockerRuntimeError
    if not enabled(rt) or node not in lazy_nodes(rt):
        raise DockerRuntimeError(f"{node}'s data directory is not on a lazy filesystem (a docker cluster started "
                                 f"with disk=\"lazy\" has its brokers' and ZooKeeper's there)")
    return disks(rt).fs(node)


def ensure(rt, node: str) -> bool:
    """Before the node's container starts: its filesystem is live (kept when it is, mounted again when
    its process died). True when it was mounted again: a running container must then be restarted."""
    from cluster.docker_faults import DockerRuntimeError
    if not enabled(rt) or node not in lazy_nodes(rt):
        return False
    d = disks(rt)
    live = d.live(node)
    if not live:
        try:
            d.ensure(node)
        except LazyFsError as e:
            raise DockerRuntimeError(f"{node}: {e}") from None
    return not live
