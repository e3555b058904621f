"""Kafka generations: one name that sets broker, coordinators and clients as that release behaves.

Guarantees: `get(name)` returns the KafkaVersion for one of VERSIONS (or
raises ValueError naming the known ones); every behaviour that differs
between the modelled releases is one field here, with the KIP or Kafka
change it comes from in BEHAVIOURS, so services, clients, docs and reports
read the same table. Individual switches (service flags, producer settings)
stay as overrides on top of a version. This module imports nothing from
clients/ or services/: both import it.

Sources: Kafka's own code at each release (ProducerStateManager /
ProducerAppendInfo, TransactionCoordinator, the client's
TransactionManager, Sender and ProducerConfig) and the KIPs named below.
"""
from __future__ import annotations

import os

from dataclasses import dataclass, fields

DEFAULT = "4.0"


@dataclass(frozen=True)
class KafkaVersion:
    name: str
    # -- broker (ProducerStateManager / ProducerAppendInfo) --------------------------------------
    producer_state_batches: int            # batch metadata kept per producer per partition
    duplicate_beyond_cache_error: str      # answer to a retry older than that cache
    unknown_producer: str                  # non-zero first sequence from a producer with no state:
    #                                        "OUT_OF_ORDER_SEQUENCE_NUMBER", "UNKNOWN_PRODUCER_ID" or "accept"
    transaction_verification: bool         # KIP-890 part 1: verify before a transaction's first batch
    transactional_produce_needs_id: bool   # (2.2) a transactional batch without the request's transactional.id is refused
    # -- transaction coordinator -----------------------------------------------------------------
    init_with_producer_id: bool            # KIP-360: InitProducerId may carry (producer id, epoch)
    epoch_bump_per_transaction: bool       # KIP-890 part 2: EndTxn bumps the epoch
    # -- group coordinator ----------------------------------------------------------------------
    txn_offset_commit_member_check: bool   # KIP-447: TxnOffsetCommit carries member id and generation
    txn_offset_commit_verification: bool   # KAFKA-15449 (3.7): TxnOffsetCommit verified with the coordinator
    consumer_group_protocol: bool          # KIP-848 (4.0): ConsumerGroupHeartbeat, server-side assignment
    group_config_operations: bool          # (4.0) a GROUP resource has DESCRIBE_CONFIGS and ALTER_CONFIGS
    # -- admin (ConfigAdminManager) ------------------------------------------------------------------
    alter_configs_duplicates_refused: bool  # (3.2) AlterConfigs naming a key twice is INVALID_REQUEST
    alter_configs_unknown_topic: str       # (2.7) the error for altering an unknown topic's configs
    # -- replication (Partition, the controller) ----------------------------------------------------
    hw_needs_min_isr: bool                 # KIP-966 part 1 (3.9): no high-watermark move while the ISR is under min
    eligible_leader_replicas: bool         # KIP-966 (4.0): the controller keeps and elects from the ELR
    # -- producer (ProducerConfig / TransactionManager / Sender) ------------------------------------
    enable_idempotence_default: bool       # KIP-679
    acks_default: int                      # -1 is "all"
    max_in_flight_idempotent: int          # the most in flight idempotence allows
    idempotence_conflict: str              # "error": any conflict fails; "disable": an implicit
    #                                        idempotence yields to acks/in-flight with a warning
    on_out_of_order: str                   # idempotent producer: "fatal" or "bump-epoch" (KIP-360)
    abortable_epoch_bump: bool             # KIP-360: abortable errors bump the epoch via InitProducerId(pid, epoch)

    def producer_defaults(self) -> dict[str, object]:
        """Producer settings by Kafka name as this release's client defaults them."""
        return {"enable.idempotence": self.enable_idempotence_default, "acks": self.acks_default,
                "on.out.of.order": self.on_out_of_order}

    @property
    def required_max_in_flight(self) -> int | None:
        """The max.in.flight a user of this release must set for an idempotent producer, because the
        default (5) is refused (0.11: 1); None where the default is allowed."""
        return self.max_in_flight_idempotent if self.max_in_flight_idempotent < 5 else None

    def as_dict(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


_V011 = KafkaVersion(
    name="0.11", producer_state_batches=1, duplicate_beyond_cache_error="DUPLICATE_SEQUENCE_NUMBER",
    unknown_producer="OUT_OF_ORDER_SEQUENCE_NUMBER", transaction_verification=False,
    transactional_produce_needs_id=False, init_with_producer_id=False, epoch_bump_per_transaction=False, txn_offset_commit_member_check=False,
    txn_offset_commit_verification=False, consumer_group_protocol=False, group_config_operations=False,
    alter_configs_duplicates_refused=False, alter_configs_unknown_topic="UNKNOWN_SERVER_ERROR",
    hw_needs_min_isr=False, eligible_leader_replicas=False,
    enable_idempotence_default=False, acks_default=1, max_in_flight_idempotent=1, idempotence_conflict="error",
    on_out_of_order="fatal", abortable_epoch_bump=False)
_V25 = KafkaVersion(
    name="2.5", producer_state_batches=5, duplicate_beyond_cache_error="OUT_OF_ORDER_SEQUENCE_NUMBER",
    unknown_producer="accept", transaction_verification=False,
    transactional_produce_needs_id=True, init_with_producer_id=True, epoch_bump_per_transaction=False, txn_offset_commit_member_check=True,
    txn_offset_commit_verification=False, consumer_group_protocol=False, group_config_operations=False,
    alter_configs_duplicates_refused=False, alter_configs_unknown_topic="UNKNOWN_SERVER_ERROR",
    hw_needs_min_isr=False, eligible_leader_replicas=False,
    enable_idempotence_default=False, acks_default=1, max_in_flight_idempotent=5, idempotence_conflict="error",
    on_out_of_order="bump-epoch", abortable_epoch_bump=True)
_V30 = KafkaVersion(**{**_V25.as_dict(), "name": "3.0", "enable_idempotence_default": True, "acks_default": -1,
                       "idempotence_conflict": "disable",
                       "alter_configs_unknown_topic": "UNKNOWN_TOPIC_OR_PARTITION"})
_V36 = KafkaVersion(**{**_V30.as_dict(), "name": "3.6", "transaction_verification": True,
                       "alter_configs_duplicates_refused": True})
_V40 = KafkaVersion(**{**_V36.as_dict(), "name": "4.0", "epoch_bump_per_transaction": True,
                       "txn_offset_commit_verification": True, "hw_needs_min_isr": True,
                       "eligible_leader_replicas": True, "consumer_group_protocol": True,
                       "group_config_operations": True})

VERSIONS: dict[str, KafkaVersion] = {v.name: v for v in (_V011, _V25, _V30, _V36, _V40)}

# field -> (what it is, where the rule comes from); the docs' table is generated from this.
BEHAVIOURS: dict[str, tuple[str, str]] = {
    "producer_state_batches": ("batches remembered per producer per partition for duplicate detection",
                               "KAFKA-5494 (1.0): 5 batches instead of the last one; ProducerStateEntry"),
    "duplicate_beyond_cache_error": ("answer to a retried batch older than the remembered ones",
                                     "KAFKA-5494 (1.0); ProducerAppendInfo.checkSequence"),
    "unknown_producer": ("non-zero first sequence from a producer the partition has no state for",
                         "KAFKA-5793 (1.0) UNKNOWN_PRODUCER_ID; KIP-360 (2.5) accepts it; "
                         "ProducerAppendInfo.checkSequence"),
    "transaction_verification": ("leader verifies with the coordinator before a transaction's first batch",
                                 "KIP-890 part 1 (3.6): transaction.partition.verification.enable"),
    "transactional_produce_needs_id": ("a Produce of transactional batches without a transactional.id is "
                                       "refused (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), not appended",
                                       "2.2: KafkaApis.handleProduceRequest, transactionalId != null && "
                                       "authorize(...); before, with no authorizer, it was appended"),
    "init_with_producer_id": ("InitProducerId may carry the producer's (id, epoch) to bump it",
                              "KIP-360 (2.5); TransactionCoordinator.prepareInitProducerIdTransit"),
    "epoch_bump_per_transaction": ("EndTxn bumps the producer epoch; markers carry the new epoch",
                                   "KIP-890 part 2 (4.0): transaction.version 2"),
    "txn_offset_commit_member_check": ("TxnOffsetCommit checks member id and generation",
                                       "KIP-447 (2.5); GroupCoordinator.handleTxnCommitOffsets"),
    "txn_offset_commit_verification": ("TxnOffsetCommit verified with the transaction coordinator (with "
                                       "transaction.partition.verification.enable): a late commit of a finished "
                                       "transaction is refused",
                                       "KAFKA-15449 (3.7); GroupCoordinator.handleTxnCommitOffsets -> "
                                       "maybeStartTransactionVerificationForPartition"),
    "consumer_group_protocol": ("the consumer group protocol: ConsumerGroupHeartbeat (API 68) and "
                                "ConsumerGroupDescribe (69) with server-side assignment, member epochs and OffsetCommit "
                                "v9's member-epoch check (librdkafka's group.protocol=consumer)",
                                "KIP-848 (GA in 4.0; 3.6 had ConsumerGroupHeartbeat v0 only as an unstable, "
                                "unadvertised version); GroupMetadataManager.consumerGroupHeartbeat"),
    "group_config_operations": ("a group's authorized operations (DescribeGroups, ConsumerGroupDescribe) include "
                                "DESCRIBE_CONFIGS and ALTER_CONFIGS besides READ, DESCRIBE and DELETE",
                                "4.0 (KIP-848's group configs): AclEntry.supportedOperations(GROUP)"),
    "alter_configs_duplicates_refused": ("AlterConfigs (the non-incremental one) naming a config twice in a resource "
                                         "is refused (INVALID_REQUEST); before, the last value of the key won "
                                         "(IncrementalAlterConfigs refuses it on every release)",
                                         "3.2: ConfigAdminManager.preprocess; before it "
                                         "ZkAdminManager.alterConfigs set a Properties"),
    "alter_configs_unknown_topic": ("the error for AlterConfigs or IncrementalAlterConfigs of a topic that does not exist",
                                    "2.7: AdminZkClient.validateTopicConfig throws UnknownTopicOrPartitionException; "
                                    "before, an AdminOperationException, which reaches the client as UNKNOWN_SERVER_ERROR"),
    "hw_needs_min_isr": ("the leader's high watermark does not move while the ISR is smaller than "
                         "min.insync.replicas", "KIP-966 part 1 (3.9): Partition.maybeIncrementLeaderHW"),
    "eligible_leader_replicas": ("the controller keeps the replicas that left an ISR below min.insync.replicas "
                                 "as eligible leaders, elects them before any other, and drops a broker back "
                                 "from an unclean shutdown from every ISR and ELR",
                                 "KIP-966 (4.0 with eligible.leader.replicas.version=1; on by default for new "
                                 "clusters from 4.1): PartitionChangeBuilder, "
                                 "ReplicationControlManager.handleBrokerUncleanShutdown"),
    "enable_idempotence_default": ("enable.idempotence default", "KIP-679 (3.0)"),
    "acks_default": ("acks default (-1 is all)", "KIP-679 (3.0)"),
    "max_in_flight_idempotent": ("max.in.flight.requests.per.connection allowed with idempotence",
                                 "KAFKA-5494 (1.0): up to 5; 0.11 needs 1"),
    "idempotence_conflict": ("acks!=all or in-flight above the limit with idempotence",
                             "KIP-679 / KAFKA-13598 (3.0): implicit idempotence is turned off with a warning, "
                             "an explicit one is a ConfigException; before 3.0 always an error"),
    "on_out_of_order": ("idempotent producer on OUT_OF_ORDER_SEQUENCE_NUMBER / UNKNOWN_PRODUCER_ID",
                        "KIP-360 (2.5): bump the epoch and reset sequences; 0.11: fatal; TransactionManager"),
    "abortable_epoch_bump": ("transactional producer after an abortable error: abort, then "
                             "InitProducerId(pid, epoch) and go on", "KIP-360 (2.5); TransactionManager"),
}


def get(name: str | None) -> KafkaVersion:
    """The release called `name` (None: the default)."""
    key = DEFAULT if name is None else str(name).strip()
    if key not in VERSIONS:
        raise ValueError(f"unknown Kafka version {name!r} (known: {', '.join(VERSIONS)})")
    return VERSIONS[key]


def names() -> list[str]:
    return list(VERSIONS)


_REQUEST_VERSIONS: dict | None = None


def request_versions(name: str | None) -> dict[int, tuple[int, int]] | None:
    """API key -> (lowest, highest) request version the release serves, read from Kafka's own request
    schemas at its tag (kafka_api_versions.json, written by tools/gen_api_versions.py); None for a
    release whose ranges are the lab's own (4.0, the newest)."""
    global _REQUEST_VERSIONS
    if get(name).name == DEFAULT:
        return None
    if _REQUEST_VERSIONS is None:
        import json
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "kafka_api_versions.json")) as f:
            _REQUEST_VERSIONS = json.load(f)["releases"]
    entry = _REQUEST_VERSIONS.get(get(name).name)
    if entry is None:
        return None
    return {int(k): (v[0], v[1]) for k, v in entry["requests"].items()}


