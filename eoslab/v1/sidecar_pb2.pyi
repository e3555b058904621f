from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Direction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DIRECTION_BOTH: _ClassVar[Direction]
    DIRECTION_INBOUND: _ClassVar[Direction]
    DIRECTION_OUTBOUND: _ClassVar[Direction]
DIRECTION_BOTH: Direction
DIRECTION_INBOUND: Direction
DIRECTION_OUTBOUND: Direction

class PartitionRequest(_message.Message):
    __slots__ = ("peers", "direction")
    PEERS_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    peers: _containers.RepeatedScalarFieldContainer[str]
    direction: Direction
    def __init__(self, peers: _Optional[_Iterable[str]] = ..., direction: _Optional[_Union[Direction, str]] = ...) -> None: ...

class LossRequest(_message.Message):
    __slots__ = ("peers", "direction", "probability")
    PEERS_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    PROBABILITY_FIELD_NUMBER: _ClassVar[int]
    peers: _containers.RepeatedScalarFieldContainer[str]
    direction: Direction
    probability: float
    def __init__(self, peers: _Optional[_Iterable[str]] = ..., direction: _Optional[_Union[Direction, str]] = ..., probability: _Optional[float] = ...) -> None: ...

class ResetRequest(_message.Message):
    __slots__ = ("peers", "direction", "port")
    PEERS_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    peers: _containers.RepeatedScalarFieldContainer[str]
    direction: Direction
    port: int
    def __init__(self, peers: _Optional[_Iterable[str]] = ..., direction: _Optional[_Union[Direction, str]] = ..., port: _Optional[int] = ...) -> None: ...

class BandwidthRequest(_message.Message):
    __slots__ = ("peers", "rate_bits_per_second", "burst_bytes")
    PEERS_FIELD_NUMBER: _ClassVar[int]
    RATE_BITS_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    BURST_BYTES_FIELD_NUMBER: _ClassVar[int]
    peers: _containers.RepeatedScalarFieldContainer[str]
    rate_bits_per_second: int
    burst_bytes: int
    def __init__(self, peers: _Optional[_Iterable[str]] = ..., rate_bits_per_second: _Optional[int] = ..., burst_bytes: _Optional[int] = ...) -> None: ...

class DropResponsesRequest(_message.Message):
    __slots__ = ("peers", "port", "probability")
    PEERS_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    PROBABILITY_FIELD_NUMBER: _ClassVar[int]
    peers: _containers.RepeatedScalarFieldContainer[str]
    port: int
    probability: float
    def __init__(self, peers: _Optional[_Iterable[str]] = ..., port: _Optional[int] = ..., probability: _Optional[float] = ...) -> None: ...

class DelayRequest(_message.Message):
    __slots__ = ("peers", "direction", "delay_ms", "jitter_ms")
    PEERS_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    JITTER_MS_FIELD_NUMBER: _ClassVar[int]
    peers: _containers.RepeatedScalarFieldContainer[str]
    direction: Direction
    delay_ms: int
    jitter_ms: int
    def __init__(self, peers: _Optional[_Iterable[str]] = ..., direction: _Optional[_Union[Direction, str]] = ..., delay_ms: _Optional[int] = ..., jitter_ms: _Optional[int] = ...) -> None: ...

class HealRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListRulesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Rule(_message.Message):
    __slots__ = ("id", "kind", "description", "commands")
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    COMMANDS_FIELD_NUMBER: _ClassVar[int]
    id: str
    kind: str
    description: str
    commands: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., kind: _Optional[str] = ..., description: _Optional[str] = ..., commands: _Optional[_Iterable[str]] = ...) -> None: ...

class RulesResponse(_message.Message):
    __slots__ = ("rules", "delay_mode", "iptables", "tc")
    RULES_FIELD_NUMBER: _ClassVar[int]
    DELAY_MODE_FIELD_NUMBER: _ClassVar[int]
    IPTABLES_FIELD_NUMBER: _ClassVar[int]
    TC_FIELD_NUMBER: _ClassVar[int]
    rules: _containers.RepeatedCompositeFieldContainer[Rule]
    delay_mode: str
    iptables: _containers.RepeatedScalarFieldContainer[str]
    tc: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, rules: _Optional[_Iterable[_Union[Rule, _Mapping]]] = ..., delay_mode: _Optional[str] = ..., iptables: _Optional[_Iterable[str]] = ..., tc: _Optional[_Iterable[str]] = ...) -> None: ...
