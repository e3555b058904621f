"""LogValidator: what a leader checks and rewrites in a produced batch before it is appended (Kafka's
LogValidator, with UnifiedLog's size checks).

Guarantees: `validate(batch, config)` answers either the batch to append or a BatchError with Kafka's
error code, never both and never an exception for bad input. The batch is checked as sent (size against
max.message.bytes, attributes, producer fields, CRC, its records walked once: record_batch.validate_batch);
under a compression.type other than `producer` that differs from the batch's codec it is rebuilt with the
topic's codec and level (records, headers, timestamps, producer fields and transactional bit kept) and
the rebuilt batch is held to max.message.bytes again, as UnifiedLog holds a batch whose size the
validation changed. Producer-state rules come after, in the partition's ProducerStateManager.
"""
from __future__ import annotations

from eoslab.common import record_batch as rb
from eoslab.common.errors import E
from eoslab.v1 import common_pb2
from services.broker.log_config import LogConfig


def validate(batch: common_pb2.RecordBatch, config: LogConfig) -> tuple[common_pb2.RecordBatch | None,
                                                                         rb.BatchError | None]:
    bad = rb.validate_batch(batch, config.max_message_bytes, config.compacted)
    if bad is not None:
        return None, bad
    source = rb.codec_of(batch)
    target = config.target_codec(source)
    if target == source:
        return batch, None
    rebuilt = rb.recompress(batch, target, config.compression_levels.get(target))
    if rebuilt.size_in_bytes > config.max_message_bytes:
        return None, rb.BatchError(E.MESSAGE_TOO_LARGE, f"batch of {rebuilt.size_in_bytes} bytes once "
                                   f"recompressed exceeds max.message.bytes {config.max_message_bytes}")
    return rebuilt, None
