"""Coordinator crash scenarios: a transaction coordinator lost between the steps of a commit.

Guarantees: every scenario here registers itself in cluster.scenarios.base.REGISTRY on import.
"""
from __future__ import annotations
