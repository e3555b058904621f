"""A run's last steps, shared by `eoslab run` and `eoslab app run`: the nodes' logs kept beside an
invalid or failed run, the verdict from the same `eoslab check` a user runs, and the results of a run
the checker could not judge.

Guarantees: `check(out)` runs `eoslab check` on DIR/history.jsonl in a fresh interpreter (it reads
run.json's lab errors and writes DIR/results.json and DIR/report.html) and returns its exit status,
or (EXIT_LAB_ERROR, why) when it printed no verdict; `write_unjudged` writes results.json and
report.html holding the lab errors alone; `save_logs` never raises;
`write_meta` replaces DIR/run.json whole (`eoslab serve` may read it
meanwhile); `tear_down` keeps the nodes' logs of a run that was not valid
and stops a cluster the run started.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from checker.result import EXIT_LAB_ERROR, EXIT_VALID
from eoslab.common.files import replace_json


def save_logs(rt, out: str, lines: int = 5000) -> None:
    """The nodes' log tails next to the history, to investigate an invalid or failed run."""
    try:
        os.makedirs(os.path.join(out, "logs"), exist_ok=True)
        for n in rt.info().nodes:
            with open(os.path.join(out, "logs", f"{n.name}.log"), "w") as f:
                f.write(rt.logs(n.name, lines))
    except Exception:  # noqa: BLE001 - best effort: the history is what counts
        pass


def check(out: str, log=sys.stderr, strict_unseen: bool = False) -> tuple[int, str | None]:
    """The verdict, from the same `eoslab check` a user runs (it reads the lab errors from run.json):
    (its exit status, None), or (EXIT_LAB_ERROR, why) when it could not judge the history."""
    cmd = [sys.executable, "-m", "eoslab", "check", os.path.join(out, "history.jsonl"), "--model", "kafka",
           "--out", out]
    r = subprocess.run(cmd + (["--strict-unseen"] if strict_unseen else []), capture_output=True, text=True)
    try:
        result = json.loads(r.stdout)
    except ValueError:
        why = " ".join((r.stderr.strip().splitlines() or ["the checker printed no verdict"])[-1].split())
        print(f"the checker did not judge the history (exit {r.returncode}): {why}", file=log)
        return EXIT_LAB_ERROR, f"eoslab check exited {r.returncode} without a verdict: {why}"
    print(f"verdict: {result.get('verdict')} (valid={result.get('valid')}) "
          f"anomalies={sorted(result.get('anomalies', {}))}"
          + (f" unconfirmed={sorted(result.get('unconfirmed', {}))}" if result.get("unconfirmed") else ""), file=log)
    for b in (result.get("stats") or {}).get("lso_behind_at_end") or []:
        print(f"at the end, partition {b['key']}'s LSO {b['lso']} stood under its high watermark "
              f"{b['high_watermark']} for {b['stood_s']} s: read_committed consumers were held back", file=log)
    return r.returncode, None


def write_unjudged(out: str, errors: list[dict], why: str) -> None:
    """results.json and report.html for a run the checker could not judge: the lab errors alone."""
    from checker.report import write_report
    from checker.result import with_verdict, write_results
    result = with_verdict({"valid": "unknown", "anomalies": {}, "stats": {"reason": why}}, errors)
    write_results(out, result)
    write_report(os.path.join(out, "report.html"), result, title=f"{os.path.basename(out)} (not judged)")


def write_meta(out: str, meta: dict) -> None:
    replace_json(os.path.join(out, "run.json"), meta, indent=1)


def tear_down(rt, own: bool, code: int, out: str) -> None:
    """The end of every run: the nodes' log tails beside a run that was not valid, its own cluster down."""
    if rt is None:
        return
    if code != EXIT_VALID:
        save_logs(rt, out)
    if own:
        rt.down()
