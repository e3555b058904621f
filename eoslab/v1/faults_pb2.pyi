from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DropProduceResponses(_message.Message):
    __slots__ = ("topic", "partition", "skip", "count")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    SKIP_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    skip: int
    count: int
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., skip: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...

class ReplayEndTxn(_message.Message):
    __slots__ = ("transactional_id", "count", "min_delay_ms", "max_delay_ms", "next_transaction")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    MIN_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    NEXT_TRANSACTION_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    count: int
    min_delay_ms: int
    max_delay_ms: int
    next_transaction: bool
    def __init__(self, transactional_id: _Optional[str] = ..., count: _Optional[int] = ..., min_delay_ms: _Optional[int] = ..., max_delay_ms: _Optional[int] = ..., next_transaction: _Optional[bool] = ...) -> None: ...

class CrashAfterPrepare(_message.Message):
    __slots__ = ("transactional_id", "prepare_abort")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PREPARE_ABORT_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    prepare_abort: bool
    def __init__(self, transactional_id: _Optional[str] = ..., prepare_abort: _Optional[bool] = ...) -> None: ...

class InjectFaultRequest(_message.Message):
    __slots__ = ("drop_produce_responses", "replay_end_txn", "crash_after_prepare")
    DROP_PRODUCE_RESPONSES_FIELD_NUMBER: _ClassVar[int]
    REPLAY_END_TXN_FIELD_NUMBER: _ClassVar[int]
    CRASH_AFTER_PREPARE_FIELD_NUMBER: _ClassVar[int]
    drop_produce_responses: DropProduceResponses
    replay_end_txn: ReplayEndTxn
    crash_after_prepare: CrashAfterPrepare
    def __init__(self, drop_produce_responses: _Optional[_Union[DropProduceResponses, _Mapping]] = ..., replay_end_txn: _Optional[_Union[ReplayEndTxn, _Mapping]] = ..., crash_after_prepare: _Optional[_Union[CrashAfterPrepare, _Mapping]] = ...) -> None: ...

class InjectFaultResponse(_message.Message):
    __slots__ = ("fault_id",)
    FAULT_ID_FIELD_NUMBER: _ClassVar[int]
    fault_id: str
    def __init__(self, fault_id: _Optional[str] = ...) -> None: ...

class ClearFaultsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListFaultsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class FaultState(_message.Message):
    __slots__ = ("fault_id", "description", "remaining", "applied", "answers")
    FAULT_ID_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    REMAINING_FIELD_NUMBER: _ClassVar[int]
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    fault_id: str
    description: str
    remaining: int
    applied: int
    answers: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, fault_id: _Optional[str] = ..., description: _Optional[str] = ..., remaining: _Optional[int] = ..., applied: _Optional[int] = ..., answers: _Optional[_Iterable[str]] = ...) -> None: ...

class FaultsResponse(_message.Message):
    __slots__ = ("faults",)
    FAULTS_FIELD_NUMBER: _ClassVar[int]
    faults: _containers.RepeatedCompositeFieldContainer[FaultState]
    def __init__(self, faults: _Optional[_Iterable[_Union[FaultState, _Mapping]]] = ...) -> None: ...
