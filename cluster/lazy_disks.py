"""The local runtime's lazy disks: each broker's and ZooKeeper's data directory on a lazy filesystem.

Guarantees, for a LocalRuntime made with `disk="lazy"` (state.json's "disk"):
- `refusal("lazy")` is None where the lazy filesystem can be mounted here, else the one line
  `LazyFs.available()` gives; the runtime's `up` refuses with it before anything starts.
- Before a broker's process starts, `LazyDisks.ensure(node)` makes its data directory
  (DIR/data/broker-N) a lazyfs mount over a backing directory beside it
  (DIR/data/.broker-N.backing); ZooKeeper's dataDir likewise (DIR/zookeeper/data, backing
  DIR/zookeeper/.data.backing). A mount that is already live is kept as it is: a broker killed
  and restarted by a fault finds the filesystem, and the writes it left unsynced, as they were
  (the disk outlives the process). A mount whose filesystem process died is unmounted and
  mounted again (its unsynced writes then stay: nothing can undo them any more).
- Every name here is a function of the cluster's directory, so any process that loads the
  cluster (the CLI, a nemesis) reaches the same filesystems through their control sockets.
- `unmount_all(dir)` unmounts every lazyfs mount under the cluster's directory (a clean unmount
  keeps every write), whether or not this process mounted it, so `down` (and `eoslab cluster
  down` after a SIGKILLed harness) leaves no mount behind.
"""
from __future__ import annotations

import os

from cluster.lazyfs import LazyFs, LazyFsError, cleanup_stale, lazyfs_mounts

DISKS = (None, "plain", "lazy")      # None and "plain": the data directories are plain directories


def refusal(disk: str | None) -> str | None:
    """Why a cluster with this disk cannot run here (one line), or None."""
    if disk not in DISKS:
        return f"unknown disk {disk!r} (choose plain or lazy)"
    if disk == "lazy":
        return LazyFs.available()
    return None


def unmount_all(cluster_dir: str) -> list[str]:
    """Unmount every lazyfs mount at or under the cluster's directory; returns them."""
    return cleanup_stale(cluster_dir)


class LazyDisks:
    """The lazy filesystems of one local cluster's brokers."""

    def __init__(self, cluster_dir: str):
        self.dir = os.path.abspath(cluster_dir)

    def mountpoint(self, node: str) -> str:
        if node == "zookeeper":                           # its dataDir (cluster.zookeeper.write_config)
            return os.path.join(self.dir, "zookeeper", "data")
        return os.path.join(self.dir, "data", node)      # the broker's --data-dir (cluster.local_nodes)

    def backing(self, node: str) -> str:
        parent, name = os.path.split(self.mountpoint(node))
        return os.path.join(parent, f".{name}.backing")

    def fs(self, node: str) -> LazyFs:
        """A handle on the node's filesystem (mounted or not); faults go over its control socket."""
        return LazyFs(self.backing(node), self.mountpoint(node))

    def mounted(self, node: str) -> bool:
        return self.mountpoint(node) in lazyfs_mounts()

    def live(self, node: str) -> bool:
        """Whether the node's filesystem is mounted and its process answers on the control socket."""
        fs = self.fs(node)
        if not fs.mounted:
            return False
        try:
            fs.status()
            return True
        except LazyFsError:              # its filesystem process is gone: the kernel holds a dead mount
            return False

    def ensure(self, node: str) -> LazyFs:
        """The node's data directory as a live lazyfs mount: kept when live, mounted otherwise."""
        fs = self.fs(node)
        if self.live(node):
            return fs
        if fs.mounted:
            cleanup_stale(fs.mountpoint)
        if os.path.isdir(fs.mountpoint) and os.listdir(fs.mountpoint):
            raise LazyFsError(f"lazyfs: {fs.mountpoint} is not empty and not mounted: refusing to hide it")
        return fs.mount()
