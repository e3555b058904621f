"""What the Kafka analysis keeps about one key (topic-partition).

Guarantees: a `KeyState` holds only dicts and sets of ints (values and
offsets as the history spells them) — no ops — so its size is proportional
to the number of distinct records of the key. A writer is the op index and
its OK / INFO / FAIL code packed in one int (checker.kafka.codes); an OK
writer replaces an INFO or FAIL one for the same value, never the other way
round.
"""
from __future__ import annotations


class KeyState:
    """Everything the analysis keeps about one key (topic-partition)."""

    __slots__ = ("off2val", "val2off", "writer", "read_ok", "unread", "failed",
                 "dup", "conflict", "acked", "max_read_off")

    def __init__(self) -> None:
        self.off2val: dict = {}      # offset -> first value seen there
        self.val2off: dict = {}      # value -> first offset seen for it
        self.writer: dict = {}       # value -> (op index << CODE_BITS) + type code
        self.read_ok: dict = {}      # value -> index of the first ok op that polled it
        self.unread: set = set()     # acknowledged values no ok poll has returned (yet)
        self.failed: set = set()     # values whose send failed (definitely not written)
        self.dup: dict = {}          # value -> set of offsets, when it sits at more than one
        self.conflict: dict = {}     # offset -> set of values, when more than one claims it
        self.acked = 0
        self.max_read_off = -1
