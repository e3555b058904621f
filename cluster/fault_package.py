"""FaultPackage: the one interface of every nemesis fault package (Jepsen's nemesis: start, stop).

Guarantees: a package has a `name`; `start(ctx)` injects its fault and returns what it hit (None when
it found no target), `stop(ctx, started)` undoes it; `process_fault`, `zookeeper_fault` and `runtimes`
tell the lab-error rules and the run what it does and where it can act. This module imports nothing of
the packages, so each family of packages (cluster.nemesis_packages, nemesis_disk, nemesis_clock) can be
imported first.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cluster.nemesis import Context


class FaultPackage:
    name = ""
    process_fault = False       # start kills or pauses the node it returns (stop brings it back)
    zookeeper_fault = False     # while in force, services may lose ZooKeeper (or their session)
    runtimes = ("local", "docker")  # the runtimes whose nodes it can reach

    def start(self, ctx: Context):
        raise NotImplementedError

    def stop(self, ctx: Context, started):
        raise NotImplementedError
