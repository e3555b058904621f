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
- `reap(log)` stops each of them through its own runtime (`LocalRuntime.down`: nodes, network
  rules, cgroups, lazy mounts, slot, data) and writes one line per cluster to `log`; a cluster that
  fails to go down is named, never raised, and the others still go.
"""
from __future__ import annotations

import json
import os
import sys

from cluster import procfs, slots


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
        return out
    for slot_name in names:
        try:
            with open(os.path.join(slots.SLOT_DIR, slot_name)) as f:
                cluster_dir = json.load(f).get("dir") or ""
            with open(os.path.join(cluster_dir, "state.json")) as f:
                state = json.load(f)
        except (OSError, ValueError, AttributeError):
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
    return out


def reap(log=sys.stderr) -> list[str]:
    """Stop every orphaned local cluster; the names of those stopped."""
    from cluster.local import LocalRuntime
    stopped = []
    for o in find():
        try:
            LocalRuntime.load(o["name"], home=o["home"]).down()
        except Exception as e:  # noqa: BLE001 - one cluster that will not go must not keep the others
            print(f"eoslab: orphaned cluster {o['name']} ({o['dir']}) could not be stopped: {e}", file=log)
            continue
        stopped.append(o["name"])
        print(f"eoslab: stopped orphaned cluster {o['name']} ({len(o['live_nodes'])} nodes still running; "
              f"its owner, process {o['owner'].get('pid')}, is gone)", file=log)
    return stopped
