"""What a leader knows of one follower, and when that follower counts as caught up (Kafka's
kafka.cluster.Replica).

Guarantees, as Kafka's rules: a fetch that reads up to the leader's log end
as of that fetch makes the follower caught up at that fetch's time; a fetch
that reads only up to the leader's log end as of the *previous* fetch makes
it caught up at the previous fetch's time (so a follower that always trails a
stream of small appends by one fetch stays in sync); a follower whose log end
equals the leader's is caught up whatever the time; on a leader change the
follower's times restart: now if it is in the ISR, 0 (never) if not. Times
are seconds of the leader's monotonic clock (`Time.monotonic()` of the
`Time` its Partition was given); nothing here reads a clock itself.
"""
from __future__ import annotations

from dataclasses import dataclass

NEVER = float("-inf")                   # a time longer ago than any lag, whatever the clock's origin


@dataclass(slots=True)
class Replica:
    log_end_offset: int = -1
    last_caught_up: float = 0.0
    last_fetch_time: float = 0.0
    last_fetch_leader_end: int = -1     # the leader's log end when the previous fetch came
    log_start_offset: int = -1          # the follower's, from its last fetch (-1: not fetched yet)

    @classmethod
    def for_new_leader(cls, now: float, in_sync: bool) -> "Replica":
        """Kafka's resetReplicaState(isNewLeader=true): nothing known of its log yet."""
        return cls(last_caught_up=now if in_sync else 0.0)

    def reset_for_reelection(self, now: float, in_sync: bool, leader_end: int) -> "Replica":
        """Kafka's resetReplicaState(isNewLeader=false): this broker led already; the log end is kept, and
        an out-of-sync follower must fetch again before it can rejoin."""
        t = now if in_sync else 0.0
        return Replica(self.log_end_offset, last_caught_up=t, last_fetch_time=t, last_fetch_leader_end=leader_end)

    def update_fetch_state(self, fetch_offset: int, fetch_time: float, leader_end: int,
                           log_start_offset: int = -1) -> None:
        """A fetch from this follower at `fetch_offset`, received when the leader's log ended at `leader_end`."""
        self.log_start_offset = log_start_offset
        if fetch_offset >= leader_end:
            self.last_caught_up = max(self.last_caught_up, fetch_time)
        elif fetch_offset >= self.last_fetch_leader_end:
            self.last_caught_up = max(self.last_caught_up, self.last_fetch_time)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_end = max(leader_end, self.last_fetch_leader_end)
        self.last_fetch_time = fetch_time

    def is_caught_up(self, leader_end: int, now: float, max_lag_s: float) -> bool:
        """Kafka's isCaughtUp: at the leader's log end, or caught up within the last `max_lag_s`."""
        return self.log_end_offset == leader_end or now - self.last_caught_up <= max_lag_s
