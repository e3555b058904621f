"""The sidecar's iptables chains in its network namespace.

Guarantees: every rule the sidecar adds lives in one of its own chains —
EOSLAB-SC-IN (from INPUT), EOSLAB-SC-OUT (from OUTPUT) in the filter table,
EOSLAB-SC-NAT-OUT (from nat OUTPUT) and EOSLAB-SC-NAT-PRE (from nat
PREROUTING) — so `clear` removes exactly those and nothing of anyone else's
(Docker's own DNS rules in the same namespace stay). The first rules of the
filter chains accept loopback and the sidecar's control port, so no fault
can cut the sidecar off from the runtime that must later heal it. Errors
raise IptablesError with the failing command and iptables' one-line reason.
"""
from __future__ import annotations

import shutil
import subprocess

IN, OUT, NAT_OUT, NAT_PRE = "EOSLAB-SC-IN", "EOSLAB-SC-OUT", "EOSLAB-SC-NAT-OUT", "EOSLAB-SC-NAT-PRE"
CHAINS = (("filter", IN, "INPUT"), ("filter", OUT, "OUTPUT"),
          ("nat", NAT_OUT, "OUTPUT"), ("nat", NAT_PRE, "PREROUTING"))
# Packets the delay proxy sends carry this mark, so its own connections are not redirected back to it.
PROXY_MARK = 0x4E05


class IptablesError(RuntimeError):
    pass


def _exe() -> str:
    exe = shutil.which("iptables")
    if exe is None:
        raise IptablesError("iptables is not installed in this namespace's image")
    return exe


def run(table: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    cmd = [_exe(), "-w", "5", "-t", table, *args]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        reason = (r.stderr.strip().splitlines() or ["exit status %d" % r.returncode])[-1]
        raise IptablesError(f"`iptables -t {table} {' '.join(args)}` failed: {reason}")
    return r


def command_text(table: str, chain: str, spec: list[str]) -> str:
    return " ".join(["iptables", "-t", table, "-A", chain, *spec])


def setup(control_port: int | None) -> None:
    """Create the chains (empty) and their jumps; idempotent."""
    for table, chain, parent in CHAINS:
        if run(table, "-n", "-L", chain, check=False).returncode != 0:
            run(table, "-N", chain)
        if run(table, "-C", parent, "-j", chain, check=False).returncode != 0:
            run(table, "-I", parent, "1", "-j", chain)
    _guards(control_port)


def _guards(control_port: int | None) -> None:
    run("filter", "-A", IN, "-i", "lo", "-j", "RETURN")
    run("filter", "-A", OUT, "-o", "lo", "-j", "RETURN")
    if control_port:
        run("filter", "-A", IN, "-p", "tcp", "--dport", str(control_port), "-j", "RETURN")
        run("filter", "-A", OUT, "-p", "tcp", "--sport", str(control_port), "-j", "RETURN")


def append(table: str, chain: str, spec: list[str]) -> str:
    run(table, "-A", chain, *spec)
    return command_text(table, chain, spec)


def clear(control_port: int | None, remove: bool = False) -> None:
    """Flush every sidecar chain (keeping the guards), or remove chains and jumps with remove=True."""
    for table, chain, parent in CHAINS:
        if run(table, "-n", "-L", chain, check=False).returncode != 0:
            continue
        run(table, "-F", chain)
        if remove:
            while run(table, "-D", parent, "-j", chain, check=False).returncode == 0:
                pass
            run(table, "-X", chain, check=False)
    if not remove:
        _guards(control_port)


def listing() -> list[str]:
    """`iptables -S` of every sidecar chain, rules only, as in force now."""
    lines: list[str] = []
    for table, chain, _ in CHAINS:
        r = run(table, "-S", chain, check=False)
        if r.returncode == 0:
            lines += [f"-t {table} {ln}" for ln in r.stdout.splitlines() if ln.startswith("-A")]
    return lines
