"""Peer names to IPv4 addresses, for the sidecar's rules.

Guarantees: a peer is an IPv4 address, a name given as `--peer NAME=IP`, or a
name that DNS resolves; a name resolved once is remembered, so a peer that is
down (and gone from Docker's DNS) can still be cut off; anything else raises
UnknownPeer naming it. Loopback addresses are refused: cutting them off would
cut the service off from itself and from the sidecar.
"""
from __future__ import annotations

import ipaddress
import socket
import threading


class UnknownPeer(ValueError):
    pass


class Peers:
    def __init__(self, known: dict[str, str | None] | None = None):
        """known: NAME -> IP, or NAME -> None for names to resolve by DNS (and remember)."""
        self._lock = threading.Lock()
        self._static: dict[str, str] = {}
        self._addr: dict[str, str] = {}      # names DNS resolved, remembered
        self._names: set[str] = set()
        for name, ip in (known or {}).items():
            self._names.add(name)
            if ip is not None:
                self._static[name] = self._check_ip(ip, name)

    @staticmethod
    def parse(specs: list[str]) -> "Peers":
        """From `--peer` values: NAME=IP or NAME (resolved by DNS when needed)."""
        known: dict[str, str | None] = {}
        for spec in specs:
            name, sep, ip = spec.partition("=")
            if not name or (sep and not ip):
                raise UnknownPeer(f"bad --peer {spec!r}: expected NAME or NAME=IP")
            known[name] = ip if sep else None
        return Peers(known)

    @staticmethod
    def _check_ip(ip: str, what: str) -> str:
        try:
            addr = ipaddress.IPv4Address(ip)
        except ValueError:
            raise UnknownPeer(f"peer {what!r}: {ip!r} is not an IPv4 address") from None
        if addr.is_loopback or addr.is_unspecified:
            raise UnknownPeer(f"peer {what!r}: {ip} is a loopback or unspecified address")
        return str(addr)

    def warm(self) -> None:
        """Resolve every known name now (best effort), so later faults need no DNS."""
        for name in list(self._names):
            try:
                self.resolve(name)
            except UnknownPeer:
                pass

    def resolve(self, peer: str) -> str:
        peer = peer.strip()
        if not peer:
            raise UnknownPeer("empty peer name")
        try:
            ipaddress.IPv4Address(peer)
            return self._check_ip(peer, peer)
        except ValueError:
            pass
        if peer in self._static:
            return self._static[peer]
        with self._lock:
            cached = self._addr.get(peer)
        try:
            infos = socket.getaddrinfo(peer, None, socket.AF_INET, socket.SOCK_STREAM)
            ip = self._check_ip(infos[0][4][0], peer)
        except (socket.gaierror, UnicodeError, IndexError):
            if cached is not None:
                return cached
            raise UnknownPeer(f"unknown peer {peer!r}: not an IPv4 address, not in --peer, "
                              "and DNS does not resolve it") from None
        with self._lock:
            self._addr[peer] = ip
        return ip

    def resolve_all(self, peers: list[str]) -> list[tuple[str, str]]:
        """(name, ip) for each peer, without duplicates, in the order given."""
        out: list[tuple[str, str]] = []
        for p in peers:
            ip = self.resolve(p)
            if all(ip != seen for _, seen in out):
                out.append((p, ip))
        return out

    def known(self) -> dict[str, str]:
        with self._lock:
            return {**self._addr, **self._static}
