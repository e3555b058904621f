"""The clock fault packages (clock-jump, clock-strobe).

Guarantees: `CLOCK_PACKAGES` names every clock package `eoslab run --nemesis`
takes; each is a `cluster.nemesis_packages.FaultPackage`.
"""
from __future__ import annotations

CLOCK_PACKAGES: dict = {}
