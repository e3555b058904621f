from eoslab.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class IsolationLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    READ_UNCOMMITTED: _ClassVar[IsolationLevel]
    READ_COMMITTED: _ClassVar[IsolationLevel]

class CoordinatorType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    GROUP: _ClassVar[CoordinatorType]
    TRANSACTION: _ClassVar[CoordinatorType]
READ_UNCOMMITTED: IsolationLevel
READ_COMMITTED: IsolationLevel
GROUP: CoordinatorType
TRANSACTION: CoordinatorType

class GroupMetricsRequest(_message.Message):
    __slots__ = ("group_id",)
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    def __init__(self, group_id: _Optional[str] = ...) -> None: ...

class GroupOffsetFetchMetrics(_message.Message):
    __slots__ = ("group_id", "unstable_offsets_fetched_without_require_stable", "last_client_id")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    UNSTABLE_OFFSETS_FETCHED_WITHOUT_REQUIRE_STABLE_FIELD_NUMBER: _ClassVar[int]
    LAST_CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    unstable_offsets_fetched_without_require_stable: int
    last_client_id: str
    def __init__(self, group_id: _Optional[str] = ..., unstable_offsets_fetched_without_require_stable: _Optional[int] = ..., last_client_id: _Optional[str] = ...) -> None: ...

class GroupMetricsResponse(_message.Message):
    __slots__ = ("broker_id", "groups")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    groups: _containers.RepeatedCompositeFieldContainer[GroupOffsetFetchMetrics]
    def __init__(self, broker_id: _Optional[int] = ..., groups: _Optional[_Iterable[_Union[GroupOffsetFetchMetrics, _Mapping]]] = ...) -> None: ...

class TransactionMetricsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TransactionMetricsResponse(_message.Message):
    __slots__ = ("broker_id", "partitions_with_late_transactions_count", "max_active_transaction_duration_ms", "max_active_transaction_partition")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_WITH_LATE_TRANSACTIONS_COUNT_FIELD_NUMBER: _ClassVar[int]
    MAX_ACTIVE_TRANSACTION_DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_ACTIVE_TRANSACTION_PARTITION_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    partitions_with_late_transactions_count: int
    max_active_transaction_duration_ms: int
    max_active_transaction_partition: str
    def __init__(self, broker_id: _Optional[int] = ..., partitions_with_late_transactions_count: _Optional[int] = ..., max_active_transaction_duration_ms: _Optional[int] = ..., max_active_transaction_partition: _Optional[str] = ...) -> None: ...

class MetadataRequest(_message.Message):
    __slots__ = ("topics", "allow_auto_topic_creation")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_AUTO_TOPIC_CREATION_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    allow_auto_topic_creation: bool
    def __init__(self, topics: _Optional[_Iterable[str]] = ..., allow_auto_topic_creation: _Optional[bool] = ...) -> None: ...

class PartitionMetadata(_message.Message):
    __slots__ = ("error", "partition", "leader", "leader_epoch", "replicas", "isr")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    partition: int
    leader: int
    leader_epoch: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    isr: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., partition: _Optional[int] = ..., leader: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., isr: _Optional[_Iterable[int]] = ...) -> None: ...

class TopicMetadata(_message.Message):
    __slots__ = ("error", "name", "partitions", "topic_id")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionMetadata]
    topic_id: str
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[PartitionMetadata, _Mapping]]] = ..., topic_id: _Optional[str] = ...) -> None: ...

class MetadataResponse(_message.Message):
    __slots__ = ("brokers", "controller_id", "topics")
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    brokers: _containers.RepeatedCompositeFieldContainer[_common_pb2.BrokerEndpoint]
    controller_id: int
    topics: _containers.RepeatedCompositeFieldContainer[TopicMetadata]
    def __init__(self, brokers: _Optional[_Iterable[_Union[_common_pb2.BrokerEndpoint, _Mapping]]] = ..., controller_id: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[TopicMetadata, _Mapping]]] = ...) -> None: ...

