"""The disk fault packages (the lazy filesystem's lose-unsynced, torn-write and corrupt).

Guarantees: `DISK_PACKAGES` names every disk package `eoslab run --nemesis`
takes; each is a `cluster.nemesis_packages.FaultPackage`.
"""
from __future__ import annotations

DISK_PACKAGES: dict = {}
