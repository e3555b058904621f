"""Network partitions on loopback addresses with iptables (local runtime, root only).

Guarantees: every rule lives in the chain EOSLAB-<slot>, reached from OUTPUT
only for that slot's 127.77.<slot>.0/24 block, so `heal` (flush and delete
the chain) removes exactly this cluster's rules and nothing else.
"""
from __future__ import annotations

import itertools
import os
import shutil
import subprocess


class NetfilterUnavailable(RuntimeError):
    pass


def _ipt(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    exe = shutil.which("iptables")
    if exe is None or os.geteuid() != 0:
        raise NetfilterUnavailable("network partitions on the local runtime need root and iptables")
    r = subprocess.run([exe, "-w", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise NetfilterUnavailable(f"iptables {' '.join(args)}: {r.stderr.strip()}")
    return r


def _chain(slot: int) -> str:
    return f"EOSLAB-{slot}"


def _ensure_chain(slot: int) -> None:
    chain = _chain(slot)
    if _ipt("-n", "-L", chain, check=False).returncode != 0:
        _ipt("-N", chain)
    jump = ["OUTPUT", "-d", f"127.77.{slot}.0/24", "-j", chain]
    if _ipt("-C", *jump, check=False).returncode != 0:
        _ipt("-I", *jump)


def partition(slot: int, groups: list[list[str]]) -> None:
    """Drop traffic between hosts of different groups, both directions."""
    _ensure_chain(slot)
    for g1, g2 in itertools.combinations(groups, 2):
        for a in g1:
            for b in g2:
                _ipt("-A", _chain(slot), "-s", a, "-d", b, "-j", "DROP")
                _ipt("-A", _chain(slot), "-s", b, "-d", a, "-j", "DROP")


def drop(slot: int, src: str, dst: str, extra: list[str] | None = None) -> None:
    """One-way drop from src to dst (optionally narrowed by extra iptables match args)."""
    _ensure_chain(slot)
    _ipt("-A", _chain(slot), "-s", src, "-d", dst, *(extra or []), "-j", "DROP")


def heal(slot: int) -> None:
    chain = _chain(slot)
    if shutil.which("iptables") is None or os.geteuid() != 0:
        return
    if _ipt("-n", "-L", chain, check=False).returncode != 0:
        return
    _ipt("-F", chain)
    while _ipt("-D", "OUTPUT", "-d", f"127.77.{slot}.0/24", "-j", chain, check=False).returncode == 0:
        pass
    _ipt("-X", chain, check=False)


def rules(slot: int) -> list[str]:
    r = _ipt("-S", _chain(slot), check=False)
    return [ln for ln in r.stdout.splitlines() if ln.startswith("-A")] if r.returncode == 0 else []
