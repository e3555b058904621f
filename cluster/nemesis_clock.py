"""The clock fault packages (clock-jump, clock-strobe): one service's wall clock moved, through libfaketime.

Guarantees: `CLOCK_PACKAGES` names every clock package `eoslab run --nemesis`
takes; each is a `cluster.nemesis_packages.FaultPackage`. They act only on a
local or Docker cluster started with the clock preload (cluster.faketime,
cluster.docker_clock; `eoslab run` starts its cluster that way when its
schedule holds one of them) and otherwise raise RuntimeError with one line
at start. On both runtimes the offset goes to the target's control file, which
the harness writes on the host (a Docker service reads it through a bind
mount), so the packages and what they record are the same. Only the target's wall
clock moves (what Kafka stores and compares in timestamps, as the
transaction coordinator's timeout rule); its monotonic clock, and with it
every interval (ZooKeeper sessions, backoffs, request timeouts), does not, so
neither package kills, pauses or cuts a node off ZooKeeper: `process_fault`
and `zookeeper_fault` are False. A service takes a new offset within about a
second (libfaketime's re-read interval, cluster.faketime.CACHE_DURATION_S).

`clock-jump` draws its target from the seeded RNG: the transaction
coordinator that owns one of the workload's transactional ids when it has
them (a forward jump there ages every open transaction at once: the
coordinator's timeout rule fences and aborts it), else any running service;
the offset is a seeded whole number of seconds in [min_s, max_s], forward,
or back with probability back_share. It returns {"node", "offset_s"}; its
stop writes +0 back and returns {"node", "offset_s", "restored_s": 0}.

`clock-strobe` flips one seeded service's wall clock between two seeded
offsets (each in [-max_s, max_s], at least min_gap_s apart) every period_s
(seeded in [1, 2] s: a service re-reads its offset once a second) from a
thread in the nemesis process, until its stop ends the thread and writes +0
back. It returns {"node", "offsets_s", "period_s"}; the stop adds "flips",
how many times the offset changed.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from cluster import faketime
from cluster.fault_package import FaultPackage

if TYPE_CHECKING:
    from cluster.nemesis import Context

SERVICE_ROLES = ("broker", "controller", "txn-coordinator")


def _require_preload(ctx: Context) -> None:
    rt = ctx.runtime
    if getattr(rt, "name", "") not in ("local", "docker"):
        raise RuntimeError(f"clock faults need the local or the docker runtime, not {getattr(rt, 'name', rt)}")
    if not faketime.enabled(rt):
        raise RuntimeError(f"cluster {rt.cluster_name!r} was started without the clock preload "
                           f"({faketime.ENABLE_ENV}=1 eoslab cluster up, or a run that starts its own cluster)")


def _services(ctx: Context) -> list[str]:
    return [n for role in SERVICE_ROLES for n in ctx.nodes(role)]


class ClockJump(FaultPackage):
    """One service's wall clock jumps forward (or back) by a seeded number of seconds until the stop."""
    runtimes = ("local", "docker")     # where libfaketime is preloaded (cluster.faketime, cluster.docker_clock)

    def __init__(self, name: str = "clock-jump", min_s: int = 30, max_s: int = 600, back_share: float = 1 / 3):
        if not 0 < min_s <= max_s or not 0 <= back_share <= 1:
            raise ValueError("clock-jump needs 0 < min_s <= max_s and 0 <= back_share <= 1")
        self.name, self.min_s, self.max_s, self.back_share = name, min_s, max_s, back_share

    def _target(self, ctx: Context) -> str | None:
        tids = sorted(ctx.transactional_ids())
        coordinators = ctx.nodes("txn-coordinator")
        if tids and coordinators:
            owner = ctx.coordinator_of(ctx.rng.choice(tids))
            if owner in coordinators:
                return owner
        nodes = _services(ctx)
        return ctx.rng.choice(nodes) if nodes else None

    def start(self, ctx):
        _require_preload(ctx)
        node = self._target(ctx)
        if node is None:
            return None
        size = ctx.rng.randint(self.min_s, self.max_s)
        offset = -size if ctx.rng.random() < self.back_share else size
        faketime.set_offset(ctx.runtime, node, offset)
        return {"node": node, "offset_s": offset}

    def stop(self, ctx, started):
        if not started:
            return started
        faketime.set_offset(ctx.runtime, started["node"], 0)
        return {**started, "restored_s": 0}


class ClockStrobe(FaultPackage):
    """One service's wall clock flips between two seeded offsets, every period, until the stop."""
    runtimes = ("local", "docker")     # where libfaketime is preloaded (cluster.faketime, cluster.docker_clock)

    def __init__(self, name: str = "clock-strobe", max_s: int = 300, min_gap_s: int = 30,
                 period_s: tuple[float, float] = (1.0, 2.0)):
        if not 0 < min_gap_s <= max_s or not 0 < period_s[0] <= period_s[1]:
            raise ValueError("clock-strobe needs 0 < min_gap_s <= max_s and 0 < period_s[0] <= period_s[1]")
        self.name, self.max_s, self.min_gap_s, self.period_s = name, max_s, min_gap_s, period_s
        self._running: dict[str, tuple[threading.Thread, threading.Event, list[int]]] = {}

    def start(self, ctx):
        _require_preload(ctx)
        nodes = _services(ctx)
        if not nodes:
            return None
        node = ctx.rng.choice(nodes)
        a = ctx.rng.randint(-self.max_s, self.max_s)
        b = a
        while abs(b - a) < self.min_gap_s:
            b = ctx.rng.randint(-self.max_s, self.max_s)
        period = round(ctx.rng.uniform(*self.period_s), 3)
        self._halt(ctx, node)                                  # never two strobes on one node
        done, flips = threading.Event(), [0]
        rt = ctx.runtime

        def strobe() -> None:
            offsets, i = (a, b), 0
            while True:
                faketime.set_offset(rt, node, offsets[i % 2])
                flips[0] += 1
                i += 1
                if done.wait(period):
                    return

        t = threading.Thread(target=strobe, name=f"clock-strobe-{node}", daemon=True)
        self._running[node] = (t, done, flips)
        t.start()
        return {"node": node, "offsets_s": [a, b], "period_s": period}

    def _halt(self, ctx: Context, node: str) -> int:
        running = self._running.pop(node, None)
        if running is None:
            return 0
        t, done, flips = running
        done.set()
        t.join(10)
        faketime.set_offset(ctx.runtime, node, 0)
        return flips[0]

    def stop(self, ctx, started):
        if not started:
            return started
        flips = self._halt(ctx, started["node"])
        faketime.set_offset(ctx.runtime, started["node"], 0)
        return {**started, "flips": flips, "restored_s": 0}


CLOCK_PACKAGES: dict = {
    "clock-jump": ClockJump(),
    "clock-strobe": ClockStrobe(),
}
