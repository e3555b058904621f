from eoslab.v1 import common_pb2 as _common_pb2
from eoslab.v1 import broker_pb2 as _broker_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AlterPartitionRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch", "topic", "partition", "leader_epoch", "new_isr", "partition_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    NEW_ISR_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    topic: str
    partition: int
    leader_epoch: int
    new_isr: _containers.RepeatedScalarFieldContainer[int]
    partition_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ..., topic: _Optional[str] = ..., partition: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., new_isr: _Optional[_Iterable[int]] = ..., partition_epoch: _Optional[int] = ...) -> None: ...

class AlterPartitionResponse(_message.Message):
    __slots__ = ("error", "state")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    state: _broker_pb2.PartitionState
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., state: _Optional[_Union[_broker_pb2.PartitionState, _Mapping]] = ...) -> None: ...

class AllocateProducerIdsRequest(_message.Message):
    __slots__ = ("broker_id", "broker_epoch")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    broker_epoch: int
    def __init__(self, broker_id: _Optional[int] = ..., broker_epoch: _Optional[int] = ...) -> None: ...

class AllocateProducerIdsResponse(_message.Message):
    __slots__ = ("error", "producer_id_start", "producer_id_len")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_START_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_LEN_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    producer_id_start: int
    producer_id_len: int
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., producer_id_start: _Optional[int] = ..., producer_id_len: _Optional[int] = ...) -> None: ...

class DescribeClusterRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeClusterResponse(_message.Message):
    __slots__ = ("error", "controller_id", "controller_epoch", "live_brokers", "partition_states")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LIVE_BROKERS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_STATES_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorCode
    controller_id: int
    controller_epoch: int
    live_brokers: _containers.RepeatedCompositeFieldContainer[_common_pb2.BrokerEndpoint]
    partition_states: _containers.RepeatedCompositeFieldContainer[_broker_pb2.PartitionState]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., controller_id: _Optional[int] = ..., controller_epoch: _Optional[int] = ..., live_brokers: _Optional[_Iterable[_Union[_common_pb2.BrokerEndpoint, _Mapping]]] = ..., partition_states: _Optional[_Iterable[_Union[_broker_pb2.PartitionState, _Mapping]]] = ...) -> None: ...

class CreatePartitionsTopic(_message.Message):
    __slots__ = ("name", "count", "assignments", "has_assignments")
    NAME_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    HAS_ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    count: int
    assignments: _containers.RepeatedCompositeFieldContainer[ReplicaList]
    has_assignments: bool
    def __init__(self, name: _Optional[str] = ..., count: _Optional[int] = ..., assignments: _Optional[_Iterable[_Union[ReplicaList, _Mapping]]] = ..., has_assignments: _Optional[bool] = ...) -> None: ...

class ReplicaList(_message.Message):
    __slots__ = ("broker_ids",)
    BROKER_IDS_FIELD_NUMBER: _ClassVar[int]
    broker_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, broker_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class CreatePartitionsRequest(_message.Message):
    __slots__ = ("topics", "validate_only")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[CreatePartitionsTopic]
    validate_only: bool
    def __init__(self, topics: _Optional[_Iterable[_Union[CreatePartitionsTopic, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class CreatePartitionsResult(_message.Message):
    __slots__ = ("name", "error", "error_message")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    name: str
    error: _common_pb2.ErrorCode
    error_message: str
    def __init__(self, name: _Optional[str] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class CreatePartitionsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[CreatePartitionsResult]
    def __init__(self, results: _Optional[_Iterable[_Union[CreatePartitionsResult, _Mapping]]] = ...) -> None: ...

class DeleteTopicsRequest(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class DeleteTopicResult(_message.Message):
    __slots__ = ("name", "error", "error_message")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    name: str
    error: _common_pb2.ErrorCode
    error_message: str
    def __init__(self, name: _Optional[str] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class DeleteTopicsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[DeleteTopicResult]
    def __init__(self, results: _Optional[_Iterable[_Union[DeleteTopicResult, _Mapping]]] = ...) -> None: ...

class ConfigOp(_message.Message):
    __slots__ = ("name", "op", "value", "has_value")
    class Op(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        SET: _ClassVar[ConfigOp.Op]
        DELETE: _ClassVar[ConfigOp.Op]
        APPEND: _ClassVar[ConfigOp.Op]
        SUBTRACT: _ClassVar[ConfigOp.Op]
    SET: ConfigOp.Op
    DELETE: ConfigOp.Op
    APPEND: ConfigOp.Op
    SUBTRACT: ConfigOp.Op
    NAME_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    HAS_VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    op: ConfigOp.Op
    value: str
    has_value: bool
    def __init__(self, name: _Optional[str] = ..., op: _Optional[_Union[ConfigOp.Op, str]] = ..., value: _Optional[str] = ..., has_value: _Optional[bool] = ...) -> None: ...

class TopicConfigChange(_message.Message):
    __slots__ = ("topic", "ops", "replace")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    OPS_FIELD_NUMBER: _ClassVar[int]
    REPLACE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    ops: _containers.RepeatedCompositeFieldContainer[ConfigOp]
    replace: bool
    def __init__(self, topic: _Optional[str] = ..., ops: _Optional[_Iterable[_Union[ConfigOp, _Mapping]]] = ..., replace: _Optional[bool] = ...) -> None: ...

class AlterTopicConfigsRequest(_message.Message):
    __slots__ = ("topics", "validate_only")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[TopicConfigChange]
    validate_only: bool
    def __init__(self, topics: _Optional[_Iterable[_Union[TopicConfigChange, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class AlterTopicConfigResult(_message.Message):
    __slots__ = ("topic", "error", "error_message")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    error: _common_pb2.ErrorCode
    error_message: str
    def __init__(self, topic: _Optional[str] = ..., error: _Optional[_Union[_common_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class AlterTopicConfigsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AlterTopicConfigResult]
    def __init__(self, results: _Optional[_Iterable[_Union[AlterTopicConfigResult, _Mapping]]] = ...) -> None: ...
