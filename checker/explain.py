"""Say why: the settings in force that permit each anomaly a run showed, read from its run.json.

Guarantees: `explain(anomaly_types, run)` is a pure function of the anomaly
types found and the run's run.json (its "settings" by Kafka name, "client",
"kafka_version" and "kafka_behaviour", "workload", "nemesis"); it returns
{anomaly type: [reason, ...]} for the anomaly types some rule explains, each
reason {"setting", "value", "source" ("set" | "client default" | "release"),
"why", "scenario" (a scenario that shows it, or None)}. It only names
settings it can read or whose default it knows (the lab's client takes its
release's defaults; confluent-kafka's librdkafka, kafka-python and aiokafka
their documented ones); an anomaly no rule explains gets no entry, never a
guess. Given the history's ops as well (`explain(types, run, ops=ops)`, run may
then be None), it adds "fenced": one reason per op of a transactional producer
refused with a fencing error (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH,
INVALID_TXN_STATE) whose cause the history records (`explain_fencings`): a
transaction timeout when, before the fencing, the coordinator is recorded
aborting that transactional id on its timeout (an op whose value names the id
with reason "timeout") or a forward clock jump on a transaction coordinator
(nemesis `start-clock-jump`/`start-clock-strobe`) was in force during the
fenced op ("fenced by transaction timeout (clock jump on NODE)"), never
"zombie"; otherwise a zombie when a newer instance (another session's
init-producer of the same id at a higher epoch) preceded it. A fencing with
neither gets no reason. Nothing here changes the verdict.
"""
from __future__ import annotations

from typing import Any

# Producer defaults of the real clients, by Kafka's names (their documentation; librdkafka's
# CONFIGURATION.md: enable.idempotence=false, acks=all, max.in.flight=1000000; kafka-python and
# aiokafka: acks=1, idempotence off).
CLIENT_DEFAULTS = {
    "confluent-kafka": {"enable.idempotence": "false", "acks": "all",
                        "max.in.flight.requests.per.connection": "1000000"},
    "kafka-python": {"enable.idempotence": "false", "acks": "1"},
    "aiokafka": {"enable.idempotence": "false", "acks": "1"},
}
DUPLICATE_TYPES = ("duplicate",)
LOSS_TYPES = ("lost-write", "inconsistent-offsets")


def _truthy(v: Any) -> bool:
    return str(v).strip().lower() in ("true", "1", "yes")


def effective(run: dict) -> dict[str, tuple[str, str]]:
    """Producer settings by Kafka name -> (value, source): what the user set, else the client's default."""
    out: dict[str, tuple[str, str]] = {}
    client = run.get("client") or "eoslab"
    if client == "eoslab":
        b = run.get("kafka_behaviour") or {}
        if "enable_idempotence_default" in b:
            out["enable.idempotence"] = (str(bool(b["enable_idempotence_default"])).lower(), "client default")
        if "acks_default" in b:
            out["acks"] = ("all" if b["acks_default"] == -1 else str(b["acks_default"]), "client default")
    else:
        for k, v in CLIENT_DEFAULTS.get(client, {}).items():
            out[k] = (v, "client default")
    for k, v in (run.get("settings") or {}).items():
        out[str(k)] = (str(v), "set")
    return out


def _reason(setting: str, value: Any, source: str, why: str, scenario: str | None = None) -> dict:
    return {"setting": setting, "value": value, "source": source, "why": why, "scenario": scenario}


FENCING_ERRORS = ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH", "INVALID_TXN_STATE")
CLOCK_FAULTS = ("clock-jump", "clock-strobe")


def _forward_s(v: dict) -> int:
    offs = v.get("offsets_s") if isinstance(v.get("offsets_s"), list) else [v.get("offset_s")]
    return max((int(o) for o in offs if isinstance(o, (int, float))), default=0)


