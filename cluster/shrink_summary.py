"""What `eoslab shrink` says: a schedule in words and the one-paragraph summary of a shrink.json.

Guarantees: `summary(doc)` names the anomaly types, the faults that matter in order with their times,
the time limit, each size dimension's original and minimal value, the reproduction rate, the runs
and minutes spent, whether the budget cut the search, the minimal run's folder and the replay
command; when the original schedule did not reproduce, or nothing smaller did, it says that instead
of naming a smaller run.
"""
from __future__ import annotations

from cluster import shrink_dimensions as dims_


def describe(events: list[dict]) -> str:
    return ", ".join(f"{e['package']} at {e['at']:g} s for {e['duration']:g} s" for e in events) or "no fault"


def summary(doc: dict) -> str:
    o, m = doc["original"], doc["minimal"]
    n0, n1 = len(o["schedule"]), len(m["schedule"])
    types = ", ".join(doc["minimal_anomalies"] or doc["anomaly_types"])
    if doc.get("original_reproduced") is False:
        c = doc["candidates"][0] if doc["candidates"] else {"hits": 0, "tries": 0}
        head = (f"The original schedule did not reproduce {types} when replayed ({c['hits']} of {c['tries']} "
                f"tries; a candidate counts at {doc['rule']['need']} of {doc['rule']['tries']}): the anomaly "
                f"needs timing the replays did not give, so there is nothing to shrink; try more --tries.")
        rate = ""
    elif doc["reproduction"] is None:
        head = (f"No smaller run reproduced {types} within {doc['runs_used']} runs: the original "
                f"{n0} faults stand ({describe(o['schedule'])}; time limit {o['time_limit']:g} s).")
        rate = ""
    else:
        r = doc["reproduction"]
        head = (f"The {types} anomaly needs {n1} of the run's {n0} faults, in order: {describe(m['schedule'])}; "
                f"time limit {m['time_limit']:g} s (was {o['time_limit']:g} s)."
                + dims_.sentence(doc.get("dimensions") or {}))
        rate = (f" It reproduced in {r['hits']} of {r['tries']} tries (a candidate counts at {doc['rule']['need']} "
                f"of {doc['rule']['tries']}; timing is not deterministic, so a replay may need several tries).")
    spent = " The budget ran out before the search ended." if doc["budget_cut_search"] else ""
    return (f"{head}{rate} {doc['runs_used']} replay runs, {doc['seconds'] / 60:.1f} min.{spent} "
            f"Minimal run: {m['folder']}. Replay: {doc['replay']}")