class CreatableReplicaAssignment(_message.Message):
    __slots__ = ("partition", "broker_ids")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    BROKER_IDS_FIELD_NUMBER: _ClassVar[int]
    partition: int
    broker_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, partition: _Optional[int] = ..., broker_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class CreatableTopic(_message.Message):
    __slots__ = ("name", "num_partitions", "replication_factor", "configs", "assignments")
    class ConfigsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    num_partitions: int
    replication_factor: int
    configs: _containers.ScalarMap[str, str]
    assignments: _containers.RepeatedCompositeFieldContainer[CreatableReplicaAssignment]
    def __init__(self, name: _Optional[str] = ..., num_partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ..., configs: _Optional[_Mapping[str, str]] = ..., assignments: _Optional[_Iterable[_Union[CreatableReplicaAssignment, _Mapping]]] = ...) -> None: ...

class CreateTopicsRequest(_message.Message):
    __slots__ = ("topics", "validate_only")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[CreatableTopic]
    validate_only: bool
    def __init__(self, topics: _Optional[_Iterable[_Union[CreatableTopic, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class CreateTopicResult(_message.Message):
    __slots__ = ("name", "error", "error_message", "num_partitions", "replication_factor")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    name: str
    error: _common_pb2.ErrorCode
    error_message: str
    num_partitions: int
    replication_factor: int
    def __init__(self, name: _Optional[str] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., num_partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ...) -> None: ...

class CreateTopicsResponse(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[CreateTopicResult]
    def __init__(self, topics: _Optional[_Iterable[_Union[CreateTopicResult, _Mapping]]] = ...) -> None: ...

class PartitionProduceData(_message.Message):
    __slots__ = ("topic", "partition", "batch")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    batch: _common_pb2.RecordBatch
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., batch: _Optional[_Union[_common_pb2.RecordBatch, _Mapping]] = ...) -> None: ...

class ProduceRequest(_message.Message):
    __slots__ = ("correlation_id", "transactional_id", "acks", "timeout_ms", "partitions", "add_partitions_to_txn")
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    ACKS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    ADD_PARTITIONS_TO_TXN_FIELD_NUMBER: _ClassVar[int]
    correlation_id: int
    transactional_id: str
    acks: int
    timeout_ms: int
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionProduceData]
    add_partitions_to_txn: bool
    def __init__(self, correlation_id: _Optional[int] = ..., transactional_id: _Optional[str] = ..., acks: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[PartitionProduceData, _Mapping]]] = ..., add_partitions_to_txn: _Optional[bool] = ...) -> None: ...

class PartitionProduceResponse(_message.Message):
    __slots__ = ("topic", "partition", "error", "error_message", "base_offset", "log_start_offset", "leader_epoch", "record_errors", "log_append_time")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    BASE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    RECORD_ERRORS_FIELD_NUMBER: _ClassVar[int]
    LOG_APPEND_TIME_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    error: _common_pb2.ErrorCode
    error_message: str
    base_offset: int
    log_start_offset: int
    leader_epoch: int
    record_errors: _containers.RepeatedCompositeFieldContainer[RecordError]
    log_append_time: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., base_offset: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., record_errors: _Optional[_Iterable[_Union[RecordError, _Mapping]]] = ..., log_append_time: _Optional[int] = ...) -> None: ...

class RecordError(_message.Message):
    __slots__ = ("batch_index", "message")
    BATCH_INDEX_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    batch_index: int
    message: str
    def __init__(self, batch_index: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class ProduceResponse(_message.Message):
    __slots__ = ("correlation_id", "partitions")
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    correlation_id: int
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionProduceResponse]
    def __init__(self, correlation_id: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[PartitionProduceResponse, _Mapping]]] = ...) -> None: ...

class FetchPartition(_message.Message):
    __slots__ = ("topic", "partition", "fetch_offset", "current_leader_epoch", "partition_max_bytes", "log_start_offset")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    FETCH_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    fetch_offset: int
    current_leader_epoch: int
    partition_max_bytes: int
    log_start_offset: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., fetch_offset: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ..., partition_max_bytes: _Optional[int] = ..., log_start_offset: _Optional[int] = ...) -> None: ...