def features(name: str | None) -> dict[str, tuple[int, int, int]]:
    """Kafka's feature flags as this release's ApiVersions (v3+) reports them: feature name ->
    (lowest supported, highest supported, finalized level). A release without feature flags in the
    lab (before 4.0: the lab's ZooKeeper-mode cluster finalizes none) gets none. On 4.0,
    transaction.version 2 (KIP-890 part 2: clients use EndTxn v5 and Produce v12 and the epoch goes up
    at every end) follows `epoch_bump_per_transaction`, group.version 1 (KIP-848's
    ConsumerGroupHeartbeat) `consumer_group_protocol`, as a new 4.0 cluster finalizes them."""
    v = get(name)
    out: dict[str, tuple[int, int, int]] = {}
    if v.epoch_bump_per_transaction:
        out["transaction.version"] = (0, 2, 2)
    if v.consumer_group_protocol:
        out["group.version"] = (0, 1, 1)
    return out


def markdown_table() -> str:
    """Every behaviour that differs, per version, as a Markdown table (docs and README)."""
    vs = list(VERSIONS.values())
    head = "| behaviour | " + " | ".join(v.name for v in vs) + " | source |"
    rows = [head, "|" + "---|" * (len(vs) + 2)]
    for f, (what, src) in BEHAVIOURS.items():
        vals = [getattr(v, f) for v in vs]
        rows.append(f"| {what} | " + " | ".join(_cell(x) for x in vals) + f" | {src} |")
    return "\n".join(rows)


def _cell(x) -> str:
    if isinstance(x, bool):
        return "yes" if x else "no"
    if x == -1:
        return "all"
    return str(x)
