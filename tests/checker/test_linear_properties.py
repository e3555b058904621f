"""Property tests of the linearizability checker (hypothesis).

1. A history produced by a random concurrent execution of a model — each op
   takes effect atomically at some instant between its invoke and its
   completion, processes crash (info, or no completion at all) before or after
   the effect — is always linearizable.
2. Changing one ok read's value to something no state ever held is caught.
3. On small arbitrary histories the checker agrees with a brute-force search
   over every real-time-respecting order (and every subset of info ops).
"""
from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from checker.history import Op
from checker.linear import check_linearizable

pytestmark = pytest.mark.fast

NEVER = 10 ** 6
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------- model specs
# Each spec: gen(rnd) -> (f, value, key); apply(state, f, value, key) -> (type, result, state);
# reply(f, value, result) -> completion value; corrupt(f, value) -> corrupted value or None.

class Register:
    model, initial, fs = "register", None, ("read", "write")

    def gen(self, rnd):
        f = rnd.choice(self.fs)
        return f, (rnd.randrange(4) if f == "write" else None), None

    def apply(self, s, f, v, key):
        if f == "read":
            return "ok", s, s
        return "ok", v, v

    def reply(self, f, v, result):
        return result if f == "read" else v

    def corrupt(self, f, value):
        return NEVER if f == "read" else None


class CasRegister(Register):
    model, initial, fs = "cas-register", 0, ("read", "write", "cas")

    def gen(self, rnd):
        f = rnd.choice(self.fs)
        if f == "cas":
            return f, [rnd.randrange(3), rnd.randrange(3)], None
        return f, (rnd.randrange(4) if f == "write" else None), None

    def apply(self, s, f, v, key):
        if f == "cas":
            return ("ok", v, v[1]) if s == v[0] else ("fail", v, s)
        return super().apply(s, f, v, key)

    def reply(self, f, v, result):
        return v if f == "cas" else super().reply(f, v, result)


class IndependentRegister(Register):
    """Jepsen independent tuples: value [key v], one register per key."""

    def gen(self, rnd):
        f, v, _ = super().gen(rnd)
        return f, [rnd.choice("ab"), v], None

    def apply(self, s, f, v, key):
        s = dict(s or {})
        k = v[0]
        if f == "read":
            return "ok", [k, s.get(k)], s
        s[k] = v[1]
        return "ok", v, s

    def corrupt(self, f, value):
        return [value[0], NEVER] if f == "read" else None


class KV:
    model, initial = "kv", None

    def gen(self, rnd):
        f = rnd.choice(("get", "put", "append"))
        return f, (None if f == "get" else rnd.choice("xyz")), rnd.choice(("k1", "k2"))

    def apply(self, s, f, v, key):
        s = dict(s or {})
        if f == "get":
            return "ok", s.get(key), s
        s[key] = v if f == "put" else (s.get(key) or "") + v
        return "ok", v, s

    def reply(self, f, v, result):
        return result if f == "get" else v

    def corrupt(self, f, value):
        return "never" if f == "get" else None


class SetSpec:
    model, initial = "set", None

    def gen(self, rnd):
        f = rnd.choice(("add", "read"))
        return f, (rnd.randrange(6) if f == "add" else None), None

    def apply(self, s, f, v, key):
        s = frozenset(s or ())
        if f == "read":
            return "ok", sorted(s), s
        return "ok", v, s | {v}

    def reply(self, f, v, result):
        return result if f == "read" else v

    def corrupt(self, f, value):
        return value + [NEVER] if f == "read" else None


class QueueSpec:
    model, initial = "queue", None

    def gen(self, rnd):
        f = rnd.choice(("enqueue", "dequeue"))
        return f, (rnd.randrange(100) if f == "enqueue" else None), None

    def apply(self, s, f, v, key):
        s = tuple(s or ())
        if f == "enqueue":
            return "ok", v, s + (v,)
        if not s:
            return "ok", None, s
        return "ok", s[0], s[1:]

    def reply(self, f, v, result):
        return result if f == "dequeue" else v

    def corrupt(self, f, value):
        return NEVER if f == "dequeue" else None


