"""The disk fault packages (the lazy filesystem's lose-unsynced, torn-write and corrupt).

Guarantees: `DISK_PACKAGES` names every disk package `eoslab run --nemesis`
takes; each is a `cluster.nemesis_packages.FaultPackage` with `process_fault`
(each kills the brokers it hits). They act on a local or Docker cluster whose
brokers' data directories are lazy filesystems (the runtime's `disk="lazy"`,
which a run that names one of them asks for: `run_disk(cfg)`; `refusal(cfg)`
is the one line that refuses such a run where it cannot have them), reached
through the runtime (`rt.disk(node)`). Each fault first kills every broker it
hits (SIGKILL of its process, or of its container), and only once all of
them are gone touches their filesystems, as a power loss would; the stop
starts them again, on the same filesystems. Targets are drawn from the run's
seeded RNG, with the running brokers as they are when the fault starts:

- `lose-unsynced`: one broker, a partition's leader with its in-sync
  followers (a correlated power loss), or the whole cluster (every broker,
  and ZooKeeper where its dataDir is a lazy filesystem too: its transaction
  log is fsynced before it answers, forceSync, so it must come back with
  every acknowledged change); every write since each file's last fsync is
  dropped. ZooKeeper is killed after the brokers and started before them.
- `torn-write`: the same targets; each file also keeps a seeded prefix of its
  last unsynced write (ordered or not, drawn from the seed).
- `corrupt`: one broker, killed; what it wrote is made durable (a process
  crash: the page cache reaches the disk), then 1-4 bytes are flipped in the
  tail of a segment, in a checkpoint or in an index of the workload's topic
  (of any partition the broker holds when the topic has none of that kind).

What `start` returns (and the history records) names the nodes, the
parameters drawn and what was hit: per node the files touched and the bytes
dropped (or kept, or flipped). A fault that fails after killing restarts the
nodes it killed before it raises.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING

from cluster.fault_package import FaultPackage

if TYPE_CHECKING:
    from cluster.nemesis import Context

SPREADS = ("one", "leader-isr", "all")
FILES_RECORDED = 20                  # per node, the files with the most bytes dropped; the rest are counted


def run_disk(cfg) -> str | None:
    """The disk a run's cluster needs: "lazy" when it plays a disk package, else None."""
    from cluster.run_schedule import played_packages
    return "lazy" if any(n in DISK_PACKAGES for n in played_packages(cfg)) else None


def refusal(cfg) -> str | None:
    """One line saying why this run cannot play its disk packages here, or None."""
    if run_disk(cfg) is None:
        return None
    names = ", ".join(n for n in DISK_PACKAGES if n in cfg.nemesis) or "the schedule's disk faults"
    if cfg.runtime not in ("local", "docker", "auto"):
        return f"{names}: the disk faults need the local or the docker runtime (brokers on the lazy filesystem)"
    if cfg.cluster:
        from cluster.runtimes import open_runtime
        try:
            lazy = open_runtime(cfg.runtime, cfg.cluster).lazy_disks()
        except Exception:  # noqa: BLE001 - no such cluster: the run says so when it opens it
            lazy = False
        if not lazy:
            return (f"{names}: the disk faults need the cluster's data on the lazy filesystem: start it with "
                    f"`eoslab cluster up --disk lazy`, or let the run start its own")
        return None
    from cluster import lazy_disks
    why = lazy_disks.refusal("lazy")
    if why is None:
        return None
    return f"{names}: the disk faults need the lazy filesystem, which cannot mount here: {why.removeprefix('lazyfs: ')}"


def _brokers(ctx: Context, spread: str) -> tuple[str, list[str]]:
    """The spread as played (a leader with its ISR that metadata cannot name is one broker), and the brokers."""
    running = ctx.nodes("broker")
    if not running:
        return spread, []
    if spread == "all":
        return spread, running + _zookeeper(ctx)
    if spread == "leader-isr":
        p = ctx.rng.randrange(ctx.partitions)
        try:
            resp = ctx.metadata.refresh([ctx.topic])
            meta = next(pm for t in resp.topics if t.name == ctx.topic for pm in t.partitions if pm.partition == p)
        except Exception:  # noqa: BLE001 - mid-fault metadata: fall back to one broker
            meta = None
        if meta is not None and meta.leader >= 0:
            ids = [meta.leader] + [i for i in meta.isr if i != meta.leader]
            out = [f"broker-{i}" for i in ids if f"broker-{i}" in running]
            if out:
                return spread, sorted(out)
    return "one", [ctx.rng.choice(running)]


def _zookeeper(ctx: Context) -> list[str]:
    """["zookeeper"] when a whole-cluster power loss reaches its disk too: running, on a lazy filesystem."""
    zks = ctx.nodes("zookeeper")
    if len(zks) != 1:                  # none running (or an ensemble, which this power loss does not model)
        return []
    try:
        ctx.runtime.disk(zks[0])
    except Exception:  # noqa: BLE001 - no ZooKeeper node here, or not on a lazy filesystem: brokers only
        return []
    return zks


