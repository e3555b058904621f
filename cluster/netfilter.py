"""Network faults between local nodes with iptables, keyed on each node's cgroup (root only).

On loopback every outgoing connection leaves from 127.0.0.1, so a rule on the
source address cannot tell nodes apart. Each node process therefore lives in
its own cgroup-v2 group, eoslab/<slot>/<node>, and a rule matches the
sending node by `-m cgroup --path` and the receiving node by its address.

Guarantees: every rule lives in the chain EOSLAB-<slot>, jumped to from
OUTPUT for that slot's 127.77.<slot>.0/24 block only, so `heal` (flush and
delete the chain) removes exactly this cluster's rules; a rule added with a
tag (an iptables comment) is removed with `remove_tagged` without touching
the others (a fault package's own rules, a workload's own cut); `loss` drops
a random share of a node's packets (`-m statistic --mode random`); without
root, iptables or a cgroup-v2 hierarchy the calls raise NetfilterUnavailable
with one readable line. Client processes that are not nodes can be placed in
a cgroup of the same tree (`place`) and cut like nodes.
"""
from __future__ import annotations

import itertools
import os
import shlex
import shutil
import signal
import subprocess
import threading
import time

from cluster import procfs

_LOCK = threading.Lock()     # rule edits of one process never interleave
DELETED = " (deleted)"       # how the kernel names a working directory that was removed


class NetfilterUnavailable(RuntimeError):
    pass


def cgroup2_root() -> str | None:
    """Mount point of the cgroup-v2 hierarchy, if any."""
    try:
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                if len(parts) > 2 and parts[2] == "cgroup2":
                    return parts[1]
    except OSError:
        pass
    return None


def node_cgroup(slot: int, node: str) -> str:
    return f"eoslab/{slot}/{node}"


def place(slot: int, node: str, pid: int) -> bool:
    """Move a node's process into its own cgroup; False where that is not possible."""
    root = cgroup2_root()
    if root is None or os.geteuid() != 0:
        return False
    path = os.path.join(root, node_cgroup(slot, node))
    try:
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write(str(pid))
        return True
    except OSError:
        return False


def kill_cgroups(slot: int, cwd: str | None = None) -> list[int]:
    """SIGKILL every process still in the slot's node groups (with `cwd`: only those working in that
    directory, also once it was removed, a cluster's own nodes, never another cluster's that took the
    slot over); returns their pids."""
    killed = []
    for pids in node_pids(slot).values():
        for pid in pids:
            if pid == os.getpid():
                continue
            if cwd is not None:
                where = procfs.cwd(pid)
                if where is None or where.removesuffix(DELETED) != os.path.realpath(cwd):
                    continue
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 5
    while killed and time.monotonic() < deadline and not all(procfs.gone(p) for p in killed):
        time.sleep(0.02)
    return killed