def explain_fencings(ops: list[dict]) -> list[dict]:
    """Why each fenced op of a transactional producer was fenced, read from the history (see above)."""
    out: list[dict] = []
    jumps: dict[str, dict] = {}          # coordinator -> its forward clock fault in force: {offset, start, stop}
    timeouts: dict[str, dict] = {}       # transactional id -> the coordinator's last abort on timeout
    inits: dict[str, list] = {}          # transactional id -> [(session, epoch)] of ok init-producer ops
    invoked: dict = {}                   # process -> index of its open op's invoke
    past: list[dict] = []                # clock faults that have stopped: {node, offset, start, stop}
    for o in ops:
        f, v, i = o.get("f") or "", o.get("value"), o.get("index", 0)
        if o.get("process") == "nemesis" or o.get("process") == "lab":
            if isinstance(v, dict) and v.get("reason") == "timeout" and v.get("transactional_id"):
                timeouts[v["transactional_id"]] = {"index": i, **v}
            fault = f.split("-", 1)[1] if f.startswith(("start-", "stop-")) else None
            if fault in CLOCK_FAULTS and isinstance(v, dict) and str(v.get("node", "")).startswith("txn-coordinator"):
                if f.startswith("start-") and _forward_s(v) > 0:
                    jumps[v["node"]] = {"node": v["node"], "offset": _forward_s(v), "start": i, "stop": None}
                elif f.startswith("stop-") and v["node"] in jumps:
                    past.append(dict(jumps.pop(v["node"]), stop=i))
            continue
        if o.get("type") == "invoke":
            invoked[o.get("process")] = i
            continue
        pr = o.get("producer") if isinstance(o.get("producer"), dict) else {}
        tid = pr.get("transactional_id")
        if f == "init-producer" and o.get("type") == "ok" and tid:
            inits.setdefault(tid, []).append((pr.get("session"), pr.get("epoch")))
        if not tid or o.get("type") == "ok" or o.get("error") not in FENCING_ERRORS:
            continue
        began = invoked.get(o.get("process"), i)
        clock = [j for j in list(jumps.values()) + past if j["stop"] is None or j["stop"] > began]
        base = {"op": i, "transactional_id": tid, "error": o["error"], "source": "history"}
        if clock or tid in timeouts:
            j = clock[-1] if clock else None
            why = (f"fenced by transaction timeout (clock jump on {j['node']}): its wall clock ran {j['offset']} s "
                   "ahead, so the open transaction looked older than transaction.timeout.ms and was aborted "
                   "with an epoch bump" if j else "fenced by transaction timeout: the coordinator aborted the "
                   "transaction on its transaction.timeout.ms and bumped the epoch")
            out.append(dict(base, setting="clock-jump" if j else "transaction.timeout.ms",
                            value=f"{j['node']} +{j['offset']} s" if j else "exceeded", cause="transaction-timeout",
                            why=why, scenario="clock-jump-fences-live-producer" if j else
                            "txn-timeout-fences-slow-producer"))
        elif any(s != pr.get("session") and (e or 0) > (pr.get("epoch") or 0) for s, e in inits.get(tid, [])):
            out.append(dict(base, setting="transactional.id", value=tid, cause="zombie", scenario=None,
                            why="fenced by a newer instance of its transactional.id (a zombie): another "
                                "init_transactions bumped the epoch"))
    return out


def explain(anomaly_types, run: dict | None, ops: list[dict] | None = None) -> dict[str, list[dict]]:
    fenced = explain_fencings(ops) if ops else []
    if not run:
        return {"fenced": fenced} if fenced else {}
    types = set(anomaly_types)
    eff = effective(run)
    b = run.get("kafka_behaviour") or {}
    release = run.get("kafka_version")
    transactional = run.get("workload") in ("txn", "copier", "zombie") or "transactional.id" in eff
    out: dict[str, list[dict]] = {}

    def add(t: str, r: dict) -> None:
        if t in types:
            out.setdefault(t, []).append(r)

    idem, idem_src = eff.get("enable.idempotence", (None, None))
    if idem is not None and not _truthy(idem) and not transactional:
        for t in DUPLICATE_TYPES:
            add(t, _reason("enable.idempotence", idem, idem_src,
                           "without idempotence a batch retried after a lost acknowledgement is written again",
                           "restart-without-transactional-id"))
    inflight = eff.get("max.in.flight.requests.per.connection")
    cache = b.get("producer_state_batches")
    if inflight and cache and inflight[0].isdigit() and int(inflight[0]) > int(cache) and _truthy(idem or "false"):
        for t in DUPLICATE_TYPES:
            add(t, _reason("max.in.flight.requests.per.connection", inflight[0], inflight[1],
                           f"more batches in flight than the {cache} the broker remembers per producer: a retry "
                           "older than those is not recognised as a duplicate", "lost-ack-6-in-flight-epoch-bump"))
    acks = eff.get("acks")
    if acks and acks[0] in ("0", "1"):
        for t in LOSS_TYPES:
            add(t, _reason("acks", acks[0], acks[1], "a write acknowledged by the leader alone is lost when "
                           "the leader dies before a follower copies it", "isr-acks1-unclean-election"))
    unclean = eff.get("topic.unclean.leader.election.enable") or eff.get("unclean.leader.election.enable")
    if unclean and _truthy(unclean[0]):
        for t in LOSS_TYPES:
            add(t, _reason("unclean.leader.election.enable", unclean[0], unclean[1],
                           "a replica outside the ISR may become leader and truncate acknowledged writes",
                           "isr-acks1-unclean-election"))
    if b and not b.get("epoch_bump_per_transaction", True):
        add("G1a", _reason("kafka_version", release, "release", "before 4.0 (KIP-890 part 2) EndTxn does not bump "
                           "the epoch: a delayed EndTxn can commit the next transaction", "delayed-end-txn"))
    if b and not b.get("transaction_verification", True):
        add("hanging-transaction", _reason("kafka_version", release, "release",
                                           "before 3.6 (KIP-890 part 1) a leader appends a transactional batch "
                                           "without asking the coordinator: a late produce opens a transaction "
                                           "no one ends", "hanging-late-produce"))
    if fenced:
        out["fenced"] = fenced
    return out
