"""ProducerConfig: the producer's settings under Kafka's names.

Guarantees: `from_props` accepts Kafka's property names (acks,
enable.idempotence, max.in.flight.requests.per.connection, ...) and refuses
an unknown name or a bad value with one clear ValueError. Unlike Kafka,
max.in.flight may exceed 5 with idempotence on, so the window's edge can be
studied.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

OOS_REACTIONS = ("fatal", "bump-epoch")


@dataclass
class ProducerConfig:
    acks: int = -1                      # "all" = -1
    enable_idempotence: bool = True
    max_in_flight: int = 5
    retries: int = 2**31 - 1
    retry_backoff_ms: int = 50
    request_timeout_ms: int = 5000
    delivery_timeout_ms: int = 120000
    linger_ms: int = 5
    batch_size: int = 16384
    buffer_memory: int = 32 * 1024 * 1024
    metadata_max_age_ms: int = 30000
    # What the producer does with OUT_OF_ORDER_SEQUENCE_NUMBER when no earlier batch
    # of that partition is still unacknowledged: "fatal" fails the producer (KIP-98
    # as shipped); "bump-epoch" bumps the epoch and resends from sequence 0, as seed
    # 001 describes (which duplicates a batch the broker had already written).
    on_out_of_order: str = "fatal"
    client_id: str = "eoslab-producer"
    transactional_id: str = ""          # set: the transactional producer (KIP-98)
    transaction_timeout_ms: int = 60000

    PROPS = {
        "acks": "acks", "enable.idempotence": "enable_idempotence",
        "max.in.flight.requests.per.connection": "max_in_flight", "max.in.flight": "max_in_flight",
        "retries": "retries", "retry.backoff.ms": "retry_backoff_ms",
        "request.timeout.ms": "request_timeout_ms", "delivery.timeout.ms": "delivery_timeout_ms",
        "linger.ms": "linger_ms", "batch.size": "batch_size", "buffer.memory": "buffer_memory",
        "metadata.max.age.ms": "metadata_max_age_ms", "on.out.of.order": "on_out_of_order",
        "client.id": "client_id", "transactional.id": "transactional_id",
        "transaction.timeout.ms": "transaction_timeout_ms",
    }

    def __post_init__(self):
        self.validate()

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
            raise ValueError("transactional.id needs enable.idempotence (as in Kafka)")
        if self.transaction_timeout_ms <= 0:
            raise ValueError("transaction.timeout.ms must be positive")
        if self.enable_idempotence and self.acks != -1:
            raise ValueError("enable.idempotence needs acks=all (as in Kafka)")

    @classmethod
    def from_props(cls, props: dict[str, object]) -> "ProducerConfig":
        kw: dict[str, object] = {}
        types = {f.name: f.type for f in fields(cls)}
        for key, raw in props.items():
            attr = cls.PROPS.get(key, key.replace(".", "_") if key.replace(".", "_") in types else None)
            if attr is None:
                raise ValueError(f"unknown producer setting {key!r}")
            kw[attr] = _convert(attr, raw, types[attr])
        return cls(**kw)


def _convert(attr: str, raw, typ):
    if attr == "acks" and isinstance(raw, str):
        if raw.lower() == "all":
            return -1
    if typ in ("bool", bool):
        if isinstance(raw, bool):
            return raw
        s = str(raw).lower()
        if s in ("true", "1", "yes", "on"):
            return True
        if s in ("false", "0", "no", "off"):
            return False
        raise ValueError(f"{attr}: expected true or false, got {raw!r}")
    if typ in ("int", int):
        try:
            return int(raw)
        except (TypeError, ValueError):
            raise ValueError(f"{attr}: expected an integer, got {raw!r}") from None
    return str(raw)