class LogSpec:
    model, initial = "log", None

    def gen(self, rnd):
        f = rnd.choice(("append", "read"))
        return f, (rnd.choice("abc") if f == "append" else rnd.choice((None, 0, 1))), None

    def apply(self, s, f, v, key):
        s = tuple(s or ())
        if f == "append":
            return "ok", len(s), s + (v,)
        start = v or 0
        if start > len(s):
            return "fail", None, s
        return "ok", list(s[start:]), s

    def reply(self, f, v, result):
        return result

    def corrupt(self, f, value):
        return value + ["never"] if f == "read" else None


class MultiRegisterSpec:
    model, initial = "multi-register", {"x": 0, "y": 0}

    def gen(self, rnd):
        mops = []
        for _ in range(rnd.randrange(1, 3)):
            k = rnd.choice("xy")
            mops.append(["read", k, None] if rnd.random() < 0.5 else ["write", k, rnd.randrange(3)])
        return "txn", mops, None

    def apply(self, s, f, v, key):
        s = dict(s or self.initial)
        out = []
        for mf, k, x in v:
            if mf == "read":
                out.append(["read", k, s[k]])
            else:
                s[k] = x
                out.append(["write", k, x])
        return "ok", out, s

    def reply(self, f, v, result):
        return result

    def corrupt(self, f, value):
        reads = [i for i, m in enumerate(value) if m[0] == "read"]
        if not reads:
            return None
        out = [list(m) for m in value]
        out[reads[0]][2] = NEVER
        return out


SPECS = [Register(), CasRegister(), IndependentRegister(), KV(), SetSpec(), QueueSpec(), LogSpec(),
         MultiRegisterSpec()]
IDS = [type(s).__name__ for s in SPECS]


# ---------------------------------------------------------------- simulation

def simulate(spec, rnd: random.Random, n_procs: int, n_steps: int, p_crash: float) -> list[Op]:
    """A random concurrent execution: every op takes effect atomically at one instant
    between its invoke and its completion (or, if its process crashes, maybe never)."""
    state = spec.initial
    procs: dict[int, list | None] = {p: None for p in range(n_procs)}
    next_pid = n_procs
    ops: list[Op] = []

    def emit(p, t, f, v, key):
        ops.append(Op(index=len(ops), process=p, type=t, f=f, value=v, key=key, line=len(ops) + 1))

    def crash(p, f, v, key):
        nonlocal next_pid
        if rnd.random() < 0.5:
            emit(p, "info", f, v, key)           # else: no completion at all
        del procs[p]
        procs[next_pid] = None
        next_pid += 1

    for _ in range(n_steps):
        p = rnd.choice(sorted(procs))
        cur = procs[p]
        if cur is None:
            f, v, key = spec.gen(rnd)
            emit(p, "invoke", f, v, key)
            procs[p] = ["invoked", f, v, key]
        elif cur[0] == "invoked":
            _, f, v, key = cur
            if rnd.random() < p_crash:
                crash(p, f, v, key)
            else:
                t, result, state = spec.apply(state, f, v, key)
                procs[p] = ["applied", f, v, key, t, result]
        else:
            _, f, v, key, t, result = cur
            if rnd.random() < p_crash:
                crash(p, f, v, key)
            else:
                emit(p, t, f, spec.reply(f, v, result) if t == "ok" else v, key)
                procs[p] = None
    return ops


