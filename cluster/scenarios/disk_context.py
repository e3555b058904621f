"""Disk faults a scenario plays on brokers whose data directories are lazy filesystems.

Guarantees: these act on a scenario cluster started with `ClusterSpec(disk="lazy")`
(cluster.lazyfs through `rt.disk(node)`); on any other cluster they raise ScenarioError
before anything is killed. Each fault is a power loss as the lab's disk packages play it
(cluster/nemesis_disk.py): every node hit is SIGKILLed first, and only once all of them are
gone are their filesystems touched; the nodes stay down until `restart`. Each is recorded as
a nemesis info pair in the scenario's history: `power-loss` (value: the nodes and the fault;
result: per node the files hit and the bytes dropped), `tear` (result: the segment file, its
size and the bytes cut from its tail) and `restart` (the nodes started again) and `recovery` (the lines a
node's broker logged about a log it cut on recovery, read from its log file).
"""
from __future__ import annotations

import os

from cluster.scenarios.context import ScenarioError

CUT_MARK = "cut"                 # services/broker/log.py: "opening the log after ... shutdown cut N bytes"


def _disks(ctx, nodes: list[str]) -> dict:
    try:
        return {n: ctx.rt.disk(n) for n in nodes}
    except Exception as e:  # noqa: BLE001 - a cluster without lazy disks: refused before any kill
        raise ScenarioError(f"disk faults need ClusterSpec(disk='lazy'): {e}") from None


def _kill_all(ctx, nodes: list[str]) -> None:
    for n in nodes:                                  # the power goes: every process first
        ctx.rt.kill(n)
        if ctx.rt.info().node(n).state != "dead":
            raise ScenarioError(f"{n} outlived SIGKILL: its disk is left as it is")


def power_loss(ctx, nodes: list[str]) -> dict:
    """A correlated power loss: kill every node, then drop each one's writes since its last fsync."""
    disks = _disks(ctx, nodes)
    _kill_all(ctx, nodes)
    hit = {}
    for n in nodes:
        lost = disks[n].lose_unsynced()
        hit[n] = {"files": len(lost), "bytes_dropped": sum(r.get("lost_bytes", 0) for r in lost.values()),
                  "files_removed": sum(1 for r in lost.values() if r.get("removed"))}
    ctx.history.nemesis("power-loss", {"nodes": nodes, "fault": "lose-unsynced"},
                        {"nodes": nodes, "fault": "lose-unsynced", "hit": hit})
    return hit


def _segments(mountpoint: str, topic: str, partition: int) -> list[str]:
    d = os.path.join(mountpoint, f"{topic}-{partition}")
    names = sorted(n for n in os.listdir(d) if n.endswith(".log") and n[:-4].isdigit()) if os.path.isdir(d) else []
    return [os.path.join(d, n) for n in names]


def tear(ctx, node: str, topic: str, partition: int = 0, cut: int = 7) -> dict:
    """Kill `node`, make what it wrote durable (a process crash: its page cache reaches the disk),
    then leave the tail of its partition's last segment torn: its last `cut` bytes never reached
    the disk (the end of the last batch is missing, as when a write is torn mid-batch)."""
    fs = _disks(ctx, [node])[node]
    _kill_all(ctx, [node])
    fs.sync_all()
    segs = [s for s in _segments(fs.mountpoint, topic, partition) if os.path.getsize(s) > 0]
    if not segs:
        raise ScenarioError(f"{node} holds no segment of {topic}-{partition} with bytes in it")
    path, size = segs[-1], os.path.getsize(segs[-1])
    if size <= cut:
        raise ScenarioError(f"{node}'s segment {path} has {size} bytes: too short to tear {cut}")
    os.truncate(path, size - cut)
    fs.sync_all()                                   # the torn tail is what the disk holds now
    rel = os.path.relpath(path, fs.mountpoint)
    ctx.history.nemesis("tear", {"node": node, "topic": topic, "partition": partition},
                        {"node": node, "path": rel, "size": size, "bytes_cut": cut})
    return {"path": rel, "size": size, "bytes_cut": cut}


def cut_lines(ctx, node: str) -> list[str]:
    """The lines the node's broker logged about a log it cut on recovery."""
    path = os.path.join(ctx.rt.dir, "logs", f"{node}.log")
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return [ln.strip() for ln in f if "opening the log after" in ln and f" {CUT_MARK} " in ln]
    except OSError:
        return []


def restart(ctx, nodes: list[str]) -> None:
    """Start the nodes again on the filesystems the fault left."""
    for n in nodes:
        ctx.rt.start(n)
    ctx.history.nemesis("restart", {"nodes": nodes})


def record_cuts(ctx, node: str) -> list[str]:
    """Record (nemesis `recovery`) what the node's broker logged about cutting a log on recovery; call
    it once the node acts as a replica again (its logs were opened)."""
    lines = cut_lines(ctx, node)
    ctx.history.nemesis("recovery", {"node": node}, {"node": node, "cut_lines": lines})
    return lines
