"""Loopback address blocks for local clusters, so several run side by side (one per pytest-xdist worker).

Guarantees: slot N owns 127.77.N.0/24; a slot is held by exactly one cluster
through an O_EXCL lock file under /tmp/eoslab-slots; a slot whose owner's
state directory is gone, or whose processes are all dead while the process
that took the slot is gone too (or is the one asking), is reclaimed; a slot
where something still listens on the ZooKeeper or first broker address (a
cluster that lost its lock file) is skipped, whatever the lock files say;
so is a slot where anything listens on any of its addresses (a node left
behind by a killed harness);
`owned_by` tells whether a slot is still held by a given cluster.
"""
from __future__ import annotations

import json
import os

SLOT_DIR = os.environ.get("EOSLAB_SLOT_DIR", "/tmp/eoslab-slots")
FIRST, LAST = 1, 250


def address(slot: int, host: int) -> str:
    return f"127.77.{slot}.{host}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def lock_record(slot: int) -> dict | None:
    """The slot's lock as `acquire` writes it ({"dir", "pid"}): None when the slot is free, {} when the
    file cannot be read or holds no such record (a torn write, something else's file)."""
    try:
        with open(os.path.join(SLOT_DIR, str(slot))) as f:
            rec = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return rec if isinstance(rec, dict) else {}


def _stale(slot: int) -> bool:
    owner = lock_record(slot)
    if not owner:
        return True
    state = os.path.join(owner.get("dir", ""), "state.json")
    holder = owner.get("pid", -1)
    if not os.path.exists(state):
        return not _alive(holder)
    if holder != os.getpid() and _alive(holder):
        # the process that took the slot still runs, so a runtime there may be in the middle of its
        # cluster's `down` (nodes dead, the slot's cgroups not yet swept): taking the slot now would put
        # a new cluster's processes where that sweep kills them
        return False
    try:
        with open(state) as f:
            pids = [n.get("pid") for n in json.load(f).get("nodes", {}).values() if n.get("pid")]
    except (OSError, ValueError):
        return False
    return bool(pids) and not any(_alive(p) for p in pids)


# where every local cluster listens first: ZooKeeper (.1) and broker 1 (.21), see cluster.local
PROBES = ((1, 12181), (21, 19092))
PROC_NET = ("/proc/net/tcp", "/proc/net/tcp6")
_TCP_LISTEN = "0A"


def _listeners_in(slot: int) -> list[str]:
    """Sockets listening on any address of the slot (127.77.slot.0/24, IPv4 or IPv4-mapped IPv6), from
    the kernel's tables: a node left behind by a killed harness (a coordinator, a controller) holds its
    address whatever its cluster's lock file says. None when the tables cannot be read."""
    tail = f"{slot:02X}4D7F"            # 127.77.slot.x as the kernel prints it (x, slot, 77, 127 in hex)
    found = []
    for table in PROC_NET:
        try:
            with open(table) as f:
                lines = f.readlines()[1:]
        except OSError:
            return None
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] == _TCP_LISTEN:
                addr, port = fields[1].split(":")
                if addr[-6:] == tail and len(addr) in (8, 32) and (len(addr) == 8 or
                                                                   addr[:24] == "0000000000000000FFFF0000"):
                    found.append(f"127.77.{slot}.{int(addr[-8:-6], 16)}:{int(port, 16)}")
    return found


def _listening(slot: int) -> bool:
    """Something already listens on one of the slot's addresses (else, without the kernel's tables,
    answers on its ZooKeeper or first broker address)."""
    found = _listeners_in(slot)
    if found is not None:
        return bool(found)
    import socket
    for host, port in PROBES:
        try:
            with socket.create_connection((address(slot, host), port), timeout=0.2):
                return True
        except OSError:
            continue
    return False


def acquire(cluster_dir: str, avoid=()) -> int:
    """A free slot, held by cluster_dir from now on; never one of `avoid`."""
    os.makedirs(SLOT_DIR, exist_ok=True)
    for slot in range(FIRST, LAST + 1):
        if slot in avoid:
            continue
        path = os.path.join(SLOT_DIR, str(slot))
        for _ in range(2):
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                if _stale(slot):
                    try:
                        os.remove(path)
                    except FileNotFoundError:
                        pass
                    continue
                break
            with os.fdopen(fd, "w") as f:
                json.dump({"dir": cluster_dir, "pid": os.getpid()}, f)
            if _listening(slot):          # a cluster whose lock file was lost still runs there
                release(slot)
                break
            return slot
    raise RuntimeError(f"no free loopback slot under {SLOT_DIR} (all {LAST} in use)")


def owned_by(slot: int, cluster_dir: str) -> bool:
    """The slot's lock names this cluster directory (a stale runtime object must not clean up a slot
    that was released and has since gone to another cluster)."""
    return (lock_record(slot) or {}).get("dir") == cluster_dir


def release(slot: int) -> None:
    try:
        os.remove(os.path.join(SLOT_DIR, str(slot)))
    except FileNotFoundError:
        pass
