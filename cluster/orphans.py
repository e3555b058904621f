"""Local clusters whose owner died: found through the slot locks and stopped, so none runs on unseen.

A local cluster made for one process (a run's own cluster, a test's, a benchmark's neighbour) records
that process as its owner in state.json ("owner": pid and its start time, so a reused pid is not taken
for it); `eoslab cluster up` makes a standing cluster, with no owner, that outlives the command.

Guarantees:
- `owner_record()` is this process's {"pid", "start"}; `owner_alive(rec)` is False only when that
  exact process is gone (no such pid, a zombie, or another process under the pid); no owner (None)
  counts as alive, so a standing cluster is never an orphan.
- `find()` lists the clusters holding a slot lock (cluster.slots, machine-wide: every home, every
  pytest tmp dir) whose state.json names an owner that is gone while one of their nodes still runs;
  nothing that cannot be read is listed.
- a cluster whose directory was removed under it (its state.json gone with it) is found through the
  slot's node cgroups instead: nodes still run there in a removed working directory, and no process
  that holds the slot's lock lives; it is listed with "lost": True and its slot;
- `reap(log)` stops each of them through its own runtime (`LocalRuntime.down`: nodes, network
  rules, cgroups, lazy mounts, slot, data), a lost one through its slot (the nodes working in its
  removed directory, then the slot's rules, cgroups and lock once no node is left there), and writes
  one line per cluster to `log`; a cluster that fails to go down is named, never raised, and the
  others still go.
"""
from __future__ import annotations

import json
import os
import sys

from cluster import netfilter, procfs, slots


def owner_record() -> dict:
    return {"pid": os.getpid(), "start": procfs.start_time(os.getpid())}


def owner_alive(rec: dict | None) -> bool:
    if not rec:
        return True
    pid = rec.get("pid")
    if not isinstance(pid, int) or procfs.gone(pid):
        return False
    return rec.get("start") is None or procfs.start_time(pid) == rec.get("start")


def _node_alive(pid, cluster_dir: str, zk_marker: str) -> bool:
    if not isinstance(pid, int) or procfs.gone(pid):
        return False
    cmd = procfs.cmdline(pid) or ""
    return cluster_dir in cmd or zk_marker in cmd


def find() -> list[dict]:
    """[{"name", "home", "dir", "owner", "live_nodes"}] of every orphaned local cluster."""
    out = []
    try:
        names = sorted(os.listdir(slots.SLOT_DIR), key=lambda n: (len(n), n))
    except OSError:
        names = []
    for slot_name in names:
        if not slot_name.isdigit():
            continue
        cluster_dir = (slots.lock_record(int(slot_name)) or {}).get("dir")
        if not isinstance(cluster_dir, str) or not cluster_dir:
            continue
        try:
            with open(os.path.join(cluster_dir, "state.json")) as f:
                state = json.load(f)
        except (OSError, ValueError):
            continue
        if not isinstance(state, dict) or owner_alive(state.get("owner")):
            continue
        zk_marker = f"127.77.{state.get('slot')}.1:"
        live = sorted(n for n, spec in (state.get("nodes") or {}).items()
                      if _node_alive(spec.get("pid"), cluster_dir, zk_marker))
        if live:
            out.append({"name": state.get("name") or os.path.basename(cluster_dir),
                        "home": os.path.dirname(os.path.dirname(cluster_dir)), "dir": cluster_dir,
                        "owner": state.get("owner"), "live_nodes": live})
    return out + _lost()


def _lost() -> list[dict]:
    """Clusters whose directory was removed while their nodes ran: found by their slots' cgroups."""
    out = []
    for slot, nodes in sorted(netfilter.slot_cgroups().items()):
        lock = slots.lock_record(slot)
        if lock is not None:
            if os.path.exists(os.path.join(lock.get("dir") or "", "state.json")):
                continue                               # a cluster with its state: find()'s first part
            if isinstance(lock.get("pid"), int) and not procfs.gone(lock["pid"]) and lock["pid"] != os.getpid():
                continue                               # whoever holds the slot may still be starting it
        removed = {}
        for node, pids in nodes.items():
            for pid in pids:
                where = procfs.cwd(pid) or ""
                if where.endswith(netfilter.DELETED):
                    removed.setdefault(where.removesuffix(netfilter.DELETED), set()).add(node)
        if not removed:
            continue
        cluster_dir = max(removed, key=lambda d: len(removed[d]))
        out.append({"name": os.path.basename(cluster_dir), "home": None, "dir": cluster_dir,
                    "owner": {"pid": lock.get("pid")} if lock else None,
                    "live_nodes": sorted(removed[cluster_dir]), "slot": slot, "lost": True})
    return out


def _reap_lost(o: dict) -> None:
    slot = o["slot"]
    netfilter.kill_cgroups(slot, cwd=o["dir"])
    lock = slots.lock_record(slot)
    running = [p for ps in netfilter.node_pids(slot).values() for p in ps if not procfs.gone(p)]
    if running or (lock is not None and lock.get("dir") != o["dir"]):
        return                                         # something else runs in the slot: leave it be
    # (a killed node that init has not reaped yet is still listed in its group: it runs no more)
    try:
        netfilter.heal(slot)
    except netfilter.NetfilterUnavailable:
        pass
    netfilter.remove_cgroups(slot)
    if lock is not None:
        slots.release(slot)


def reap(log=sys.stderr) -> list[str]:
    """Stop every orphaned local cluster; the names of those stopped."""
    from cluster.local import LocalRuntime
    stopped = []
    for o in find():
        try:
            if o.get("lost"):
                _reap_lost(o)
            else:
                LocalRuntime.load(o["name"], home=o["home"]).down()
        except Exception as e:  # noqa: BLE001 - one cluster that will not go must not keep the others
            print(f"eoslab: orphaned cluster {o['name']} ({o['dir']}) could not be stopped: {e}", file=log)
            continue
        stopped.append(o["name"])
        why = (f"its directory {o['dir']} was removed" if o.get("lost") else
               f"its owner, process {o['owner'].get('pid')}, is gone")
        print(f"eoslab: stopped orphaned cluster {o['name']} ({len(o['live_nodes'])} nodes still running; "
              f"{why})", file=log)
    return stopped
