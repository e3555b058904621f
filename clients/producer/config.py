"""ProducerConfig: the producer's settings under Kafka's names, resolved as a named Kafka release does.

Guarantees: `from_props(props, kafka_version=V)` accepts Kafka's property
names (acks, enable.idempotence, max.in.flight.requests.per.connection, ...,
and `kafka.version`) and refuses an unknown name or a bad value with one
clear ValueError. Defaults come from `eoslab.kafka_version.get(V)
.producer_defaults()` (default release: eoslab.kafka_version.DEFAULT); what
the user sets overrides them. The dataclass constructor resolves the same
way: a field left at None takes the release's default.

Idempotence is resolved as Kafka's ProducerConfig
(postProcessAndValidateIdempotenceConfigs) does:
- idempotence is on when enable.idempotence is set true, or when it is not
  set and the release turns it on by default (3.0+, KIP-679) or a
  transactional.id is set (which implies it); acks not set then defaults to
  all;
- conflicts with idempotence are acks other than all, retries=0, and more
  than the release's max_in_flight_idempotent requests in flight (5; 1 on
  0.11);
- before 3.0 (idempotence_conflict "error") any conflict is a ValueError;
  from 3.0 ("disable") a conflict turns an implicit idempotence off with a
  logged warning (`eoslab run --set acks=1` runs a plain producer), and an
  explicit enable.idempotence=true with a conflict is a ValueError;
- a transactional.id without idempotence (after the above) is a ValueError.

Lab-only exception: the in-flight limit does not apply when on.out.of.order
is set explicitly. That setting says what an idempotent producer does with
OUT_OF_ORDER_SEQUENCE_NUMBER, so setting it asks for an idempotent
producer at the window's edge (six in flight with a lost first ACK, the
scenarios lost-ack-6-in-flight-*); Kafka itself would refuse (or, 3.0+ with
idempotence implicit, turn idempotence off). Without it, Kafka's rule holds.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field, fields

from eoslab import kafka_version as kv

log = logging.getLogger(__name__)

OOS_REACTIONS = ("fatal", "bump-epoch")


@dataclass
class ProducerConfig:
    acks: int | None = None                # -1 is "all"; None: the release's default
    enable_idempotence: bool | None = None  # None: the release's default (or implied by transactional.id)
    max_in_flight: int = 5
    retries: int = 2**31 - 1
    retry_backoff_ms: int = 50
    request_timeout_ms: int = 5000
    delivery_timeout_ms: int = 120000
    linger_ms: int = 5
    batch_size: int = 16384
    buffer_memory: int = 32 * 1024 * 1024
    metadata_max_age_ms: int = 30000
    # What the idempotent producer does with OUT_OF_ORDER_SEQUENCE_NUMBER (and
    # UNKNOWN_PRODUCER_ID) when no earlier batch of that partition is still
    # unacknowledged: "fatal" fails the producer (0.11, KIP-98 as shipped);
    # "bump-epoch" bumps the epoch and resends from sequence 0 (KIP-360, 2.5+),
    # which duplicates a batch the broker had written but no longer remembers
    # (*Kafka Idempotence*). None: the release's default.
    on_out_of_order: str | None = None
    client_id: str = "eoslab-producer"
    transactional_id: str = ""          # set: the transactional producer (KIP-98)
    transaction_timeout_ms: int = 60000
    kafka_version: str = kv.DEFAULT
    # filled by resolution: why idempotence was turned off (3.0+), else ""
    idempotence_disabled: str = field(default="", compare=False)

    PROPS = {
        "acks": "acks", "enable.idempotence": "enable_idempotence",
        "max.in.flight.requests.per.connection": "max_in_flight", "max.in.flight": "max_in_flight",
        "retries": "retries", "retry.backoff.ms": "retry_backoff_ms",
        "request.timeout.ms": "request_timeout_ms", "delivery.timeout.ms": "delivery_timeout_ms",
        "linger.ms": "linger_ms", "batch.size": "batch_size", "buffer.memory": "buffer_memory",
        "metadata.max.age.ms": "metadata_max_age_ms", "on.out.of.order": "on_out_of_order",
        "client.id": "client_id", "transactional.id": "transactional_id",
        "transaction.timeout.ms": "transaction_timeout_ms", "kafka.version": "kafka_version",
    }

    def __post_init__(self):
        self._resolve()
        self.validate()

    @property
    def version(self) -> kv.KafkaVersion:
        return kv.get(self.kafka_version)

    def _resolve(self) -> None:
        v = kv.get(self.kafka_version)
        self.kafka_version = v.name
        defaults = v.producer_defaults()
        explicit_idempotence = self.enable_idempotence is not None
        window_study = self.on_out_of_order is not None      # the lab-only exception (module doc)
        if self.on_out_of_order is None:
            self.on_out_of_order = str(defaults["on.out.of.order"])
        if explicit_idempotence:
            idempotent = bool(self.enable_idempotence)
        else:
            idempotent = bool(defaults["enable.idempotence"]) or bool(self.transactional_id)
        if self.acks is None:
            self.acks = -1 if idempotent else int(defaults["acks"])
        if idempotent:
            limit = int(getattr(v, "max_in_flight_idempotent", 5))
            conflicts: list[tuple[str, str]] = []       # (what idempotence needs, what is set)
            if self.retries == 0:
                conflicts.append(("retries above 0", "retries=0"))
            if self.acks != -1:
                conflicts.append(("acks=all", f"acks={self.acks}"))
            if self.max_in_flight > limit and not window_study:
                conflicts.append((f"max.in.flight.requests.per.connection at most {limit}",
                                  f"max.in.flight.requests.per.connection={self.max_in_flight}"))
            if conflicts:
                mode = getattr(v, "idempotence_conflict", "disable")
                needs, got = conflicts[0]
                if explicit_idempotence:
                    raise ValueError(f"enable.idempotence=true needs {needs}, got {got} (Kafka {v.name})")
                if mode == "error":
                    why = "transactional.id implies idempotence" if self.transactional_id and \
                        not defaults["enable.idempotence"] else "idempotence is on by default"
                    raise ValueError(f"idempotence needs {needs}, got {got} ({why}; Kafka {v.name} "
                                     f"refuses the conflict)")
                self.idempotence_disabled = ", ".join(g for _, g in conflicts)
                log.warning("idempotence disabled because of %s: Kafka %s turns an implicit enable.idempotence "
                            "off (set enable.idempotence=true to make this an error)",
                            self.idempotence_disabled, v.name)
                idempotent = False
        self.enable_idempotence = idempotent

    def validate(self) -> None:
        if self.acks not in (-1, 0, 1):
            raise ValueError(f"acks must be all, -1, 0 or 1, got {self.acks!r}")
        if self.max_in_flight < 1:
            raise ValueError("max.in.flight.requests.per.connection must be at least 1")
        for f in ("retries", "retry_backoff_ms", "linger_ms"):
            if getattr(self, f) < 0:
                raise ValueError(f"{f} must not be negative")
        for f in ("request_timeout_ms", "delivery_timeout_ms", "batch_size", "buffer_memory"):
            if getattr(self, f) <= 0:
                raise ValueError(f"{f} must be positive")
        if self.on_out_of_order not in OOS_REACTIONS:
            raise ValueError(f"on.out.of.order must be one of {', '.join(OOS_REACTIONS)}")
        if self.transactional_id and not self.enable_idempotence:
            reason = f" (it was turned off because of {self.idempotence_disabled})" if self.idempotence_disabled else ""
            raise ValueError(f"transactional.id needs enable.idempotence, as in Kafka{reason}")
        if self.transaction_timeout_ms <= 0:
            raise ValueError("transaction.timeout.ms must be positive")
        if self.enable_idempotence and self.acks != -1:
            raise ValueError("enable.idempotence needs acks=all (as in Kafka)")

    @classmethod
    def from_props(cls, props: dict[str, object], kafka_version: str | None = None) -> "ProducerConfig":
        """Settings by Kafka name over the defaults of `kafka_version` (or the `kafka.version` property)."""
        kw: dict[str, object] = {}
        types = {f.name: f.type for f in fields(cls) if f.name != "idempotence_disabled"}
        for key, raw in props.items():
            attr = cls.PROPS.get(key, key.replace(".", "_") if key.replace(".", "_") in types else None)
            if attr is None:
                raise ValueError(f"unknown producer setting {key!r}")
            kw[attr] = _convert(attr, raw, types[attr])
        if "kafka_version" not in kw and kafka_version is not None:
            kw["kafka_version"] = str(kafka_version)
        return cls(**kw)


def _convert(attr: str, raw, typ):
    if attr == "acks" and isinstance(raw, str):
        if raw.lower() == "all":
            return -1
    typ = str(typ).replace(" | None", "")
    if typ == "bool":
        if isinstance(raw, bool):
            return raw
        s = str(raw).lower()
        if s in ("true", "1", "yes", "on"):
            return True
        if s in ("false", "0", "no", "off"):
            return False
        raise ValueError(f"{attr}: expected true or false, got {raw!r}")
    if typ == "int":
        try:
            return int(raw)
        except (TypeError, ValueError):
            raise ValueError(f"{attr}: expected an integer, got {raw!r}") from None
    return str(raw)