class FetchRequest(_message.Message):
    __slots__ = ("replica_id", "max_wait_ms", "min_bytes", "max_bytes", "isolation_level", "partitions", "client_metadata", "rack_id")
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    MIN_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_METADATA_FIELD_NUMBER: _ClassVar[int]
    RACK_ID_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: IsolationLevel
    partitions: _containers.RepeatedCompositeFieldContainer[FetchPartition]
    client_metadata: bool
    rack_id: str
    def __init__(self, replica_id: _Optional[int] = ..., max_wait_ms: _Optional[int] = ..., min_bytes: _Optional[int] = ..., max_bytes: _Optional[int] = ..., isolation_level: _Optional[_Union[IsolationLevel, str]] = ..., partitions: _Optional[_Iterable[_Union[FetchPartition, _Mapping]]] = ..., client_metadata: _Optional[bool] = ..., rack_id: _Optional[str] = ...) -> None: ...

class AbortedTransaction(_message.Message):
    __slots__ = ("producer_id", "first_offset")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    FIRST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    first_offset: int
    def __init__(self, producer_id: _Optional[int] = ..., first_offset: _Optional[int] = ...) -> None: ...

class FetchPartitionResponse(_message.Message):
    __slots__ = ("topic", "partition", "error", "high_watermark", "last_stable_offset", "log_start_offset", "aborted_transactions", "batches", "preferred_read_replica")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LAST_STABLE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    ABORTED_TRANSACTIONS_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    PREFERRED_READ_REPLICA_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    error: _common_pb2.ErrorCode
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: _containers.RepeatedCompositeFieldContainer[AbortedTransaction]
    batches: _containers.RepeatedCompositeFieldContainer[_common_pb2.RecordBatch]
    preferred_read_replica: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., high_watermark: _Optional[int] = ..., last_stable_offset: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., aborted_transactions: _Optional[_Iterable[_Union[AbortedTransaction, _Mapping]]] = ..., batches: _Optional[_Iterable[_Union[_common_pb2.RecordBatch, _Mapping]]] = ..., preferred_read_replica: _Optional[int] = ...) -> None: ...

class FetchResponse(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[FetchPartitionResponse]
    def __init__(self, partitions: _Optional[_Iterable[_Union[FetchPartitionResponse, _Mapping]]] = ...) -> None: ...

class ListOffsetsPartition(_message.Message):
    __slots__ = ("topic", "partition", "timestamp")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    timestamp: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., timestamp: _Optional[int] = ...) -> None: ...

class ListOffsetsRequest(_message.Message):
    __slots__ = ("isolation_level", "partitions")
    ISOLATION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    isolation_level: IsolationLevel
    partitions: _containers.RepeatedCompositeFieldContainer[ListOffsetsPartition]
    def __init__(self, isolation_level: _Optional[_Union[IsolationLevel, str]] = ..., partitions: _Optional[_Iterable[_Union[ListOffsetsPartition, _Mapping]]] = ...) -> None: ...

class ListOffsetsPartitionResponse(_message.Message):
    __slots__ = ("topic", "partition", "error", "offset", "leader_epoch", "timestamp")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    error: _common_pb2.ErrorCode
    offset: int
    leader_epoch: int
    timestamp: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., offset: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., timestamp: _Optional[int] = ...) -> None: ...

class ListOffsetsResponse(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[ListOffsetsPartitionResponse]
    def __init__(self, partitions: _Optional[_Iterable[_Union[ListOffsetsPartitionResponse, _Mapping]]] = ...) -> None: ...

class InitProducerIdRequest(_message.Message):
    __slots__ = ("transactional_id", "transaction_timeout_ms", "producer_id", "producer_epoch")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    transaction_timeout_ms: int
    producer_id: int
    producer_epoch: int
    def __init__(self, transactional_id: _Optional[str] = ..., transaction_timeout_ms: _Optional[int] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ...) -> None: ...

class InitProducerIdResponse(_message.Message):
    __slots__ = ("error", "producer_id", "producer_epoch")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    producer_id: int
    producer_epoch: int
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ...) -> None: ...

