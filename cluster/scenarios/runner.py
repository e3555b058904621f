"""Running one scenario: its own cluster, its schedule, the recorded history, the checker's verdict.

Guarantees: each run starts a fresh LocalRuntime cluster on a free loopback
slot and always tears it down (also on error or interrupt); the scenario's
ops and faults go to DIR/NAME/history.jsonl as they happen; the verdict is
`checker.kafka.check_kafka` on that file — the analysis `eoslab check
--model kafka` runs — written as DIR/NAME/results.json (the checker's result
plus its "verdict", a "scenario" section: expected, observed, facts,
match, and under "why" what checker.explain reads from the history alone, such as
why an op was fenced) and DIR/NAME/report.html; a run the lab broke before the checker
could judge it (the cluster or the scenario raised) has the verdict
lab-error with the reason in "lab_errors", never an observed anomaly set. Observed = the set of anomaly types the checker
reports; the run matches when that set equals the expected one and every
extra fact holds. With keep, or when the run does not match, the nodes' logs
are copied to DIR/NAME/logs before teardown.
"""
from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass, field

from cluster.scenarios.base import Scenario, describe_verdict
from eoslab import kafka_version as kv

OUTPUTS = ("history.jsonl", "results.json", "report.html")


@dataclass
class Outcome:
    name: str
    expected: frozenset
    observed: frozenset | None = None
    facts: dict = field(default_factory=dict)     # fact name -> None (holds) or why not
    error: str | None = None
    seconds: float = 0.0
    out: str = ""

    @property
    def match(self) -> bool:
        return self.error is None and self.observed == self.expected and \
            all(v is None for v in self.facts.values())

    def line(self) -> str:
        if self.error is not None:
            return f"{self.name:<36} ERROR     {self.error}"
        failed = [f"{k}: NOT ({v})" for k, v in self.facts.items() if v is not None]
        held = [k for k, v in self.facts.items() if v is None]
        observed = describe_verdict(self.observed or (), held) + ("; " + "; ".join(failed) if failed else "")
        status = "MATCH" if self.match else "MISMATCH"
        return (f"{self.name:<36} expected {describe_verdict(self.expected, list(self.facts)):<34} "
                f"observed {observed:<34} {status} ({self.seconds:.1f} s)")

    def to_json(self) -> dict:
        return {"name": self.name, "expected": sorted(self.expected),
                "observed": sorted(self.observed) if self.observed is not None else None,
                "facts": {k: {"holds": v is None, "detail": v} for k, v in self.facts.items()},
                "match": self.match, "error": self.error, "seconds": round(self.seconds, 2)}


def _copy_logs(rt, out: str) -> None:
    src = os.path.join(rt.dir, "logs")
    if os.path.isdir(src):
        shutil.copytree(src, os.path.join(out, "logs"), dirs_exist_ok=True)


