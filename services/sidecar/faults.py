"""The sidecar's fault table: checks a fault, puts it in force, reports it, removes them all.

Guarantees: a fault is checked in full before anything is changed, and a
nonsensical one (unknown peer, negative rate, probability outside (0, 1],
jitter above delay, ...) raises BadFault with one line naming the field;
a fault that fails half-way (iptables or tc refuses) heals everything and
raises FaultFailed saying so; every fault in force is listed by `rules()` with the commands that made it;
`heal()` removes every iptables rule, tc qdisc and delay proxy the table
added, and `shutdown()` also removes the sidecar's chains. Calls are
serialised by one lock.
"""
from __future__ import annotations

import math
import shutil
import subprocess
import threading
from dataclasses import dataclass, field

from services.sidecar import iptables as ipt
from services.sidecar.delay_proxy import DelayProxy
from services.sidecar.peers import Peers, UnknownPeer
from services.sidecar.shaping import Shaper, netem_available

BOTH, INBOUND, OUTBOUND = 0, 1, 2
DIRECTIONS = {BOTH: "both ways", INBOUND: "inbound", OUTBOUND: "outbound"}
MAX_DELAY_MS = 60_000


class BadFault(ValueError):
    pass


class FaultFailed(RuntimeError):
    """Putting a checked fault in force failed (iptables/tc refused); everything was healed."""


@dataclass
class Rule:
    id: str
    kind: str
    description: str
    commands: list[str] = field(default_factory=list)


