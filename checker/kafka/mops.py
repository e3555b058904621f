"""Keys and values of Jepsen's Kafka workload, normalized.

Guarantees: `norm_key` maps every spelling of a key to one Python value — an
int for ints and for strings that spell an int ("3" and 3 are the same
partition, since JSON object keys are always strings), a tuple for lists
(EDN `[topic partition]`), the string otherwise. `norm_value` makes values
hashable the same way (lists become tuples, dicts sorted item tuples).
`json_key` turns a key back into something JSON can use as an object key.
Nothing here raises on odd shapes.
"""
from __future__ import annotations

from typing import Any


def norm_key(k: Any) -> Any:
    t = type(k)
    if t is int:
        return k
    if t is str:
        s = k[1:] if k[:1] == "-" else k
        if s.isdigit() and s.isascii() and (len(s) == 1 or s[0] != "0"):
            return int(k)
        return k
    if t is list or t is tuple:
        return tuple(norm_value(x) for x in k)
    if t is bool or k is None or t is float:
        return k
    return str(k)


def norm_value(v: Any) -> Any:
    t = type(v)
    if t is list or t is tuple:
        return tuple(norm_value(x) for x in v)
    if t is dict:
        return tuple(sorted((str(a), norm_value(b)) for a, b in v.items()))
    return v


def json_key(k: Any) -> Any:
    """A key as JSON can hold it as a dict key (tuples become strings)."""
    if isinstance(k, tuple):
        return "/".join(str(x) for x in k)
    return k
