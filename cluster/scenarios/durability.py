"""Durability scenarios: power loss, torn writes and corrupt files on the lazy filesystem, per release.

Guarantees: every scenario here registers itself in cluster.scenarios.base.REGISTRY on import.
"""
from __future__ import annotations
