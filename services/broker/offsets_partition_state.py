"""The state of one __consumer_offsets partition as of its log, and the lab's record encoding there.

Guarantees:
- `OffsetsPartitionState.apply_batch` replays the partition's batches in log order: a plain offset
  record is committed at once, a transactional one waits in `pending` for its producer's COMMIT
  marker (an ABORT drops it), and a group metadata record replaces what was stored for the group
  (a tombstone, value None, removes it);
- the encoding is the lab's JSON, one record per key: offsets key = {"g", "t", "p"}, value =
  {"o", "m"} and "e", the committed leader epoch, when the commit carried one; classic group
  metadata key = {"g", "meta": 1}, value = membership.snapshot; a consumer-protocol (KIP-848) group's
  key = {"g", "cg": 1}, value = ConsumerGroup.to_record (its epochs, subscription, target assignment
  and members), a null value its tombstone;
- an offset's tombstone (a null value, plain batch) removes the committed offset and the open
  transactions' pending ones of that partition;
- a group id is one kind of group: of a classic and a consumer group record of the same id, the later
  one in the log wins (a consumer group taking an empty classic group's id, or the reverse).
"""
from __future__ import annotations

import json

from eoslab.common import record_batch as rb


def _key(group: str, topic: str, partition: int) -> bytes:
    return json.dumps({"g": group, "t": topic, "p": partition}, separators=(",", ":")).encode()


def _meta_key(group: str) -> bytes:
    return json.dumps({"g": group, "meta": 1}, separators=(",", ":")).encode()


def _consumer_group_key(group: str) -> bytes:
    return json.dumps({"g": group, "cg": 1}, separators=(",", ":")).encode()


def _value(offset: int, metadata: str, leader_epoch: int = -1) -> bytes:
    v = {"o": offset, "m": metadata}
    if leader_epoch >= 0:
        v["e"] = leader_epoch
    return json.dumps(v, separators=(",", ":")).encode()


class OffsetsPartitionState:
    """Offsets of the groups of one __consumer_offsets partition, as of its log."""

    def __init__(self, leader_epoch: int):
        self.leader_epoch = leader_epoch
        # group -> (topic, partition) -> (offset, metadata, committed leader epoch or -1)
        self.offsets: dict[str, dict[tuple[str, int], tuple[int, str, int]]] = {}
        self.pending: dict[int, dict[str, dict[tuple[str, int], tuple[int, str, int]]]] = {}   # pid -> group -> ...
        self.groups: dict[str, dict | None] = {}   # group -> its stored metadata (membership.snapshot)
        self.consumer_groups: dict[str, dict | None] = {}   # KIP-848 group -> ConsumerGroup.to_record

    def apply_batch(self, b) -> None:
        if b.is_control:
            try:
                key, _, _ = next(rb.iter_records(b.records))
                committed = key is not None and len(key) >= 4 and key[3] == 1
            except (StopIteration, ValueError):
                committed = False
            self.complete(b.producer_id, committed)
            return
        for key, value, _ in rb.iter_records(b.records):
            k = json.loads(key)
            v = json.loads(value) if value else None
            if k.get("meta") or k.get("cg"):
                self.stored_group(k["g"], v, bool(k.get("cg")))
                continue
            tp, entry = (k["t"], k["p"]), (v["o"], v.get("m", ""), v.get("e", -1)) if v else None
            if b.is_transactional:
                self.pending.setdefault(b.producer_id, {}).setdefault(k["g"], {})[tp] = entry
            elif entry is not None:
                self.offsets.setdefault(k["g"], {})[tp] = entry
            else:
                self.remove_offset(k["g"], tp)

    def remove_offset(self, group: str, tp: tuple[str, int]) -> None:
        """An offset's tombstone (OffsetDelete, DeleteGroups): the committed offset goes, and so do the
        open transactions' pending commits of it (Kafka's OffsetMetadataManager.replay)."""
        offs = self.offsets.get(group)
        if offs is not None:
            offs.pop(tp, None)
            if not offs:
                del self.offsets[group]
        for groups in self.pending.values():
            groups.get(group, {}).pop(tp, None)

    def offset_keys(self, group: str) -> set[tuple[str, int]]:
        """The group's partitions with a committed or a pending offset."""
        out = set(self.offsets.get(group, {}))
        for groups in self.pending.values():
            out |= {tp for tp, entry in groups.get(group, {}).items() if entry is not None}
        return out

    def knows(self, group: str) -> bool:
        """The log holds something of the group: offsets (committed or pending) or its record."""
        return bool(self.offset_keys(group)) or self.groups.get(group) is not None or \
            self.consumer_groups.get(group) is not None

    def stored_group(self, group: str, stored: dict | None, consumer: bool) -> None:
        """A group's record is in the log: it is the group now (of either kind)."""
        mine, other = (self.consumer_groups, self.groups) if consumer else (self.groups, self.consumer_groups)
        mine[group] = stored
        if stored is not None and other.get(group) is not None:
            other[group] = None

    def complete(self, producer_id: int, committed: bool) -> None:
        groups = self.pending.pop(producer_id, {})
        if committed:
            for g, offs in groups.items():
                for tp, entry in offs.items():
                    if entry is not None:
                        self.offsets.setdefault(g, {})[tp] = entry

    def has_pending(self, group: str, tp: tuple[str, int]) -> bool:
        return any(tp in groups.get(group, {}) for groups in self.pending.values())
