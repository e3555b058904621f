"""DelayedFetch: the fetch purgatory, where long polls wait for their partitions to move.

Guarantees: a long poll is registered on its partitions before it reads, so no
change after the read is missed; it is woken only by its own partitions (a
follower's when a log end moves, a consumer's when a high watermark moves,
both on a change of role) or when its caller went away (`wake_fetches`); at
most MAX_PARKED_CLIENT_FETCHES client fetches wait at a time (a replica's
fetches are not counted), so long polls never take every server thread.
Mixed into ReplicaManager, whose `fetch` parks and unparks here.
"""
from __future__ import annotations

import threading

from eoslab.v1 import broker_pb2
from services.broker.partition import LOG_MOVED, ROLE_MOVED, Partition

MAX_PARKED_CLIENT_FETCHES = 16      # of the server's 128 threads; replicas' fetches are not counted


class _ParkedFetch:
    """One long poll waiting for its partitions: a replica's (woken when a log end moves) or a
    consumer's (woken when a high watermark moves)."""
    __slots__ = ("replica", "keys", "cancelled", "event")

    def __init__(self, replica: bool, keys: set[tuple[str, int]], cancelled: threading.Event | None):
        self.replica = replica
        self.keys = keys
        self.cancelled = cancelled
        self.event = threading.Event()


class DelayedFetchPurgatory:
    """The parked long polls of a ReplicaManager, by partition."""

    def _init_fetch_purgatory(self) -> None:
        self._parked_lock = threading.Lock()
        self._parked: dict[tuple[str, int], set[_ParkedFetch]] = {}   # partition -> long polls waiting on it
        self._all_parked: set[_ParkedFetch] = set()
        self.parked_client_fetches = 0

    def _partition_changed(self, p: Partition, what: int) -> None:
        """Wake the long polls that wait on this partition for what moved: a follower's fetch reads up to
        the log end, a consumer's up to the high watermark (the LSO only moves with it)."""
        with self._parked_lock:
            parked = self._parked.get((p.topic, p.partition))
            if not parked:
                return
            for w in parked:
                if what == ROLE_MOVED or w.replica == (what == LOG_MOVED):
                    w.event.set()

    def wake_fetches(self) -> None:
        """Wake the parked long polls whose caller went away (their `cancelled` is set): they return."""
        with self._parked_lock:
            for w in self._all_parked:
                if w.cancelled is not None and w.cancelled.is_set():
                    w.event.set()

    def _park(self, req: broker_pb2.FetchRequest, cancelled: threading.Event | None) -> "_ParkedFetch | None":
        """Register a long poll on its partitions before it reads, so no change after the read is missed;
        None when MAX_PARKED_CLIENT_FETCHES client polls already wait."""
        w = _ParkedFetch(req.replica_id >= 0, {(fp.topic, fp.partition) for fp in req.partitions}, cancelled)
        with self._parked_lock:
            if not w.replica:
                if self.parked_client_fetches >= MAX_PARKED_CLIENT_FETCHES:
                    return None
                self.parked_client_fetches += 1
            for key in w.keys:
                self._parked.setdefault(key, set()).add(w)
            self._all_parked.add(w)
        return w

    def _unpark(self, w: "_ParkedFetch") -> None:
        with self._parked_lock:
            if not w.replica:
                self.parked_client_fetches -= 1
            for key in w.keys:
                s = self._parked.get(key)
                if s is not None:
                    s.discard(w)
                    if not s:
                        del self._parked[key]
            self._all_parked.discard(w)
