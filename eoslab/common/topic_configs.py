"""Kafka's topic configs (LogConfig's definitions): every name, type, default, bound and broker
synonym a topic config has in Kafka 3.9, in the common module clients and services import.

Guarantees: `validate(configs)` accepts exactly what Kafka's LogConfig.validate accepts for these
names (a known name; a value of its type; within its bounds or among its choices) and answers None,
else one line naming the config and why; `TOPIC_CONFIGS` is the one table the controller (CreateTopics,
AlterConfigs) and the brokers (DescribeConfigs) read. Which of these the lab's log acts on is
`ENFORCED`; the others are stored, validated and described, and change nothing else
(docs/kafka-protocol.md, "Topic configs").
"""
from __future__ import annotations

from dataclasses import dataclass

INT32_MIN, INT32_MAX = -2 ** 31, 2 ** 31 - 1
INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1

# DescribeConfigs' config_type ids (Kafka's DescribeConfigsResponse.ConfigType)
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 1, 2, 3, 5, 6, 7
TYPE_NAMES = {BOOLEAN: "boolean", STRING: "string", INT: "int", LONG: "long", DOUBLE: "double", LIST: "list"}


@dataclass(frozen=True)
class TopicConfigKey:
    name: str
    type: int
    default: str                 # as DescribeConfigs renders it
    low: float | None = None     # numeric bounds (inclusive)
    high: float | None = None
    choices: tuple[str, ...] | None = None    # STRING: one of; LIST: each item one of
    synonym: str | None = None   # the broker setting that gives the default (ServerTopicConfigSynonyms)

    def parse(self, value: str):
        """The typed value, or ValueError with a reason."""
        if self.type == BOOLEAN:
            v = value.strip().lower()
            if v not in ("true", "false"):
                raise ValueError("expected true or false")
            return v == "true"
        if self.type in (INT, LONG):
            v = int(value.strip())
            lo, hi = (INT32_MIN, INT32_MAX) if self.type == INT else (INT64_MIN, INT64_MAX)
            if not lo <= v <= hi:
                raise ValueError(f"out of the {TYPE_NAMES[self.type]} range")
            return v
        if self.type == DOUBLE:
            return float(value.strip())
        if self.type == LIST:
            return [x.strip() for x in value.split(",") if x.strip()]
        return value.strip()


def _k(name, type_, default, low=None, high=None, choices=None, synonym=None) -> TopicConfigKey:
    return TopicConfigKey(name, type_, str(default), low, high, choices, synonym)


COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_KEYS = [
    _k("cleanup.policy", LIST, "delete", choices=("compact", "delete"), synonym="log.cleanup.policy"),
    _k("compression.type", STRING, "producer", choices=COMPRESSION_TYPES, synonym="compression.type"),
    _k("compression.gzip.level", INT, -1, synonym="compression.gzip.level"),
    _k("compression.lz4.level", INT, 9, 1, 17, synonym="compression.lz4.level"),
    _k("compression.zstd.level", INT, 3, -131072, 22, synonym="compression.zstd.level"),
    _k("delete.retention.ms", LONG, 86400000, 0, synonym="log.cleaner.delete.retention.ms"),
    _k("file.delete.delay.ms", LONG, 60000, 0, synonym="log.segment.delete.delay.ms"),
    _k("flush.messages", LONG, INT64_MAX, 1, synonym="log.flush.interval.messages"),
    _k("flush.ms", LONG, INT64_MAX, 0, synonym="log.flush.interval.ms"),
    _k("follower.replication.throttled.replicas", LIST, ""),
    _k("index.interval.bytes", INT, 4096, 0, synonym="log.index.interval.bytes"),
    _k("leader.replication.throttled.replicas", LIST, ""),
    _k("local.retention.bytes", LONG, -2, -2, synonym="log.local.retention.bytes"),
    _k("local.retention.ms", LONG, -2, -2, synonym="log.local.retention.ms"),
    _k("max.compaction.lag.ms", LONG, INT64_MAX, 1, synonym="log.cleaner.max.compaction.lag.ms"),
    _k("max.message.bytes", INT, 1048588, 0, synonym="message.max.bytes"),
    _k("message.downconversion.enable", BOOLEAN, "true", synonym="log.message.downconversion.enable"),
    _k("message.format.version", STRING, "3.0-IV1", synonym="log.message.format.version"),
    _k("message.timestamp.after.max.ms", LONG, INT64_MAX, 0, synonym="log.message.timestamp.after.max.ms"),
    _k("message.timestamp.before.max.ms", LONG, INT64_MAX, 0, synonym="log.message.timestamp.before.max.ms"),
    _k("message.timestamp.difference.max.ms", LONG, INT64_MAX, 0,
       synonym="log.message.timestamp.difference.max.ms"),
    _k("message.timestamp.type", STRING, "CreateTime", choices=("CreateTime", "LogAppendTime"),
       synonym="log.message.timestamp.type"),
    _k("min.cleanable.dirty.ratio", DOUBLE, 0.5, 0, 1, synonym="log.cleaner.min.cleanable.ratio"),
    _k("min.compaction.lag.ms", LONG, 0, 0, synonym="log.cleaner.min.compaction.lag.ms"),
    _k("min.insync.replicas", INT, 1, 1, synonym="min.insync.replicas"),
    _k("preallocate", BOOLEAN, "false", synonym="log.preallocate"),
    _k("remote.log.copy.disable", BOOLEAN, "false"),
    _k("remote.log.delete.on.disable", BOOLEAN, "false"),
    _k("remote.storage.enable", BOOLEAN, "false"),
    _k("retention.bytes", LONG, -1, synonym="log.retention.bytes"),
    _k("retention.ms", LONG, 604800000, -1, synonym="log.retention.ms"),
    _k("segment.bytes", INT, 1073741824, 14, synonym="log.segment.bytes"),
    _k("segment.index.bytes", INT, 10485760, 4, synonym="log.index.size.max.bytes"),
    _k("segment.jitter.ms", LONG, 0, 0, synonym="log.roll.jitter.ms"),
    _k("segment.ms", LONG, 604800000, 1, synonym="log.roll.ms"),
    _k("unclean.leader.election.enable", BOOLEAN, "false", synonym="unclean.leader.election.enable"),
]
TOPIC_CONFIGS: dict[str, TopicConfigKey] = {k.name: k for k in _KEYS}
# what the lab's brokers and controller act on; the rest is kept and described only
ENFORCED = frozenset({"cleanup.policy", "flush.messages", "flush.ms", "max.message.bytes", "message.timestamp.type",
                      "min.insync.replicas", "segment.bytes", "segment.ms", "unclean.leader.election.enable"})


def check(name: str, value: str | None) -> str | None:
    """None when `value` is a valid value of topic config `name`, else one line saying why."""
    key = TOPIC_CONFIGS.get(name)
    if key is None:
        return f"Unknown topic config name: {name}"
    if value is None:
        return f"Invalid value null for configuration {name}"
    try:
        v = key.parse(value)
    except ValueError as e:
        return f"Invalid value {value} for configuration {name}: {e}"
    if key.type == STRING and key.choices and v not in key.choices:
        return f"Invalid value {value} for configuration {name}: String must be one of: {', '.join(key.choices)}"
    if key.type == LIST and key.choices and any(x not in key.choices for x in v):
        return f"Invalid value {value} for configuration {name}: each item must be one of {', '.join(key.choices)}"
    if name == "compression.gzip.level" and not (v == -1 or 1 <= v <= 9):
        return f"Invalid value {value} for configuration {name}: Value must be between 1 and 9, or -1"
    if key.low is not None and v < key.low or key.high is not None and v > key.high:
        bounds = f"at least {key.low:g}" if key.high is None else f"between {key.low:g} and {key.high:g}"
        return f"Invalid value {value} for configuration {name}: Value must be {bounds}"
    return None


def validate(configs: dict[str, str]) -> str | None:
    """The first problem among `configs` as one line, None when all are valid."""
    for name, value in configs.items():
        if (why := check(name, value)) is not None:
            return why
    return None


def is_compacted(configs: dict[str, str]) -> bool:
    """cleanup.policy includes compact (a compacted topic refuses records without a key)."""
    return "compact" in TOPIC_CONFIGS["cleanup.policy"].parse(configs.get("cleanup.policy", "delete"))
