"""StoredGroups: how ConsumerGroupManager keeps its consumer groups in __consumer_offsets, as Kafka's
GroupMetadataManager writes and replays its consumer group records.

Guarantees:
- `_persisted(group, change)` runs a change holding the manager's `lock` (its caller holds the group's
  shard lock); when the group's stored form (ConsumerGroup.to_record) changed, it is handed to the
  manager's `store`, with `lock` released, before the change is answered; a store that fails, or a
  change that raises, is undone (the group, its sessions and
  rebalance timers as before: Kafka's timeline reverts what it could not write), so a client is never
  told of a change the log lacks;
- `delete_group` stores the tombstone (None) before the group is forgotten;
- `load(group, stored)` installs a stored group (None: none) in a coordinator that now serves it, its
  members at their stored epochs and assignments, each with a fresh session timeout (and a rebalance
  timeout when it still has partitions to revoke), as Kafka's onLoaded schedules them.
"""
from __future__ import annotations

import json

from eoslab.common.errors import E
from services.broker.consumer_group import ConsumerGroup
from services.broker.consumer_group_member import GroupError, MemberState


class StoredGroups:
    """Mixed into ConsumerGroupManager (its lock, shard_lock, groups, sessions, rebalances, store, time)."""

    def _image(self, group_id: str) -> str | None:
        g = self.groups.get(group_id)
        return None if g is None else json.dumps(g.to_record(), sort_keys=True, separators=(",", ":"))

    def _persisted(self, group_id: str, change):
        """change() holding self.lock, then stored (self.lock released: the caller's shard lock keeps the
        group's other changes out) when it changed the group; undone when it raised or the store failed
        (a GroupError with the store's error)."""
        with self.lock:
            before = self._image(group_id)
            timers = ({k: v for k, v in self.sessions.items() if k[0] == group_id},
                      {k: v for k, v in self.rebalances.items() if k[0] == group_id})
            try:
                out = change()
            except BaseException:
                if self._image(group_id) != before:
                    self._put_back(group_id, before, timers)
                raise
            after = self._image(group_id)
        if after == before:
            return out
        try:
            err = self.store(group_id, None if after is None else json.loads(after))
            if err != E.NONE:
                raise GroupError(err, f"group {group_id} not stored ({err})")
        except BaseException:
            with self.lock:
                self._put_back(group_id, before, timers)
            raise
        return out

    def _put_back(self, group_id: str, image: str | None, timers) -> None:
        if image is None:
            self.remove_group(group_id)
            return
        old = ConsumerGroup.from_record(group_id, json.loads(image))
        g = self.groups.setdefault(group_id, old)
        if g is not old:
            g.__dict__.update(old.__dict__)        # in place: callers may hold the group
        for table, saved in zip((self.sessions, self.rebalances), timers):
            for k in [k for k in table if k[0] == group_id]:
                del table[k]
            table.update(saved)

    def load(self, group_id: str, stored: dict | None) -> None:
        """Install the stored group (None: there is none) in a coordinator that now serves it."""
        with self.shard_lock(group_id), self.lock:
            self.remove_group(group_id)
            if stored is None:
                return
            g = self.groups[group_id] = ConsumerGroup.from_record(group_id, stored)
            now = self.time.monotonic()
            for m in g.members.values():
                self.sessions[(group_id, m.member_id)] = now + self.session_ms(group_id) / 1000.0
                if m.state == MemberState.UNREVOKED_PARTITIONS:
                    self.rebalances[(group_id, m.member_id)] = (now + max(m.rebalance_timeout_ms, 0) / 1000.0,
                                                                m.member_epoch)

    def delete_group(self, group_id: str) -> int:
        """Store the group's tombstone, then forget it (Kafka: an empty consumer group a classic join
        converts); the store's error, the group kept, when it fails."""
        with self.shard_lock(group_id):
            err = self.store(group_id, None)
            if err == E.NONE:
                self.remove_group(group_id)
            return err
