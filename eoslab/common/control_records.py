"""Control records: the one record of a COMMIT or ABORT control batch, as Kafka writes it.

Guarantees: `control_record(committed, coordinator_epoch)` gives Kafka's
EndTransactionMarker key and value (key = version i16 0 | type i16, 0 ABORT
and 1 COMMIT; value = version i16 0 | coordinator epoch i32), and
`parse_control_record` reads them back as (type, coordinator epoch), with a
ValueError for a key too short to say which. Clients (read_committed) and
services (markers, the aborted-transaction index) both use this module.
"""
from __future__ import annotations

import struct

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
ABORT, COMMIT = 0, 1


def control_record(committed: bool, coordinator_epoch: int) -> tuple[bytes, bytes]:
    return _KEY.pack(0, COMMIT if committed else ABORT), _VALUE.pack(0, coordinator_epoch)


def parse_control_record(key: bytes | None, value: bytes | None) -> tuple[int, int]:
    """(type, coordinator epoch); ValueError when malformed."""
    if key is None or len(key) < _KEY.size:
        raise ValueError("control record key too short")
    _, kind = _KEY.unpack_from(key)
    epoch = _VALUE.unpack_from(value)[1] if value is not None and len(value) >= _VALUE.size else -1
    return kind, epoch