def _start_order(nodes: list[str]) -> list[str]:
    """ZooKeeper first: the brokers register in it."""
    return sorted(nodes, key=lambda n: not n.startswith("zookeeper"))


def _summary(result: dict, key: str = "lost_bytes") -> dict:
    """What a lazyfs fault did to one node's files: totals, and the files that lost the most."""
    files = sorted(result.items(), key=lambda kv: (-kv[1].get(key, 0), kv[0]))
    out = {"files": len(files), "bytes_dropped": sum(r.get("lost_bytes", 0) for r in result.values()),
           "files_removed": sum(1 for r in result.values() if r.get("removed"))}
    out["by_file"] = {path: r for path, r in files[:FILES_RECORDED]}
    return out


class _DiskFault(FaultPackage):
    process_fault = True
    runtimes = ("local", "docker")     # where the runtime mounts the lazy filesystems (rt.disk)

    def targets(self, ctx: Context) -> tuple[str, list[str]]:
        return _brokers(ctx, ctx.rng.choice(SPREADS))

    def params(self, ctx: Context) -> dict:
        return {}

    def hit(self, ctx: Context, fs, params: dict) -> dict:
        raise NotImplementedError

    def start(self, ctx):
        spread, nodes = self.targets(ctx)
        if not nodes:
            return None
        params = self.params(ctx)
        rt = ctx.runtime
        disks = {n: rt.disk(n) for n in nodes}        # before any kill: a cluster without lazy disks refuses
        killed = []
        try:
            for n in nodes:                           # the power goes: every process first
                rt.kill(n)
                killed.append(n)
                if rt.info().node(n).state != "dead":
                    raise RuntimeError(f"{n} outlived SIGKILL: its disk is left as it is")
            hit = {n: self.hit(ctx, disks[n], params) for n in nodes}
        except BaseException:
            for n in _start_order(killed):
                rt.start(n)
            raise
        return {"nodes": nodes, "spread": spread, **params, "hit": hit}

    def stop(self, ctx, started):
        if started:
            for n in _start_order(started["nodes"]):
                ctx.runtime.start(n)
        return started


class LoseUnsynced(_DiskFault):
    name = "lose-unsynced"

    def hit(self, ctx, fs, params):
        return _summary(fs.lose_unsynced())


class TornWrite(_DiskFault):
    name = "torn-write"

    def params(self, ctx):
        return {"seed": ctx.rng.randrange(1 << 31), "ordered": ctx.rng.random() < 0.5}

    def hit(self, ctx, fs, params):
        result = fs.torn_write(params["seed"], ordered=params["ordered"])
        return {**_summary(result), "bytes_kept": sum(r.get("kept_prefix", 0) for r in result.values())}


def _kind(path: str) -> str | None:
    name = os.path.basename(path)
    if name.endswith(".tmp"):
        return None
    if name.endswith(".log"):
        return "segment-tail"
    if "checkpoint" in name or name.endswith(".snapshot"):
        return "checkpoint"
    if name.endswith("index") or "index" in name.rsplit(".", 1)[-1]:
        return "index"
    return None


class Corrupt(_DiskFault):
    """Flip bytes of one killed broker's durable files: a segment's tail, a checkpoint or an index."""
    name = "corrupt"

    def targets(self, ctx):
        return _brokers(ctx, "one")

    def params(self, ctx):
        return {"seed": ctx.rng.randrange(1 << 31)}

    def hit(self, ctx, fs, params):
        fs.sync_all()                        # a process crash: what it wrote reaches the disk
        found: dict[str, dict[str, list[tuple[str, int]]]] = {}
        for root, dirs, files in os.walk(fs.mountpoint):
            dirs.sort()
            ours = os.path.basename(root).startswith(f"{ctx.topic}-")
            for f in sorted(files):
                path = os.path.join(root, f)
                kind, size = _kind(path), os.path.getsize(path)
                if kind and size > 0:
                    found.setdefault("topic" if ours else "other", {}).setdefault(kind, []).append(
                        (os.path.relpath(path, fs.mountpoint), size))
        pool = found.get("topic") or found.get("other") or {}
        if not pool:
            return {"corrupted": None, "why": "no segment, checkpoint or index with bytes in it"}
        kind = ctx.rng.choice(sorted(pool))
        path, size = ctx.rng.choice(pool[kind])
        if kind == "segment-tail":
            offset = size - 1 - ctx.rng.randrange(min(size, 64))
        else:
            offset = ctx.rng.randrange(size)
        length = ctx.rng.randint(1, min(4, size - offset))
        fs.corrupt(path, offset, length, params["seed"])
        return {"kind": kind, "path": path, "size": size, "offset": offset, "bytes_flipped": length}


DISK_PACKAGES: dict = {p.name: p for p in (LoseUnsynced(), TornWrite(), Corrupt())}