def _read_ops(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def play(sc: Scenario, out: str, home: str | None = None, kafka_version: str | None = None) -> str | None:
    """Start the cluster, drive the scenario, tear down. Returns an error message, or None."""
    from cluster.history import History
    from cluster.local import ClusterError, LocalRuntime
    from cluster.scenarios.context import Context, ScenarioError
    from cluster.zookeeper import ZooKeeperMissing
    c = sc.cluster
    v = [f"--kafka-version={kafka_version}"] if kafka_version else []      # the scenario's own flags override it
    rt = LocalRuntime(f"scenario-{sc.name[:24]}-{uuid.uuid4().hex[:6]}", home=home, brokers=c.brokers,
                      controllers=c.controllers, broker_args=v + list(c.broker_args), controller_args=v,
                      session_timeout_ms=c.session_timeout_ms, txn_coordinators=c.txn_coordinators,
                      txn_coordinator_args=v + list(c.txn_coordinator_args), disk=c.disk)
    if c.faketime:
        from cluster import faketime
        faketime.enable(rt)                     # before up(): every service starts with the preload
    history = History(os.path.join(out, "history.jsonl"))
    ctx = None
    error = None
    try:
        rt.up()
        ctx = Context(rt, history, kafka_version=kafka_version)
        sc.drive(ctx)
    except (ScenarioError, ClusterError, ZooKeeperMissing) as e:
        error = " ".join(str(e).split("\n")[0].split())
    except Exception as e:  # noqa: BLE001 - reported as the scenario's error, never a traceback
        error = f"{type(e).__name__}: {' '.join(str(e).split())}"[:300]
    finally:
        if ctx is not None:
            ctx.close()
        history.close()
        try:
            _copy_logs(rt, out)          # removed again by run_scenario when the run matches (no --keep)
        finally:
            rt.down()
    return error


def judge(sc: Scenario, out: str, kafka_version: str | None = None) -> tuple[dict, frozenset, dict]:
    """The checker's verdict on the recorded history, and the scenario's extra facts."""
    from checker.kafka import check_kafka
    from checker.report import write_report
    from checker.report_series import SeriesCollector
    path = os.path.join(out, "history.jsonl")
    series = SeriesCollector()
    result = check_kafka(path, series=series, hang_threshold_s=sc.hang_threshold_s)
    ops = _read_ops(path)
    facts = {}
    for f in sc.facts:
        try:
            facts[f.name] = f.check(ops)
        except Exception as e:  # noqa: BLE001 - a fact that cannot be read from the history does not hold
            facts[f.name] = f"could not be checked: {type(e).__name__}: {e}"
    observed = frozenset(result.get("anomalies", {}))
    from checker.explain import explain
    why = explain(observed, None, ops=ops)         # what the history alone says: why an op was fenced
    if why:
        result["why"] = {**(result.get("why") or {}), **why}
    title = (f"scenario {sc.name} on Kafka {kafka_version or kv.DEFAULT}: expected "
             f"{describe_verdict(sc.expected_for(kafka_version))}, observed {describe_verdict(observed)}")
    write_report(os.path.join(out, "report.html"), result, series, title=title)
    return result, observed, facts


def run_scenario(sc: Scenario, out_root: str, keep: bool = False, home: str | None = None,
                 kafka_version: str | None = None) -> Outcome:
    from checker.result import to_json, with_verdict
    out = os.path.join(out_root, sc.name)
    os.makedirs(out, exist_ok=True)
    for name in OUTPUTS:
        try:
            os.remove(os.path.join(out, name))
        except FileNotFoundError:
            pass
    shutil.rmtree(os.path.join(out, "logs"), ignore_errors=True)
    t0 = time.monotonic()
    outcome = Outcome(sc.name, sc.expected_for(kafka_version), out=out)
    outcome.error = play(sc, out, home, kafka_version)
    result: dict = {}
    if outcome.error is None:
        try:
            result, outcome.observed, outcome.facts = judge(sc, out, kafka_version)
            if result.get("valid") == "unknown":
                outcome.error = "the checker returned unknown"
        except Exception as e:  # noqa: BLE001
            outcome.error = f"checking failed: {type(e).__name__}: {e}"
    outcome.seconds = time.monotonic() - t0
    if outcome.match and not keep:
        shutil.rmtree(os.path.join(out, "logs"), ignore_errors=True)
    section = dict(outcome.to_json(), seed=sc.seed, description=sc.description, cluster=sc.cluster.describe(),
                   kafka_version=kafka_version or kv.DEFAULT)
    if outcome.error is not None and not result:      # the lab failed before the checker could judge
        result = {"valid": "unknown", "anomalies": {}, "stats": {"reason": outcome.error}}
        result = with_verdict(result, [{"kind": "run", "message": outcome.error, "log": []}])
    else:
        result = with_verdict(result)
    with open(os.path.join(out, "results.json"), "w", encoding="utf-8") as fh:
        fh.write(to_json(dict(result, scenario=section), indent=1) + "\n")
    return outcome