class PartitionState(_message.Message):
    __slots__ = ("topic", "partition", "leader", "leader_epoch", "isr", "replicas", "zk_version", "controller_epoch", "eligible_leader_replicas", "last_known_elr")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ZK_VERSION_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ELIGIBLE_LEADER_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    LAST_KNOWN_ELR_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    isr: _containers.RepeatedScalarFieldContainer[int]
    replicas: _containers.RepeatedScalarFieldContainer[int]
    zk_version: int
    controller_epoch: int
    eligible_leader_replicas: _containers.RepeatedScalarFieldContainer[int]
    last_known_elr: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., leader: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., isr: _Optional[_Iterable[int]] = ..., replicas: _Optional[_Iterable[int]] = ..., zk_version: _Optional[int] = ..., controller_epoch: _Optional[int] = ..., eligible_leader_replicas: _Optional[_Iterable[int]] = ..., last_known_elr: _Optional[_Iterable[int]] = ...) -> None: ...

class LeaderAndIsrRequest(_message.Message):
    __slots__ = ("controller_id", "controller_epoch", "partition_states", "live_leaders", "broker_epoch")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_STATES_FIELD_NUMBER: _ClassVar[int]
    LIVE_LEADERS_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    controller_epoch: int
    partition_states: _containers.RepeatedCompositeFieldContainer[PartitionState]
    live_leaders: _containers.RepeatedCompositeFieldContainer[_common_pb2.BrokerEndpoint]
    broker_epoch: int
    def __init__(self, controller_id: _Optional[int] = ..., controller_epoch: _Optional[int] = ..., partition_states: _Optional[_Iterable[_Union[PartitionState, _Mapping]]] = ..., live_leaders: _Optional[_Iterable[_Union[_common_pb2.BrokerEndpoint, _Mapping]]] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class LeaderAndIsrResponse(_message.Message):
    __slots__ = ("error", "partition_errors")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PARTITION_ERRORS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    partition_errors: _containers.RepeatedCompositeFieldContainer[PartitionProduceResponse]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., partition_errors: _Optional[_Iterable[_Union[PartitionProduceResponse, _Mapping]]] = ...) -> None: ...

class UpdateMetadataRequest(_message.Message):
    __slots__ = ("controller_id", "controller_epoch", "partition_states", "live_brokers", "controller", "topic_configs", "topic_ids", "broker_epoch")
    class TopicIdsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITION_STATES_FIELD_NUMBER: _ClassVar[int]
    LIVE_BROKERS_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    TOPIC_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    TOPIC_IDS_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    controller_epoch: int
    partition_states: _containers.RepeatedCompositeFieldContainer[PartitionState]
    live_brokers: _containers.RepeatedCompositeFieldContainer[_common_pb2.BrokerEndpoint]
    controller: _common_pb2.BrokerEndpoint
    topic_configs: _containers.RepeatedCompositeFieldContainer[TopicConfig]
    topic_ids: _containers.ScalarMap[str, str]
    broker_epoch: int
    def __init__(self, controller_id: _Optional[int] = ..., controller_epoch: _Optional[int] = ..., partition_states: _Optional[_Iterable[_Union[PartitionState, _Mapping]]] = ..., live_brokers: _Optional[_Iterable[_Union[_common_pb2.BrokerEndpoint, _Mapping]]] = ..., controller: _Optional[_Union[_common_pb2.BrokerEndpoint, _Mapping]] = ..., topic_configs: _Optional[_Iterable[_Union[TopicConfig, _Mapping]]] = ..., topic_ids: _Optional[_Mapping[str, str]] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class TopicConfig(_message.Message):
    __slots__ = ("topic", "configs")
    class ConfigsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    configs: _containers.ScalarMap[str, str]
    def __init__(self, topic: _Optional[str] = ..., configs: _Optional[_Mapping[str, str]] = ...) -> None: ...

class UpdateMetadataResponse(_message.Message):
    __slots__ = ("error",)
    ERROR_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ...) -> None: ...