def node_pids(slot: int) -> dict[str, list[int]]:
    """node -> pids of the slot's node groups that still hold a process."""
    root = cgroup2_root()
    base = os.path.join(root, "eoslab", str(slot)) if root else None
    out: dict[str, list[int]] = {}
    try:
        nodes = os.listdir(base) if base else []
    except OSError:
        return out
    for node in nodes:
        try:
            with open(os.path.join(base, node, "cgroup.procs")) as f:
                pids = [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            continue
        if pids:
            out[node] = pids
    return out


def slot_cgroups() -> dict[int, dict[str, list[int]]]:
    """slot -> node -> pids of every slot's node groups that still hold a process."""
    root = cgroup2_root()
    try:
        slots = [int(d) for d in os.listdir(os.path.join(root, "eoslab")) if d.isdigit()] if root else []
    except OSError:
        return {}
    return {slot: nodes for slot in slots if (nodes := node_pids(slot))}


def remove_cgroups(slot: int) -> None:
    root = cgroup2_root()
    if root is None:
        return
    base = os.path.join(root, "eoslab", str(slot))
    if not os.path.isdir(base):
        return
    for d in os.listdir(base):
        try:
            os.rmdir(os.path.join(base, d))
        except OSError:
            pass
    try:
        os.rmdir(base)
    except OSError:
        pass


def _ipt(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    exe = shutil.which("iptables")
    if exe is None or os.geteuid() != 0:
        raise NetfilterUnavailable("network faults on the local runtime need root and iptables")
    r = subprocess.run([exe, "-w", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise NetfilterUnavailable(f"iptables {' '.join(args)}: {r.stderr.strip()}")
    return r


def _chain(slot: int) -> str:
    return f"EOSLAB-{slot}"


def _ensure_chain(slot: int) -> None:
    if cgroup2_root() is None:
        raise NetfilterUnavailable("network faults on the local runtime need a cgroup-v2 hierarchy")
    chain = _chain(slot)
    if _ipt("-n", "-L", chain, check=False).returncode != 0:
        _ipt("-N", chain)
    jump = ["OUTPUT", "-d", f"127.77.{slot}.0/24", "-j", chain]
    if _ipt("-C", *jump, check=False).returncode != 0:
        _ipt("-I", *jump)


def _tag(tag: str | None) -> list[str]:
    return ["-m", "comment", "--comment", f"eoslab:{tag}"] if tag else []


def drop(slot: int, src_node: str, dst_addr: str, extra: list[str] | None = None, tag: str | None = None) -> None:
    """Drop what node src_node sends to dst_addr (optionally narrowed by extra match args)."""
    with _LOCK:
        _ensure_chain(slot)
        _ipt("-A", _chain(slot), "-m", "cgroup", "--path", node_cgroup(slot, src_node), "-d", dst_addr,
             *(extra or []), *_tag(tag), "-j", "DROP")


def loss(slot: int, node: str, addr: str, probability: float, tag: str) -> None:
    """Drop a random share of the packets node sends into the cluster and of those sent to it."""
    if not 0.0 < probability < 1.0:
        raise ValueError(f"loss probability must be between 0 and 1, got {probability}")
    stat = ["-m", "statistic", "--mode", "random", "--probability", f"{probability:.4f}"]
    with _LOCK:
        _ensure_chain(slot)
        _ipt("-A", _chain(slot), "-m", "cgroup", "--path", node_cgroup(slot, node), *stat, *_tag(tag), "-j", "DROP")
        _ipt("-A", _chain(slot), "-d", addr, *stat, *_tag(tag), "-j", "DROP")


def remove_tagged(slot: int, tag: str) -> int:
    """Delete the rules added with this tag; returns how many."""
    with _LOCK:
        n = 0
        for line in rules(slot):
            args = shlex.split(line)
            if f"eoslab:{tag}" in args:
                _ipt("-D", *args[1:], check=False)
                n += 1
        return n


def unplace(slot: int, name: str) -> None:
    """Remove a client's cgroup once its process is gone (a node's go with remove_cgroups)."""
    root = cgroup2_root()
    if root is not None:
        try:
            os.rmdir(os.path.join(root, node_cgroup(slot, name)))
        except OSError:
            pass


def partition(slot: int, groups: list[list[tuple[str, str]]]) -> None:
    """Cut every pair of nodes in different groups, both directions. A node is (name, address)."""
    for g1, g2 in itertools.combinations(groups, 2):
        for a_name, a_addr in g1:
            for b_name, b_addr in g2:
                drop(slot, a_name, b_addr)
                drop(slot, b_name, a_addr)


def heal(slot: int) -> None:
    chain = _chain(slot)
    if shutil.which("iptables") is None or os.geteuid() != 0:
        return
    if _ipt("-n", "-L", chain, check=False).returncode != 0:
        return
    with _LOCK:
        _ipt("-F", chain)
    while _ipt("-D", "OUTPUT", "-d", f"127.77.{slot}.0/24", "-j", chain, check=False).returncode == 0:
        pass
    _ipt("-X", chain, check=False)


def rules(slot: int) -> list[str]:
    try:
        r = _ipt("-S", _chain(slot), check=False)
    except NetfilterUnavailable:
        return []
    return [ln for ln in r.stdout.splitlines() if ln.startswith("-A")] if r.returncode == 0 else []