def executions(spec, invalid: bool = False):
    # a queue's state is the order of its contents, so every never-completed enqueue multiplies
    # the configurations an invalid history forces the search through (exponentially): a corrupted
    # queue history gets no crashes and fewer steps, so the check ends well inside its time limit
    if spec.model == "queue":
        crash, steps = ([0.0], 30) if invalid else ([0.0, 0.05], 60)
    else:
        crash, steps = [0.0, 0.05, 0.2], 60
    return st.tuples(st.randoms(use_true_random=False), st.integers(1, 5), st.integers(2, steps),
                     st.sampled_from(crash))


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@SETTINGS
@given(data=st.data())
def test_random_executions_are_linearizable(spec, data):
    rnd, n_procs, n_steps, p_crash = data.draw(executions(spec))
    ops = simulate(spec, rnd, n_procs, n_steps, p_crash)
    r = check_linearizable(ops, spec.model, spec.initial)
    assert r["valid"] is True, r


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
@SETTINGS
@given(data=st.data(), pick=st.integers(0, 10 ** 6))
def test_corrupting_one_ok_read_is_caught(spec, data, pick):
    rnd, n_procs, n_steps, p_crash = data.draw(executions(spec, invalid=True))
    ops = simulate(spec, rnd, n_procs, n_steps, p_crash)
    candidates = [o for o in ops if o.type == "ok" and spec.corrupt(o.f, o.value) is not None]
    assume(candidates)
    victim = candidates[pick % len(candidates)]
    victim.value = spec.corrupt(victim.f, victim.value)
    r = check_linearizable(ops, spec.model, spec.initial, time_limit=20)
    assert r["valid"] is False
    assert r["anomalies"]["nonlinearizable"]["op"]["index"] <= ops[-1].index


# ------------------------------------------------------- brute-force agreement

def brute_force(ops: list[Op], initial) -> bool:
    """Linearizable as a cas-register? Tries every subset of info ops and every order."""
    calls = []
    pending = {}
    for pos, o in enumerate(ops):
        if o.type == "invoke":
            pending[o.process] = (o, pos)
        else:
            inv, start = pending.pop(o.process)
            if o.type != "fail":
                calls.append((inv.f, inv.value, o.value if o.type == "ok" else None, start,
                              pos if o.type == "ok" else None))
    for o, start in pending.values():
        calls.append((o.f, o.value, None, start, None))
    must = [c for c in calls if c[4] is not None]
    maybe = [c for c in calls if c[4] is None]
    for k in range(len(maybe) + 1):
        for extra in itertools.combinations(maybe, k):
            chosen = must + list(extra)
            for order in itertools.permutations(chosen):
                if not all(not (b[4] is not None and b[4] < a[3])
                           for i, a in enumerate(order) for b in order[i + 1:]):
                    continue
                s, ok = initial, True
                for f, v, res, _, _ in order:
                    if f == "read":
                        ok = res == s
                    elif f == "write":
                        s = v
                    elif s == v[0]:
                        s = v[1]
                    else:
                        ok = False
                    if not ok:
                        break
                if ok:
                    return True
    return False


@st.composite
def small_histories(draw):
    n_procs = draw(st.integers(1, 3))
    n_ops = draw(st.integers(1, 6))
    ops: list[Op] = []
    open_ = {}
    dead = set()                      # processes whose op never completes
    started = 0
    while (started < n_ops and len(dead) < n_procs) or open_:
        choices = [p for p in range(n_procs) if p not in open_ and p not in dead] \
            if started < n_ops else []
        choices += list(open_)
        p = draw(st.sampled_from(choices))
        if p in open_:
            f, v = open_.pop(p)
            t = draw(st.sampled_from(["ok", "ok", "ok", "info", "fail", "none"]))
            if t == "none":
                dead.add(p)
                continue
            value = draw(st.integers(0, 2)) if (f == "read" and t == "ok") else v
            ops.append(Op(len(ops), p, t, f, value))
        else:
            f = draw(st.sampled_from(["read", "write", "cas"]))
            v = None if f == "read" else (draw(st.integers(0, 2)) if f == "write"
                                          else [draw(st.integers(0, 2)), draw(st.integers(0, 2))])
            ops.append(Op(len(ops), p, "invoke", f, v))
            open_[p] = (f, v)
            started += 1
    return ops


@settings(max_examples=300, deadline=None)
@given(ops=small_histories())
def test_agrees_with_brute_force_on_small_histories(ops):
    assert (check_linearizable(ops, "cas-register", 0)["valid"] is True) == brute_force(ops, 0)
