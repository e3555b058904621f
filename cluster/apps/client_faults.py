"""Faults of the application's own Kafka client that the brokers saw, as notes beside an app run's verdict.

Guarantees:
- `read_unstable_fetches(info, group)` asks every running broker (GroupMetrics, a bounded timeout) how
  many OffsetFetch partitions of the group it answered without require_stable while a transactional
  offset commit for that partition was pending (KIP-447), and with which client ids; it returns the sum,
  the client ids and which brokers answered. A broker that does not answer is named in "unread", never
  an error; the count is a lower bound (a broker restarted during the run forgot its count).
- `client_fault_notes(reading)` is [] unless some broker counted at least one such fetch: no reading,
  nothing read or a count of 0 never produces a note. A note names the count, the client ids and what
  it means; it says nothing about the verdict, which stays the checker's.
- The notes go into run.json ("client_faults"); `eoslab check` carries them from there into
  results.json and the app report (checker.report_app.client_faults_section), so a re-run of the check
  keeps them. `attach_notes(out, notes)` is for a run the checker could not judge: it adds the notes to
  DIR/results.json and DIR/report.html (the same section, before the first heading after the verdict),
  leaving everything else in both as it was; with no notes, notes already there, or no results.json, it
  changes nothing.
"""
from __future__ import annotations

import json
import os

KIND = "offset-fetch-without-require-stable"


def read_unstable_fetches(info, group: str, timeout_s: float = 3.0) -> dict:
    """{"count", "client_ids", "brokers", "unread"} for `group` from every running broker that answers."""
    import grpc

    from eoslab.common import rpc
    from eoslab.v1 import broker_pb2, broker_pb2_grpc
    count, clients, read, unread = 0, [], [], []
    for n in info.by_role("broker"):
        if n.state not in ("running", "unknown"):
            continue
        ch = rpc.channel(n.address)
        try:
            r = broker_pb2_grpc.BrokerStub(ch).GroupMetrics(broker_pb2.GroupMetricsRequest(group_id=group),
                                                            timeout=timeout_s)
        except grpc.RpcError:
            unread.append(n.name)
            continue
        finally:
            ch.close()
        read.append(n.name)
        for g in r.groups:
            if g.group_id != group:
                continue
            count += g.unstable_offsets_fetched_without_require_stable
            if g.last_client_id and g.last_client_id not in clients:
                clients.append(g.last_client_id)
    return {"count": count, "client_ids": clients, "brokers": read, "unread": unread}


def client_fault_notes(reading: dict | None) -> list[dict]:
    """The notes a reading of `read_unstable_fetches` calls for: one when the count is above 0, else none."""
    if not reading or not isinstance(reading.get("count"), int) or reading["count"] <= 0:
        return []
    n, clients = reading["count"], list(reading.get("client_ids") or [])
    who = f" (client id {', '.join(clients)})" if clients else ""
    aiokafka = any(c.lower().startswith("aiokafka") for c in clients)
    note = (f"the application's consumer{who} fetched committed offsets without require_stable at least "
            f"{n} time{'s' if n != 1 else ''} while an open transaction (another instance's, after a rebalance) "
            "held newer offsets for them (KIP-447): it got the offsets from before that transaction, so "
            "duplicates after a rebalance are then the client's, not Kafka's"
            + (" (aiokafka does not support require_stable)" if aiokafka else "")
            + (f"; brokers {', '.join(reading['unread'])} could not be read, so the count may be higher"
               if reading.get("unread") else ""))
    return [{"kind": KIND, "count": n, "client_ids": clients, "note": note}]


def attach_notes(out: str, notes: list[dict]) -> bool:
    """Add `notes` to DIR/results.json and DIR/report.html; True when results.json carries them."""
    path = os.path.join(out, "results.json")
    if not notes or not os.path.exists(path):
        return False
    from checker.report_app import client_faults_section
    from checker.result import write_results
    with open(path, encoding="utf-8") as f:
        result = json.load(f)
    if result.get("client_faults") == notes:
        return True
    result["client_faults"] = notes
    write_results(out, result)
    report = os.path.join(out, "report.html")
    if os.path.exists(report):
        with open(report, encoding="utf-8") as f:
            page = f.read()
        section = client_faults_section(notes)
        at = page.find("<h2>")
        at = at if at >= 0 else max(page.rfind("</body>"), 0)
        with open(report + ".tmp", "w", encoding="utf-8") as f:
            f.write(page[:at] + section + page[at:])
        os.replace(report + ".tmp", report)
    return True
