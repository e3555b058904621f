"""What the coordinator-crash scenarios do to and read from transaction coordinators, and their facts.

Guarantees: `wait_assignment_settled` returns once every running coordinator owns a loaded share
of __transaction_state and each partition has one owner (so the only move after it is the one a
crash causes); `arm_crash` injects one `crash_after_prepare` fault through the owning coordinator's
FaultInjector RPC (services/txn_coordinator/faults.py) and records nemesis `start-coordinator-crash`;
`wait_crashed` waits until that coordinator's process is gone and records `stop-coordinator-crash`
with the fault's own log line (so the fault window ends at the crash: the time the next owner then
takes counts against the checker's hang threshold); `wait_completed` waits, asking every live
coordinator directly (DescribeTransactions, no FindCoordinator), until another coordinator holds the
transaction in the wanted Complete* state, and records it as nemesis `coordinator-takeover` with
that coordinator's "resuming ... after load" log line. Each wait has a deadline and raises
ScenarioError. The facts read only the recorded ops and return None when they hold.
"""
from __future__ import annotations

import grpc

from cluster.scenarios.base import completions, nemesis_ops
from eoslab.common import rpc
from eoslab.v1 import faults_pb2, faults_pb2_grpc, txn_pb2, txn_pb2_grpc

ROLE = "txn-coordinator"


def describe_everywhere(ctx, tid: str) -> list[tuple[int, object]]:
    """(coordinator id, TransactionStateDescription) from every running coordinator that holds `tid`."""
    out = []
    for n in ctx.rt.info().by_role(ROLE):
        if n.state != "running":
            continue
        try:
            with rpc.channel(n.address) as ch:
                r = txn_pb2_grpc.TransactionCoordinatorStub(ch).DescribeTransactions(
                    txn_pb2.DescribeTransactionsRequest(transactional_ids=[tid]), timeout=2)
        except grpc.RpcError:
            continue
        out += [(r.coordinator_id, t) for t in r.transactions if t.transactional_id == tid]
    return out


def wait_assignment_settled(ctx, timeout: float = 60.0) -> dict[int, list[int]]:
    """Until every running coordinator owns a share of __transaction_state, loaded, and together they
    own each partition once: the start-up rebalance (the second coordinator to register takes half of
    the first one's partitions) is over, so no partition moves unless a coordinator dies."""
    def settled():
        owned: dict[int, list[int]] = {}
        total = 0
        nodes = [n for n in ctx.rt.info().by_role(ROLE) if n.state == "running"]
        for n in nodes:
            try:
                with rpc.channel(n.address) as ch:
                    r = txn_pb2_grpc.TransactionCoordinatorStub(ch).DescribeTransactions(
                        txn_pb2.DescribeTransactionsRequest(transactional_ids=["-"]), timeout=2)
            except grpc.RpcError:
                return None
            if not r.owned or any(o.loading for o in r.owned):
                return None
            owned[r.coordinator_id] = sorted(o.partition for o in r.owned)
            total = max(total, r.num_partitions)
        parts = sorted(p for ps in owned.values() for p in ps)
        return owned if nodes and parts == list(range(total)) else None
    return ctx.wait(settled, "the coordinators' share of __transaction_state to settle", timeout, every=0.1)


def owner(ctx, tid: str, timeout: float = 30.0) -> tuple[int, str, str]:
    """(coordinator id, node name, address) of the one coordinator holding `tid` now."""
    def find():
        held = describe_everywhere(ctx, tid)
        return held[0][0] if len(held) == 1 else None
    cid = ctx.wait(find, f"one coordinator holding {tid!r}", timeout, every=0.1)
    node = f"{ROLE}-{cid}"
    return cid, node, ctx.rt.info().node(node).address


def _log_line(ctx, node: str, *words: str) -> str | None:
    for line in reversed(ctx.rt.logs(node, tail=2000).splitlines()):
        if all(w in line for w in words):
            return line.strip()
    return None


def arm_crash(ctx, tid: str, prepare_abort: bool = False) -> tuple[int, str]:
    """Inject crash_after_prepare into the coordinator owning `tid`; its (id, node name)."""
    cid, node, address = owner(ctx, tid)
    with rpc.channel(address) as ch:
        r = faults_pb2_grpc.FaultInjectorStub(ch).InjectFault(faults_pb2.InjectFaultRequest(
            crash_after_prepare=faults_pb2.CrashAfterPrepare(transactional_id=tid, prepare_abort=prepare_abort)),
            timeout=5)
    ctx.nemesis("start-coordinator-crash", {"node": node, "transactional_id": tid, "fault_id": r.fault_id,
                                            "after": "PrepareAbort" if prepare_abort else "PrepareCommit"})
    return cid, node


