"""G0 and G1c: cycles over write/read dependencies derived from offsets.

Dependencies between ops (ok or info writers, ok readers; failed ops did not
happen):
- ww: T1 sent to key k at offset o1, T2 sent to k at o2 > o1.
- wr: T2 polled a value T1 sent.
Guarantees: a cycle is reported iff the dependency graph over all ops has
one. It is searched on a compact graph: only ops that send twice or send and
poll can lie on a cycle together with others (a single-send op only links
its key's chain, a poll-only op is a sink), so the graph keeps those, linked
along each key in offset order, plus the single-send ops needed as bridges
(T1 -ww-> W -wr-> T2 when T2 polled W's record; T -ww-> W -ww-> T when W
landed between two of T's sends). Each strongly connected component (Tarjan)
gives one witness: the shortest cycle in it (breadth-first), expanded back
into real steps.
- G0: a cycle of ww steps only. Kafka does not isolate writes, so Jepsen
  allows G0, and the verdict does not count it.
- G1c: a cycle with at least one wr step. Only cycles of wr steps alone, none
  polled at read_uncommitted, count toward the verdict: with a ww step in it,
  a cycle is normal for Kafka (Jepsen allows G1c when ww edges are inferred).
Witness: `cycle` (op indices, first repeated at the end) and `steps`
(type, from, to, key, offsets, value).
"""
from __future__ import annotations

import time
from bisect import bisect_left
from collections import deque
from typing import Any

from checker.kafka.codes import CODE_BITS, CODE_MASK, FAIL
from checker.kafka.witness import Finding, ref

ALLOW_G0 = "Kafka does not isolate writes; write cycles are normal (Jepsen allows G0)"
ALLOW_G1C_WW = ("the cycle has a ww step: Kafka does not isolate writes, so a transaction may "
                "read after another's write and still send before it (Jepsen allows this G1c)")
ALLOW_G1C_RU = "a poll in the cycle ran at read_uncommitted"
MAX_BFS_EDGES = 64
BFS_BUDGET = 400_000     # node visits per component, split over the breadth-first searches


class Graph:
    """Edges by kind: u -> v -> step info (first one seen wins)."""

    def __init__(self) -> None:
        self.ww: dict[int, dict] = {}
        self.wr: dict[int, dict] = {}
        self.wwwr: dict[int, dict] = {}   # ww then wr through a bridge op

    @staticmethod
    def _add(table: dict, u: int, v: int, info: tuple) -> None:
        if u == v:
            return
        m = table.get(u)
        if m is None:
            table[u] = {v: info}
        elif v not in m:
            m[v] = info

    def adjacency(self, kinds: tuple) -> dict[int, set]:
        adj: dict[int, set] = {}
        for kind in kinds:
            for u, m in getattr(self, kind).items():
                adj.setdefault(u, set()).update(m)
        return adj


def build(c) -> Graph:
    """The compact dependency graph of a finished Collector."""
    g = Graph()
    nodes = c.txn_ops
    if not nodes:
        return g
    keys = c.keys
    touched: dict = {}          # keys in the order the history first touches them: the same witness on every run
    for idx, (_, writes, reads, _) in nodes.items():
        touched.update(dict.fromkeys(w[0] for w in writes))
        touched.update(dict.fromkeys(r[0] for r in reads))
    chains: dict[Any, tuple[list, list]] = {}
    for k in touched:
        ks = keys.get(k)
        if ks is None:
            continue
        offs, owners = [], []
        last, last_off, bridge = None, None, None
        writer = ks.writer
        for o in sorted(ks.off2val):
            w = writer.get(ks.off2val[o])
            if w is None or (w & CODE_MASK) == FAIL:
                continue
            wi = w >> CODE_BITS
            if wi in nodes:
                if last is not None and last != wi:
                    g._add(g.ww, last, wi, ("ww", k, last_off, o))
                elif last == wi and bridge is not None:
                    g._add(g.ww, wi, bridge[0], ("ww", k, last_off, bridge[1]))
                    g._add(g.ww, bridge[0], wi, ("ww", k, bridge[1], o))
                last, last_off, bridge = wi, o, None
                offs.append(o)
                owners.append(wi)
            elif bridge is None and last is not None:
                bridge = (wi, o)
        chains[k] = (offs, owners)
    for r, (tc, _, reads, _) in nodes.items():
        for k, off, v in reads:
            ks = keys.get(k)
            if ks is None:
                continue
            w = ks.writer.get(v)
            if w is None or (w & CODE_MASK) == FAIL:
                continue
            wi = w >> CODE_BITS
            o = off if off is not None else ks.val2off.get(v)
            if wi in nodes:
                g._add(g.wr, wi, r, ("wr", k, o, v))
                continue
            if o is None or k not in chains:
                continue
            offs, owners = chains[k]
            j = bisect_left(offs, o)
            if j:
                g._add(g.wwwr, owners[j - 1], r, ("wwwr", k, offs[j - 1], o, v, wi))
    return g


