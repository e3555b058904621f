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
guess. Nothing here changes the verdict.
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


def explain(anomaly_types, run: dict | None) -> dict[str, list[dict]]:
    if not run:
        return {}
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
    return out