class Faults:
    def __init__(self, peers: Peers, control_port: int | None, service_port: int | None,
                 netem: bool | None = None):
        self.peers = peers
        self.control_port = control_port
        self.service_port = service_port
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self._proxies: list[DelayProxy] = []
        self._shaper = Shaper(control_port)
        self._count = 0
        self._netem = netem

    # -- life cycle -------------------------------------------------------
    def start(self) -> None:
        """Clean whatever an earlier sidecar in this namespace left, then set up empty chains."""
        with self._lock:
            ipt.clear(self.control_port, remove=True)
            ipt.setup(self.control_port)
            self._shaper.clear_stale()
            if self._netem is None:
                self._netem = netem_available()

    @property
    def delay_mode(self) -> str:
        return "netem" if self._netem else "proxy"

    def heal(self) -> None:
        with self._lock:
            self._heal()

    def _heal(self) -> None:
        ipt.clear(self.control_port)
        self._shaper.clear()
        for p in self._proxies:
            p.stop()
        self._proxies.clear()
        self._rules.clear()

    def shutdown(self) -> None:
        with self._lock:
            self._heal()
            ipt.clear(self.control_port, remove=True)

    def rules(self) -> list[Rule]:
        with self._lock:
            return list(self._rules)

    def listing(self) -> tuple[list[str], list[str]]:
        with self._lock:
            return ipt.listing(), self._shaper.listing()

    # -- checks -----------------------------------------------------------
    def _peers(self, peers: list[str], required: bool) -> list[tuple[str, str]]:
        if required and not peers:
            raise BadFault("peers: at least one peer is required")
        try:
            return self.peers.resolve_all(list(peers))
        except UnknownPeer as e:
            raise BadFault(str(e)) from None

    @staticmethod
    def _direction(d: int) -> int:
        if d not in DIRECTIONS:
            raise BadFault(f"direction: unknown value {d}")
        return d

    @staticmethod
    def _probability(p: float, name: str = "probability") -> float:
        if math.isnan(p) or not 0 < p <= 1:
            raise BadFault(f"{name}: must be in (0, 1], got {p}")
        return p

    @staticmethod
    def _port(port: int) -> int:
        if not 0 <= port <= 65535:
            raise BadFault(f"port: must be in [0, 65535], got {port}")
        return port

    @staticmethod
    def _who(pairs: list[tuple[str, str]]) -> str:
        return ", ".join(f"{n} ({ip})" if n != ip else ip for n, ip in pairs) or "every peer"

    # -- filter rules -----------------------------------------------------
    def _filter(self, pairs, direction: int, out_match: list[str], in_match: list[str],
                target: list[str]) -> list[str]:
        cmds: list[str] = []
        ips = [ip for _, ip in pairs] or [None]
        for ip in ips:
            if direction in (BOTH, OUTBOUND):
                cmds.append(ipt.append("filter", ipt.OUT, (["-d", ip] if ip else []) + out_match + target))
            if direction in (BOTH, INBOUND):
                cmds.append(ipt.append("filter", ipt.IN, (["-s", ip] if ip else []) + in_match + target))
        return cmds

    def _add(self, kind: str, description: str, apply) -> Rule:
        with self._lock:
            self._count += 1
            rule = Rule(f"r{self._count}", kind, description)
            try:
                rule.commands = apply()
            except Exception as e:
                # Nothing stays half-applied: heal everything and say so.
                self._heal()
                raise FaultFailed(f"{kind} failed, so every fault was removed: {e}") from e
            self._rules.append(rule)
            return rule

    # -- the faults -------------------------------------------------------
    def partition(self, peers: list[str], direction: int) -> Rule:
        pairs, d = self._peers(peers, required=True), self._direction(direction)
        return self._add("partition", f"drop all traffic {DIRECTIONS[d]} with {self._who(pairs)}",
                         lambda: self._filter(pairs, d, [], [], ["-j", "DROP"]))

    def loss(self, peers: list[str], direction: int, probability: float) -> Rule:
        pairs, d, p = self._peers(peers, False), self._direction(direction), self._probability(probability)
        stat = ["-m", "statistic", "--mode", "random", "--probability", f"{p:.6f}"]
        return self._add("loss", f"drop {p:.0%} of packets {DIRECTIONS[d]} with {self._who(pairs)}",
                         lambda: self._filter(pairs, d, stat, stat, ["-j", "DROP"]))

    def reset(self, peers: list[str], direction: int, port: int) -> Rule:
        pairs, d, port = self._peers(peers, False), self._direction(direction), self._port(port)
        # The resets REJECT sends pass OUTPUT too: they must not match (and be swallowed) themselves.
        not_rst = ["!", "--tcp-flags", "RST", "RST"]
        out_m = ["-p", "tcp"] + (["--sport", str(port)] if port else []) + not_rst
        in_m = ["-p", "tcp"] + (["--dport", str(port)] if port else []) + not_rst
        where = f" on port {port}" if port else ""
        return self._add("reset", f"reset TCP {DIRECTIONS[d]} with {self._who(pairs)}{where}",
                         lambda: self._filter(pairs, d, out_m, in_m, ["-j", "REJECT", "--reject-with", "tcp-reset"]))

    def bandwidth(self, peers: list[str], rate_bps: int, burst_bytes: int) -> Rule:
        pairs = self._peers(peers, False)
        if rate_bps <= 0:
            raise BadFault(f"rate_bits_per_second: must be positive, got {rate_bps}")
        if burst_bytes < 0:
            raise BadFault(f"burst_bytes: must not be negative, got {burst_bytes}")
        burst = burst_bytes or max(1600, rate_bps // 80)
        return self._add("bandwidth", f"limit egress to {self._who(pairs)} to {rate_bps} bit/s (burst {burst} B)",
                         lambda: self._shaper.bandwidth([ip for _, ip in pairs], rate_bps, burst))

    def drop_responses(self, peers: list[str], port: int, probability: float) -> Rule:
        pairs = self._peers(peers, False)
        port = self._port(port) or (self.service_port or 0)
        if not port:
            raise BadFault("port: none given and the sidecar has no --service-port")
        p = 1.0 if probability == 0 else self._probability(probability)
        stat = ["-m", "statistic", "--mode", "random", "--probability", f"{p:.6f}"] if p < 1 else []
        share = "every" if p == 1 else f"{p:.0%} of"
        return self._add("drop-responses",
                         f"drop {share} packet sent from port {port} to {self._who(pairs)} (lost responses)",
                         lambda: self._filter(pairs, OUTBOUND, ["-p", "tcp", "--sport", str(port)] + stat, [],
                                              ["-j", "DROP"]))

    def delay(self, peers: list[str], direction: int, delay_ms: int, jitter_ms: int) -> Rule:
        pairs, d = self._peers(peers, False), self._direction(direction)
        if not 0 < delay_ms <= MAX_DELAY_MS:
            raise BadFault(f"delay_ms: must be in (0, {MAX_DELAY_MS}], got {delay_ms}")
        if not 0 <= jitter_ms <= delay_ms:
            raise BadFault(f"jitter_ms: must be in [0, delay_ms={delay_ms}], got {jitter_ms}")
        ips = [ip for _, ip in pairs]
        what = f"{delay_ms} ms ± {jitter_ms} ms {DIRECTIONS[d]} with {self._who(pairs)}"
        if self._netem and d == OUTBOUND:
            return self._add("delay", f"delay {what} (netem)", lambda: self._shaper.netem_delay(ips, delay_ms, jitter_ms))
        return self._add("delay", f"delay TCP {what} (userspace proxy)",
                         lambda: self._proxy_delay(ips, d, delay_ms, jitter_ms))

    def _proxy_delay(self, ips: list[str], d: int, delay_ms: int, jitter_ms: int) -> list[str]:
        proxy = DelayProxy(delay_ms, jitter_ms)
        port = proxy.start()
        self._proxies.append(proxy)
        redirect = ["-p", "tcp"]
        cmds: list[str] = []
        for ip in ips or [None]:
            if d in (BOTH, OUTBOUND):
                spec = (["-d", ip] if ip else ["!", "-d", "127.0.0.0/8"]) + redirect + \
                       ["-m", "mark", "!", "--mark", hex(ipt.PROXY_MARK), "-j", "REDIRECT", "--to-ports", str(port)]
                cmds.append(ipt.append("nat", ipt.NAT_OUT, spec))
            if d in (BOTH, INBOUND):
                skip = ["!", "--dport", str(self.control_port)] if self.control_port else []
                spec = (["-s", ip] if ip else []) + ["!", "-i", "lo"] + redirect + skip + \
                       ["-j", "REDIRECT", "--to-ports", str(port)]
                cmds.append(ipt.append("nat", ipt.NAT_PRE, spec))
        cmds += self._close_existing(ips)
        return cmds

    def _close_existing(self, ips: list[str]) -> list[str]:
        """Close established TCP connections to the peers so they reconnect through the proxy."""
        ss = shutil.which("ss")
        if ss is None:
            return []
        peers = " or ".join(f"dst {ip}" for ip in ips) if ips else "not dst 127.0.0.0/8"
        expr = f"( {peers} )" + (f" and not sport = :{self.control_port}" if self.control_port else "")
        subprocess.run([ss, "-K", "-t", "state", "established", expr], capture_output=True, text=True)
        return [f"ss -K -t state established '{expr}'"]
