"""Micro-operations of Jepsen's Kafka workload: decoding sends and polls.

Guarantees: `norm_key` maps every spelling of a key to one Python value — an
int for ints and for strings that spell an int ("3" and 3 are the same
partition, since JSON object keys are always strings), a tuple for lists
(EDN `[topic partition]`), the string otherwise. `norm_value` makes values
hashable the same way (lists become tuples). `op_writes` and `op_reads`
decode an op's value into (key, offset, value) triples in micro-op order;
an offset is None when the history does not know it. Nothing here raises on
odd shapes: what cannot be decoded is skipped.
"""
from __future__ import annotations

from typing import Any, Iterator

KAFKA_FS = frozenset(("send", "poll", "txn"))


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


def send_parts(x: Any) -> tuple[Any, Any]:
    """(offset, value) of a send micro-op's third element: v or [offset, v]."""
    if type(x) is list or type(x) is tuple:
        if len(x) == 2:
            o = x[0]
            return (o if type(o) is int else None), norm_value(x[1])
        return None, norm_value(x)
    return None, x


def op_writes(value: Any) -> Iterator[tuple[int, Any, Any, Any]]:
    """(mop position, key, offset, value) for every send micro-op."""
    if type(value) is not list:
        return
    for i, mop in enumerate(value):
        if type(mop) is list and len(mop) >= 3 and mop[0] == "send":
            o, v = send_parts(mop[2])
            yield i, norm_key(mop[1]), o, v


def op_reads(value: Any) -> Iterator[tuple[int, Any, Any, Any]]:
    """(mop position, key, offset, value) for every record of every poll micro-op."""
    if type(value) is not list:
        return
    for i, mop in enumerate(value):
        if type(mop) is list and len(mop) >= 2 and mop[0] == "poll" and type(mop[1]) is dict:
            for rk, pairs in mop[1].items():
                k = norm_key(rk)
                if type(pairs) is not list:
                    continue
                for pair in pairs:
                    if type(pair) is list and len(pair) == 2:
                        o = pair[0]
                        yield i, k, (o if type(o) is int else None), norm_value(pair[1])