class StopReplicaRequest(_message.Message):
    __slots__ = ("controller_id", "controller_epoch", "partitions", "delete_partitions", "broker_epoch")
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    DELETE_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    controller_id: int
    controller_epoch: int
    partitions: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicPartition]
    delete_partitions: bool
    broker_epoch: int
    def __init__(self, controller_id: _Optional[int] = ..., controller_epoch: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[_common_pb2.TopicPartition, _Mapping]]] = ..., delete_partitions: _Optional[bool] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class StopReplicaResponse(_message.Message):
    __slots__ = ("error",)
    ERROR_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ...) -> None: ...

class OffsetForLeaderPartition(_message.Message):
    __slots__ = ("topic", "partition", "current_leader_epoch", "leader_epoch")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    current_leader_epoch: int
    leader_epoch: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ..., leader_epoch: _Optional[int] = ...) -> None: ...

class OffsetsForLeaderEpochRequest(_message.Message):
    __slots__ = ("replica_id", "partitions")
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    partitions: _containers.RepeatedCompositeFieldContainer[OffsetForLeaderPartition]
    def __init__(self, replica_id: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[OffsetForLeaderPartition, _Mapping]]] = ...) -> None: ...

class EpochEndOffset(_message.Message):
    __slots__ = ("topic", "partition", "error", "leader_epoch", "end_offset")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    error: _common_pb2.ErrorCode
    leader_epoch: int
    end_offset: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., leader_epoch: _Optional[int] = ..., end_offset: _Optional[int] = ...) -> None: ...

class OffsetsForLeaderEpochResponse(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[EpochEndOffset]
    def __init__(self, partitions: _Optional[_Iterable[_Union[EpochEndOffset, _Mapping]]] = ...) -> None: ...

class FindCoordinatorRequest(_message.Message):
    __slots__ = ("key_type", "key")
    KEY_TYPE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    key_type: CoordinatorType
    key: str
    def __init__(self, key_type: _Optional[_Union[CoordinatorType, str]] = ..., key: _Optional[str] = ...) -> None: ...

class FindCoordinatorResponse(_message.Message):
    __slots__ = ("error", "error_message", "node_id", "host", "port", "partition", "coordinator_epoch")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    error_message: str
    node_id: int
    host: str
    port: int
    partition: int
    coordinator_epoch: int
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., node_id: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., partition: _Optional[int] = ..., coordinator_epoch: _Optional[int] = ...) -> None: ...

class WritableTxnMarker(_message.Message):
    __slots__ = ("producer_id", "producer_epoch", "committed", "coordinator_epoch", "partitions")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicPartition]
    def __init__(self, producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., committed: _Optional[bool] = ..., coordinator_epoch: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[_common_pb2.TopicPartition, _Mapping]]] = ...) -> None: ...

class WriteTxnMarkersRequest(_message.Message):
    __slots__ = ("markers",)
    MARKERS_FIELD_NUMBER: _ClassVar[int]
    markers: _containers.RepeatedCompositeFieldContainer[WritableTxnMarker]
    def __init__(self, markers: _Optional[_Iterable[_Union[WritableTxnMarker, _Mapping]]] = ...) -> None: ...

class TxnMarkerPartitionResult(_message.Message):
    __slots__ = ("topic", "partition", "error", "error_message")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    error: _common_pb2.ErrorCode
    error_message: str
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class TxnMarkerResult(_message.Message):
    __slots__ = ("producer_id", "partitions")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    partitions: _containers.RepeatedCompositeFieldContainer[TxnMarkerPartitionResult]
    def __init__(self, producer_id: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[TxnMarkerPartitionResult, _Mapping]]] = ...) -> None: ...

class WriteTxnMarkersResponse(_message.Message):
    __slots__ = ("markers",)
    MARKERS_FIELD_NUMBER: _ClassVar[int]
    markers: _containers.RepeatedCompositeFieldContainer[TxnMarkerResult]
    def __init__(self, markers: _Optional[_Iterable[_Union[TxnMarkerResult, _Mapping]]] = ...) -> None: ...

