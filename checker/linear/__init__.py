"""Linearizability checking: Wing & Gong search with Lowe's memoisation.

Guarantees: `check_linearizable(ops, model, initial=None, time_limit=None)`
and `LinearizabilityChecker(model, initial, time_limit).check(ops)` return
`{"valid": True | False | "unknown", "anomalies": {...}, "stats": {...}}`
(see checker.linear.check); the search itself is in checker.linear.search.
"""
from checker.linear.check import LinearizabilityChecker, check_linearizable
from checker.linear.search import SearchResult, search

__all__ = ["check_linearizable", "LinearizabilityChecker", "search", "SearchResult"]
