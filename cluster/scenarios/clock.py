"""Clock scenarios: a wall clock that jumps on the service whose rule reads it.

Guarantees: every scenario here registers itself in cluster.scenarios.base.REGISTRY on import.
"""
from __future__ import annotations