class JoinGroupRequest(_message.Message):
    __slots__ = ("group_id", "session_timeout_ms", "rebalance_timeout_ms", "member_id", "protocol_type", "topics", "protocols", "group_instance_id")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    REBALANCE_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    PROTOCOLS_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str
    protocol_type: str
    topics: _containers.RepeatedScalarFieldContainer[str]
    protocols: _containers.RepeatedCompositeFieldContainer[GroupProtocol]
    group_instance_id: str
    def __init__(self, group_id: _Optional[str] = ..., session_timeout_ms: _Optional[int] = ..., rebalance_timeout_ms: _Optional[int] = ..., member_id: _Optional[str] = ..., protocol_type: _Optional[str] = ..., topics: _Optional[_Iterable[str]] = ..., protocols: _Optional[_Iterable[_Union[GroupProtocol, _Mapping]]] = ..., group_instance_id: _Optional[str] = ...) -> None: ...

class GroupProtocol(_message.Message):
    __slots__ = ("name", "metadata")
    NAME_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    name: str
    metadata: bytes
    def __init__(self, name: _Optional[str] = ..., metadata: _Optional[bytes] = ...) -> None: ...

class JoinGroupMember(_message.Message):
    __slots__ = ("member_id", "topics", "metadata", "group_instance_id")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    topics: _containers.RepeatedScalarFieldContainer[str]
    metadata: bytes
    group_instance_id: str
    def __init__(self, member_id: _Optional[str] = ..., topics: _Optional[_Iterable[str]] = ..., metadata: _Optional[bytes] = ..., group_instance_id: _Optional[str] = ...) -> None: ...

class JoinGroupResponse(_message.Message):
    __slots__ = ("error", "generation_id", "protocol_name", "leader", "member_id", "members", "protocol_type")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_NAME_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    generation_id: int
    protocol_name: str
    leader: str
    member_id: str
    members: _containers.RepeatedCompositeFieldContainer[JoinGroupMember]
    protocol_type: str
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., generation_id: _Optional[int] = ..., protocol_name: _Optional[str] = ..., leader: _Optional[str] = ..., member_id: _Optional[str] = ..., members: _Optional[_Iterable[_Union[JoinGroupMember, _Mapping]]] = ..., protocol_type: _Optional[str] = ...) -> None: ...

class PartitionList(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicPartition]
    def __init__(self, partitions: _Optional[_Iterable[_Union[_common_pb2.TopicPartition, _Mapping]]] = ...) -> None: ...

class SyncGroupRequest(_message.Message):
    __slots__ = ("group_id", "generation_id", "member_id", "assignments", "assignment_bytes", "group_instance_id")
    class AssignmentsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: PartitionList
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[PartitionList, _Mapping]] = ...) -> None: ...
    class AssignmentBytesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: bytes
        def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_BYTES_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    generation_id: int
    member_id: str
    assignments: _containers.MessageMap[str, PartitionList]
    assignment_bytes: _containers.ScalarMap[str, bytes]
    group_instance_id: str
    def __init__(self, group_id: _Optional[str] = ..., generation_id: _Optional[int] = ..., member_id: _Optional[str] = ..., assignments: _Optional[_Mapping[str, PartitionList]] = ..., assignment_bytes: _Optional[_Mapping[str, bytes]] = ..., group_instance_id: _Optional[str] = ...) -> None: ...

class SyncGroupResponse(_message.Message):
    __slots__ = ("error", "assignment", "assignment_bytes", "protocol_type", "protocol_name")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_BYTES_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_TYPE_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_NAME_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    assignment: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicPartition]
    assignment_bytes: bytes
    protocol_type: str
    protocol_name: str
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., assignment: _Optional[_Iterable[_Union[_common_pb2.TopicPartition, _Mapping]]] = ..., assignment_bytes: _Optional[bytes] = ..., protocol_type: _Optional[str] = ..., protocol_name: _Optional[str] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("group_id", "generation_id", "member_id", "group_instance_id")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str
    def __init__(self, group_id: _Optional[str] = ..., generation_id: _Optional[int] = ..., member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("error",)
    ERROR_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ...) -> None: ...

