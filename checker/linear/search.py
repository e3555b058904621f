"""Wing & Gong linearizability search with Lowe's memoisation, on one sub-history.

Guarantees: `search` decides whether the calls (already prepared by the model)
have a linearization: an order that respects real time (an op that completed
before another was invoked comes first), in which every step of the model is
ok, which contains every determinate op and any subset of the indeterminate
ones (an indeterminate op — info, or never completed — may take effect at any
time after its invoke, or never). It is exact: valid=True comes with a
witness order, valid=False means no such order exists, valid=None means the
deadline passed first.

How: the events (invokes and completions) sit in a doubly linked list in time
order (indeterminate ops complete after everything). The search walks the
list; at an invoke it tries to linearize that op now (model step ok, and the
configuration (set of linearized ops, model state) never seen before —
Lowe's cache; the set is kept as a few ints whose size is the width of the
concurrency, not the length of the history, see `dbit` below), lifting the op out of the list; at a determinate completion whose
op is still unlinearized it backtracks; reaching an indeterminate completion
or the end means every determinate op is linearized. An indeterminate op
whose step would leave the state unchanged is never tried: "never
linearized" reaches everything that choice could. States are interned to
ints and transitions memoised per (op, state), so the hot loop only touches
ints, tuples and dicts.

When invalid, the witness is the op whose completion the search could never
get past (the latest such completion over the whole search — knossos'
choice), with the linearized ops, in order, of a configuration that got
there, and a few distinct model states reachable just before it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Sequence

CHECK_EVERY = 2048          # deadline checks: once per this many loop iterations


@dataclass
class SearchResult:
    valid: bool | None                      # None: the deadline passed first
    explored: int = 0                       # model steps attempted
    cache_size: int = 0                     # distinct (linearized set, state) configurations
    fail_op: int | None = None              # when invalid: the op (index into `ops`) no linearization gets past
    prefix: list[int] = field(default_factory=list)   # when invalid: linearized ops of a configuration that got there
    states: list[Any] = field(default_factory=list)   # when invalid: distinct model states just before fail_op
    order: list[int] | None = None          # when valid: a linearization (indices into `ops`)


def search(model: Any, init_state: Any, ops: Sequence[Any], starts: Sequence[int],
           ends: Sequence[int | None], deadline: float | None = None, max_states: int = 5) -> SearchResult:
    """ops[i] is a prepared model op invoked at position starts[i] and completed at ends[i]
    (None: indeterminate). Positions only need to be comparable and distinct."""
    n = len(ops)
    if n == 0:
        return SearchResult(valid=True, order=[])

    # -- the event list --------------------------------------------------------
    events = []
    for i in range(n):
        events.append((starts[i], 0, i))
        if ends[i] is not None:
            events.append((ends[i], 1, i))
    events.sort()
    late = [i for i in range(n) if ends[i] is None]
    m = len(events) + len(late)
    head, tail = m, m + 1
    opof = [0] * m
    iscall = [False] * m
    indet_ret = [False] * m
    call_entry = [0] * n
    ret_entry = [0] * n
    for e, (_, kind, i) in enumerate(events):
        opof[e] = i
        if kind == 0:
            iscall[e] = True
            call_entry[i] = e
        else:
            ret_entry[i] = e
    for k, i in enumerate(late):
        e = len(events) + k
        opof[e] = i
        indet_ret[e] = True
        ret_entry[i] = e
    # linearized-op sets: determinate ops are numbered in invoke order and a set is kept as
    # (low, window): every op below `low` plus the ops low + j for the bits j of `window`
    # (bit 0 always clear), so a configuration costs the width of the concurrency, not the
    # length of the history; indeterminate ops, which may stay unlinearized for ever, have
    # a bitset of their own. dbit[i] > 0: determinate rank + 1; dbit[i] < 0: ~indeterminate rank.
    indet = [ends[i] is None for i in range(n)]
    dbit = [0] * n
    nd = ni = 0
    for i in sorted(range(n), key=lambda i: starts[i]):
        if indet[i]:
            dbit[i] = ~ni
            ni += 1
        else:
            nd += 1
            dbit[i] = nd
    match = [0] * m
    for i in range(n):
        match[call_entry[i]] = ret_entry[i]
    nxt = list(range(1, m + 1)) + [0, tail]       # entries 0..m-1, then head, then tail
    nxt[m - 1] = tail
    prv = list(range(-1, m - 1)) + [head, m - 1]
    prv[0] = head

    # -- interned states and memoised transitions -------------------------------
    sid_of: dict[Any, int] = {init_state: 0}
    states: list[Any] = [init_state]
    trans: list[dict[int, int]] = [dict() for _ in range(n)]      # op -> {sid: new sid or -1}
    step = model.step

    cache: set = set()
    # the stack of lifted calls is a cons list, so remembering a configuration is O(1):
    # (call entry, previous sid, low, window, ibits, rest) or None
    top = None
    sid = 0
    low = 1                                        # determinate ranks start at 1
    win = 0
    ibits = 0
    explored = 0
    best_e = -1
    best_top = None
    best_states: list[int] = []
    countdown = CHECK_EVERY
    clock = time.monotonic
    if deadline is not None and clock() > deadline:
        return SearchResult(valid=None)

    e = nxt[head]
    while e != tail:
        countdown -= 1
        if countdown == 0:
            countdown = CHECK_EVERY
            if deadline is not None and clock() > deadline:
                return SearchResult(valid=None, explored=explored, cache_size=len(cache))
        if iscall[e]:
            i = opof[e]
            t = trans[i]
            r = t.get(sid)
            if r is None:
                explored += 1
                ok, new_state = step(states[sid], ops[i])
                if ok:
                    r = sid_of.get(new_state)
                    if r is None:
                        r = len(states)
                        sid_of[new_state] = r
                        states.append(new_state)
                else:
                    r = -1
                t[sid] = r
            # an indeterminate op that would not change the state is dominated by never
            # linearizing it (same state, one more op still available): skip it
            if r >= 0 and not (r == sid and indet[i]):
                d = dbit[i]
                if d > 0:
                    nw = win | (1 << (d - low))
                    nl = low
                    if nw & 1:                          # shift out the trailing run of ones
                        t = (~nw & (nw + 1)).bit_length() - 1
                        nw >>= t
                        nl += t
                    key = (nl, nw, ibits, r)
                else:
                    nl, nw = low, win
                    key = (nl, nw, ibits | (1 << ~d), r)
                if key not in cache:
                    cache.add(key)
                    top = (e, sid, low, win, ibits, top)
                    sid, low, win, ibits = r, nl, nw, key[2]
                    # lift the call and its completion out of the list
                    p, q = prv[e], nxt[e]
                    nxt[p] = q
                    prv[q] = p
                    x = match[e]
                    p, q = prv[x], nxt[x]
                    nxt[p] = q
                    prv[q] = p
                    e = nxt[head]
                    continue
            e = nxt[e]
        else:
            if indet_ret[e]:
                break                                   # every determinate op is linearized
            if e >= best_e:
                if e > best_e:
                    best_e = e
                    best_top = top
                    best_states = [sid]
                elif len(best_states) < max_states and sid not in best_states:
                    best_states.append(sid)
            if top is None:
                return SearchResult(valid=False, explored=explored, cache_size=len(cache),
                                    fail_op=opof[best_e], prefix=_calls(best_top, opof),
                                    states=[states[s] for s in best_states])
            ce, sid, low, win, ibits, top = top
            # put the completion back, then the call (reverse order of lifting)
            x = match[ce]
            nxt[prv[x]] = x
            prv[nxt[x]] = x
            nxt[prv[ce]] = ce
            prv[nxt[ce]] = ce
            e = nxt[ce]
    return SearchResult(valid=True, explored=explored, cache_size=len(cache),
                        order=_calls(top, opof))


def _calls(top: tuple | None, opof: list[int]) -> list[int]:
    """The ops of a cons-list stack, bottom (first linearized) first."""
    out = []
    while top is not None:
        out.append(opof[top[0]])
        top = top[5]
    out.reverse()
    return out