def wait_crashed(ctx, node: str, tid: str, state: str, timeout: float = 30.0) -> None:
    """Until the armed coordinator's process is gone; records its fault's log line."""
    ctx.wait(lambda: ctx.rt.info().node(node).state == "dead", f"{node} to crash after {state} of {tid!r}",
             timeout, every=0.02)
    line = _log_line(ctx, node, f"{state} of {tid} is written", "exits now")
    ctx.nemesis("stop-coordinator-crash", {"node": node, "transactional_id": tid, "state": "dead",
                                           "after": state, "log": line})


def wait_completed(ctx, tid: str, crashed: int, state: str, timeout: float = 60.0):
    """Until a coordinator other than `crashed` holds `tid` in `state`; its description (recorded)."""
    def done():
        for cid, t in describe_everywhere(ctx, tid):
            if cid != crashed and t.state == state:
                return cid, t
        return None
    cid, t = ctx.wait(done, f"another coordinator to bring {tid!r} to {state}", timeout, every=0.1)
    node = f"{ROLE}-{cid}"
    resumed = "PrepareCommit" if state == "CompleteCommit" else "PrepareAbort"
    ctx.nemesis("coordinator-takeover", {
        "node": node, "coordinator_id": cid, "transactional_id": tid, "state": t.state,
        "producer_id": t.producer_id, "producer_epoch": t.producer_epoch,
        "partitions": sorted([p.topic, p.partition] for p in t.partitions),
        "log": _log_line(ctx, node, f"{tid}: resuming {resumed} after load")})
    return t


# -- facts -----------------------------------------------------------------------------------------
def crashed_after(state: str):
    def check(ops: list[dict]) -> str | None:
        stops = nemesis_ops(ops, "stop-coordinator-crash")
        if not stops:
            return "no stop-coordinator-crash op: the coordinator did not crash"
        v = stops[-1].get("value") or {}
        if v.get("state") != "dead" or v.get("after") != state:
            return f"the crash op says {v}"
        if not v.get("log") or state not in v["log"]:
            return f"{v.get('node')}'s log has no line of the fault firing after {state}"
        return None
    return check


def completed_elsewhere(state: str):
    def check(ops: list[dict]) -> str | None:
        crashes = nemesis_ops(ops, "stop-coordinator-crash")
        takeovers = nemesis_ops(ops, "coordinator-takeover")
        if not crashes or not takeovers:
            return "no crash or no takeover was recorded"
        c, t = crashes[-1]["value"], takeovers[-1]["value"]
        if t.get("node") == c.get("node") or t.get("state") != state:
            return f"after the crash of {c.get('node')}: {t}"
        if not t.get("log"):
            return f"{t.get('node')} reached {state} but its log does not say it resumed the transaction on load"
        return None
    return check


def lso_passed(partitions: int):
    """At the last offsets sample every partition's LSO is at its high watermark and past a record."""
    def check(ops: list[dict]) -> str | None:
        samples = [o["value"] for o in ops if o.get("process") == "monitor" and o.get("f") == "offsets"]
        if not samples:
            return "no offsets sample was recorded"
        last = {k: (lso, hw) for k, lso, hw in samples[-1]}
        if len(last) != partitions:
            return f"the last sample has {len(last)} of {partitions} partitions: {last}"
        bad = {k: v for k, v in last.items() if v[0] < v[1] or v[0] < 2}
        return f"at the last sample (partition: (lso, hw)): {bad}" if bad else None
    return check


def _txn_values(ops: list[dict]) -> list[int]:
    return [v for o in ops if o.get("f") == "txn" and o.get("type") == "invoke" for _, _, v in o["value"]]


def read_committed_counts(ops: list[dict]) -> dict[int, int]:
    seen: dict[int, int] = {}
    for o in completions(ops, "poll", "ok"):
        if o.get("isolation") != "read_committed":
            continue
        for _, by_key in o["value"]:
            for recs in (by_key or {}).values():
                for _, v in recs:
                    seen[v] = seen.get(v, 0) + 1
    return seen


def read_exactly_once(ops: list[dict]) -> str | None:
    values, seen = _txn_values(ops), read_committed_counts(ops)
    if not values:
        return "no transaction was recorded"
    bad = {v: seen.get(v, 0) for v in values if seen.get(v, 0) != 1}
    return f"read_committed read (value: times) {bad}" if bad else None


def read_none(ops: list[dict]) -> str | None:
    values, seen = _txn_values(ops), read_committed_counts(ops)
    if not values:
        return "no transaction was recorded"
    bad = {v: seen[v] for v in values if seen.get(v)}
    return f"read_committed read aborted records (value: times) {bad}" if bad else None


def commit_not_refused(ops: list[dict]) -> str | None:
    txns = completions(ops, "txn")
    if not txns:
        return "the transaction has no completion"
    t = txns[-1]
    return None if t["type"] in ("ok", "info") else f"the commit was refused ({t.get('error')}) yet it committed"