class LeaveGroupRequest(_message.Message):
    __slots__ = ("group_id", "member_id", "group_instance_id")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    member_id: str
    group_instance_id: str
    def __init__(self, group_id: _Optional[str] = ..., member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ...) -> None: ...

class LeaveGroupResponse(_message.Message):
    __slots__ = ("error",)
    ERROR_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ...) -> None: ...

class OffsetCommitPartition(_message.Message):
    __slots__ = ("topic", "partition", "offset", "metadata")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    offset: int
    metadata: str
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., offset: _Optional[int] = ..., metadata: _Optional[str] = ...) -> None: ...

class OffsetCommitRequest(_message.Message):
    __slots__ = ("group_id", "generation_id", "member_id", "partitions", "group_instance_id")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    generation_id: int
    member_id: str
    partitions: _containers.RepeatedCompositeFieldContainer[OffsetCommitPartition]
    group_instance_id: str
    def __init__(self, group_id: _Optional[str] = ..., generation_id: _Optional[int] = ..., member_id: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[OffsetCommitPartition, _Mapping]]] = ..., group_instance_id: _Optional[str] = ...) -> None: ...

class OffsetCommitPartitionResult(_message.Message):
    __slots__ = ("topic", "partition", "error")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    error: _common_pb2.ErrorCode
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ...) -> None: ...

class OffsetCommitResponse(_message.Message):
    __slots__ = ("error", "partitions")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    partitions: _containers.RepeatedCompositeFieldContainer[OffsetCommitPartitionResult]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., partitions: _Optional[_Iterable[_Union[OffsetCommitPartitionResult, _Mapping]]] = ...) -> None: ...

class TxnOffsetCommitRequest(_message.Message):
    __slots__ = ("transactional_id", "group_id", "producer_id", "producer_epoch", "generation_id", "member_id", "partitions", "group_instance_id", "add_partition_to_txn")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    ADD_PARTITION_TO_TXN_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    generation_id: int
    member_id: str
    partitions: _containers.RepeatedCompositeFieldContainer[OffsetCommitPartition]
    group_instance_id: str
    add_partition_to_txn: bool
    def __init__(self, transactional_id: _Optional[str] = ..., group_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., generation_id: _Optional[int] = ..., member_id: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[OffsetCommitPartition, _Mapping]]] = ..., group_instance_id: _Optional[str] = ..., add_partition_to_txn: _Optional[bool] = ...) -> None: ...

class TxnOffsetCommitResponse(_message.Message):
    __slots__ = ("error", "partitions")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    partitions: _containers.RepeatedCompositeFieldContainer[OffsetCommitPartitionResult]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., partitions: _Optional[_Iterable[_Union[OffsetCommitPartitionResult, _Mapping]]] = ...) -> None: ...

class OffsetFetchRequest(_message.Message):
    __slots__ = ("group_id", "partitions", "require_stable")
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_STABLE_FIELD_NUMBER: _ClassVar[int]
    group_id: str
    partitions: _containers.RepeatedCompositeFieldContainer[_common_pb2.TopicPartition]
    require_stable: bool
    def __init__(self, group_id: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[_common_pb2.TopicPartition, _Mapping]]] = ..., require_stable: _Optional[bool] = ...) -> None: ...

class OffsetFetchPartition(_message.Message):
    __slots__ = ("topic", "partition", "offset", "metadata", "error")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    offset: int
    metadata: str
    error: _common_pb2.ErrorCode
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., offset: _Optional[int] = ..., metadata: _Optional[str] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ...) -> None: ...

class OffsetFetchResponse(_message.Message):
    __slots__ = ("error", "partitions")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    partitions: _containers.RepeatedCompositeFieldContainer[OffsetFetchPartition]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., partitions: _Optional[_Iterable[_Union[OffsetFetchPartition, _Mapping]]] = ...) -> None: ...
