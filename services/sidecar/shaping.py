"""Traffic shaping with tc on the namespace's interfaces: bandwidth limits (htb) and netem delay.

Guarantees: the sidecar owns the root qdisc of each non-loopback interface
only while a shaping rule is in force; traffic not matched by a rule goes
to an unlimited default class, and so does the sidecar's control port;
`clear` deletes the root qdiscs it added (the interface falls back to the
kernel default). `netem_available` answers whether this kernel has netem,
without leaving anything behind. Errors raise ShapingError with the failing
command and tc's one-line reason.
"""
from __future__ import annotations

import os
import shutil
import subprocess

UNLIMITED = "10gbit"


class ShapingError(RuntimeError):
    pass


def _tc(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    exe = shutil.which("tc")
    if exe is None:
        raise ShapingError("tc (iproute2) is not installed in this namespace's image")
    r = subprocess.run([exe, *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        reason = (r.stderr.strip().splitlines() or ["exit status %d" % r.returncode])[-1]
        raise ShapingError(f"`tc {' '.join(args)}` failed: {reason}")
    return r


def interfaces() -> list[str]:
    """The namespace's non-loopback interfaces (what peers are reached through)."""
    return sorted(i for i in os.listdir("/sys/class/net") if i != "lo")


def netem_available() -> bool:
    """Probe: add a netem root qdisc on loopback and delete it again at once."""
    r = _tc("qdisc", "add", "dev", "lo", "root", "handle", "7e57:", "netem", "delay", "0ms", check=False)
    if r.returncode != 0:
        return False
    _tc("qdisc", "del", "dev", "lo", "root", check=False)
    return True


class Shaper:
    """One htb tree per interface; each rule gets its own class (and netem qdisc for delay)."""

    def __init__(self, control_port: int | None):
        self.control_port = control_port
        self._rooted: set[str] = set()
        self._next = 2

    def _root(self, dev: str, commands: list[str]) -> None:
        if dev in self._rooted:
            return
        for args in (["qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1"],
                     ["class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", UNLIMITED]):
            _tc(*args)
            commands.append("tc " + " ".join(args))
        if self.control_port:
            args = ["filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
                    "match", "ip", "sport", str(self.control_port), "0xffff", "flowid", "1:1"]
            _tc(*args)
            commands.append("tc " + " ".join(args))
        self._rooted.add(dev)

    def _class(self, rate: str, extra: list[str], ips: list[str], leaf: list[str] | None) -> list[str]:
        commands: list[str] = []
        cid = format(self._next, "x")
        self._next += 1
        for dev in interfaces():
            self._root(dev, commands)
            steps = [["class", "add", "dev", dev, "parent", "1:", "classid", f"1:{cid}", "htb",
                      "rate", rate, "ceil", rate, *extra]]
            if leaf:
                steps.append(["qdisc", "add", "dev", dev, "parent", f"1:{cid}", "handle", f"{cid}:", *leaf])
            for ip in ips or ["0.0.0.0/0"]:
                dst = ip if "/" in ip else f"{ip}/32"
                steps.append(["filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "2",
                              "u32", "match", "ip", "dst", dst, "flowid", f"1:{cid}"])
            for args in steps:
                _tc(*args)
                commands.append("tc " + " ".join(args))
        return commands

    def bandwidth(self, ips: list[str], rate_bps: int, burst_bytes: int) -> list[str]:
        """Limit egress towards ips (all when empty) to rate_bps bits per second."""
        return self._class(f"{rate_bps}bit", ["burst", str(burst_bytes)], ips, None)

    def netem_delay(self, ips: list[str], delay_ms: int, jitter_ms: int) -> list[str]:
        """Delay egress towards ips with netem (only where netem_available())."""
        leaf = ["netem", "delay", f"{delay_ms}ms"] + ([f"{jitter_ms}ms"] if jitter_ms else [])
        return self._class(UNLIMITED, [], ips, leaf)

    def listing(self) -> list[str]:
        lines: list[str] = []
        for dev in sorted(self._rooted):
            r = _tc("qdisc", "show", "dev", dev, check=False)
            lines += [f"{dev}: {ln}" for ln in r.stdout.splitlines() if ln.strip()]
            r = _tc("class", "show", "dev", dev, check=False)
            lines += [f"{dev}: {ln}" for ln in r.stdout.splitlines() if ln.strip()]
        return lines

    def clear_stale(self) -> None:
        """At start: remove an htb root a previous sidecar in this namespace left behind."""
        for dev in interfaces():
            if "htb 1: root" in _tc("qdisc", "show", "dev", dev, check=False).stdout:
                _tc("qdisc", "del", "dev", dev, "root", check=False)

    def clear(self) -> None:
        for dev in sorted(self._rooted):
            _tc("qdisc", "del", "dev", dev, "root", check=False)
        self._rooted.clear()
        self._next = 2