def tarjan(adj: dict[int, set]) -> list[list[int]]:
    """Strongly connected components with more than one node (iterative Tarjan)."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    on, stack, out = set(), [], []
    counter = 0
    for root in list(adj):
        if root in index:
            continue
        work = [(root, iter(adj.get(root, ())))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(adj.get(w, ()))))
                    advanced = True
                    break
                if w in on and index[w] < low[v]:
                    low[v] = index[w]
            if advanced:
                continue
            work.pop()
            if work:
                u = work[-1][0]
                if low[v] < low[u]:
                    low[u] = low[v]
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(comp)
    return out


def _path(adj: dict[int, set], src: int, dst: int, within: set) -> list[int] | None:
    """Shortest path src .. dst inside `within` (breadth-first), as a node list."""
    if src == dst:
        return [src]
    parent = {src: None}
    q = deque([src])
    while q:
        u = q.popleft()
        for w in adj.get(u, ()):
            if w in within and w not in parent:
                parent[w] = u
                if w == dst:
                    path = [w]
                    while parent[path[-1]] is not None:
                        path.append(parent[path[-1]])
                    return path[::-1]
                q.append(w)
    return None


def _shortest_cycle(adj: dict[int, set], comp: list[int],
                    first_edges: list[tuple[int, int]] | None = None) -> list[int] | None:
    """Shortest cycle in a component; with first_edges, one that uses one of them."""
    within = set(comp)
    best = None
    if first_edges is None:
        first_edges = []
        for u in comp:
            first_edges.extend((u, w) for w in adj.get(u, ()) if w in within)
            if len(first_edges) >= MAX_BFS_EDGES:
                break
    tries = max(1, min(MAX_BFS_EDGES, BFS_BUDGET // len(comp)))
    for u, w in first_edges[:tries]:
        p = _path(adj, w, u, within)
        if p is not None and (best is None or len(p) + 1 < len(best)):
            best = [u] + p
            if len(best) == 3 and best[0] == best[-1]:
                break
    if best is not None:
        best = best[:-1] if best[0] == best[-1] else best
        best.append(best[0])
    return best


def _steps(g: Graph, cycle: list[int], kinds: tuple) -> list[dict]:
    steps = []
    for u, v in zip(cycle, cycle[1:]):
        info = None
        for kind in kinds:
            info = getattr(g, kind).get(u, {}).get(v)
            if info is not None:
                break
        if info[0] == "ww":
            steps.append({"type": "ww", "from": u, "to": v, "key": info[1], "offsets": [info[2], info[3]]})
        elif info[0] == "wr":
            steps.append({"type": "wr", "from": u, "to": v, "key": info[1], "offset": info[2],
                          "value": info[3]})
        else:
            _, k, o1, o2, val, bridge = info
            steps.append({"type": "ww", "from": u, "to": bridge, "key": k, "offsets": [o1, o2]})
            steps.append({"type": "wr", "from": bridge, "to": v, "key": k, "offset": o2, "value": val})
    return steps


def _finding(kind: str, steps: list[dict], allowed: str | None) -> Finding:
    cycle = [s["from"] for s in steps] + [steps[0]["from"]]
    refs = []
    for s in steps:
        offs = s.get("offsets") or [s.get("offset")]
        refs.append(ref(s["from"], s["key"], *offs))
        refs.append(ref(s["to"], s["key"], *offs))
    return Finding(kind, {"cycle": cycle, "steps": steps}, refs, allowed)


def cycle_findings(c, deadline: float | None = None) -> tuple[list[Finding], bool]:
    """(findings, complete): complete is False when the deadline cut the search short."""
    g = build(c)
    out: list[Finding] = []
    late = lambda: deadline is not None and time.monotonic() > deadline
    ww = g.adjacency(("ww",))
    for comp in tarjan(ww):
        if late():
            return out, False
        cyc = _shortest_cycle(ww, comp)
        if cyc:
            out.append(_finding("G0", _steps(g, cyc, ("ww",)), ALLOW_G0))
    full = g.adjacency(("ww", "wr", "wwwr"))
    wr = g.adjacency(("wr",))
    iso = {i: n[3] for i, n in c.txn_ops.items()}
    for comp in tarjan(full):
        if late():
            return out, False
        within = set(comp)
        pure = [sc for sc in tarjan({u: {w for w in wr.get(u, ()) if w in within} for u in comp})]
        if pure:
            for sc in pure:
                cyc = _shortest_cycle(wr, sc)
                steps = _steps(g, cyc, ("wr",))
                ru = any(iso.get(s["to"]) == "read_uncommitted" for s in steps)
                out.append(_finding("G1c", steps, ALLOW_G1C_RU if ru else None))
            continue
        firsts = [(u, w) for u in comp for kind in (g.wr, g.wwwr)
                  for w in kind.get(u, {}) if w in within]
        if not firsts:
            continue                                # ww only: reported as G0
        cyc = _shortest_cycle(full, comp, firsts)
        if cyc:
            steps = _steps(g, cyc, ("wr", "wwwr", "ww"))
            if any(s["type"] == "wr" for s in steps):
                out.append(_finding("G1c", steps, ALLOW_G1C_WW))
    return out, True
