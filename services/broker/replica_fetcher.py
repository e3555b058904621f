"""ReplicaFetcherManager and ReplicaFetcherThread: followers pull from their leaders.

Guarantees: a partition that becomes a follower first truncates by leader
epoch (OffsetsForLeaderEpoch, KIP-101/279) and only then fetches; fetches
carry the follower's id and its current leader epoch, so a stale leader
answers FENCED_LEADER_EPOCH instead of feeding old data; batches are appended
with the leader's offsets and epochs, and only to the fetch state and at the
offset they were asked for: an answer that a LeaderAndIsr made stale while it
was out (the partition truncated, removed or re-added) is dropped, as Kafka's
fetcher drops it; one thread per leader broker. Fetches
go over one ReplicaFetch stream per leader (a fetch session: one message each
way per fetch rather than a call); a fetch unanswered within FETCH_TIMEOUT_S
(a leader cut off by a partition, or paused) ends the session, and the next
fetch opens a new one, as a failed Fetch call would be retried. A partition
whose truncation or fetch answers an error (the leader moved, a stale or
unknown leader epoch) sits out PARTITION_BACKOFF_S on its own, as Kafka's
fetcher delays a partition with an error: the other partitions of the
same leader go on being fetched meanwhile. These deadlines, the watchdog's
checks (every WATCHDOG_CHECK_S) and the fetcher's idle backoffs are on the
`Time` the manager was given: an idle or backing-off fetcher waits for that
clock to move (or for its stop), never sleeps through a shutdown.
"""
from __future__ import annotations

import enum
import logging
import queue
import threading
from dataclasses import dataclass

import grpc

from eoslab.v1 import broker_pb2, broker_pb2_grpc
from eoslab.common import rpc
from eoslab.common.errors import E
from eoslab.common.time import SYSTEM, Time

log = logging.getLogger(__name__)
FETCH_TIMEOUT_S = 10.0      # a fetch's answer, its long poll included (max_wait_ms 200), must come within this
PARTITION_BACKOFF_S = 0.05  # a partition whose answer was an error is left out of the fetches for this long
WATCHDOG_CHECK_S = 1.0      # how often a session's watchdog looks for an overdue answer
IDLE_BACKOFF_S = 0.05       # nothing to fetch, or no address for the leader
RPC_ERROR_BACKOFF_S = 0.1   # the session or a call failed: a new session after this
BUG_BACKOFF_S = 0.2         # anything else went wrong
NOTHING_TO_FETCH_BACKOFF_S = 0.01   # every ready partition is truncating: a short pause before the next round
OFFSETS_FOR_LEADER_EPOCH_TIMEOUT_S = 5.0
REPLICA_FETCH_WAIT_MAX_MS = 200                 # Kafka's replica.fetch.wait.max.ms (500 there)
REPLICA_FETCH_MAX_BYTES = 4 << 20               # per partition (Kafka's replica.fetch.max.bytes: 1 MiB)
REPLICA_FETCH_RESPONSE_MAX_BYTES = 8 << 20      # per answer (Kafka's replica.fetch.response.max.bytes: 10 MiB)


class SessionClosed(Exception):
    """The fetch session is over (closed, or the leader ended its stream): open a new one."""


class FetchSession:
    """One open ReplicaFetch stream to a leader: `fetch` sends a request and waits for its answer.
    Answers come in request order; one request is outstanding at a time. A watchdog ends the stream
    when an answer is overdue (a stream has no per-message deadline), and any error ends it for good:
    the caller opens a new session."""

    def __init__(self, stub, name: str, time: Time = SYSTEM):
        self.time = time
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._call = stub.ReplicaFetch(iter(self._requests.get, None))
        self._deadline = 0.0              # monotonic time by which the outstanding answer is due; 0: none
        self.closed = False
        self._wake = threading.Event()
        threading.Thread(target=self._watch, name=f"{name}-watchdog", daemon=True).start()

    def _watch(self) -> None:
        while not self.closed:
            self.time.wait_event(self._wake, WATCHDOG_CHECK_S)
            d = self._deadline
            if d and self.time.monotonic() > d:
                log.info("fetch session: no answer within %.0f s; closing it", FETCH_TIMEOUT_S)
                self.close()

    def fetch(self, req: broker_pb2.FetchRequest) -> broker_pb2.FetchResponse:
        if self.closed:
            raise SessionClosed("fetch session closed")
        self._deadline = self.time.monotonic() + FETCH_TIMEOUT_S
        self._requests.put(req)
        try:
            return next(self._call)
        except StopIteration:
            self.close()
            raise SessionClosed("the leader ended the fetch session") from None
        except BaseException:
            self.close()
            raise
        finally:
            self._deadline = 0.0

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._requests.put(None)      # ends the request stream
            self._call.cancel()
            self._wake.set()


def truncation_target(part, leader_epoch: int, leader_end: int) -> tuple[int, bool]:
    """Where a follower truncates after the leader answered OffsetsForLeaderEpoch with (epoch, end
    offset), and whether truncation is complete (Kafka's AbstractFetcherThread, KIP-279): when the
    follower does not have the epoch the leader answered with, it cuts to the end of its largest
    epoch below it and asks again, until both name the same epoch."""
    if leader_epoch == -1:
        return (part.log_end_offset if part.epochs.latest_epoch == -1 else 0), True
    found, own_end = part.end_offset_for_epoch(leader_epoch)
    if own_end < 0:
        return min(leader_end, part.log_end_offset), True
    if found != leader_epoch:
        return min(own_end, part.log_end_offset), False
    return min(own_end, leader_end, part.log_end_offset), True


class ReplicaState(enum.Enum):
    """A followed partition's state in its fetcher (Kafka's ReplicaState: Truncating, Fetching)."""
    TRUNCATING = "Truncating"
    FETCHING = "Fetching"


# target -> the states it may be entered from; a partition starts Truncating (Kafka: truncate on becoming
# a follower, then fetch; an OFFSET_OUT_OF_RANGE sends it back to truncating).
VALID_PREVIOUS = {ReplicaState.TRUNCATING: frozenset({ReplicaState.FETCHING}),
                  ReplicaState.FETCHING: frozenset({ReplicaState.TRUNCATING})}


@dataclass
class PartitionFetchState:
    """One followed partition (Kafka's PartitionFetchState): its leader epoch, state and backoff."""
    partition: object                       # services.broker.partition.Partition
    leader_epoch: int
    state: ReplicaState = ReplicaState.TRUNCATING
    retry_at: float = 0.0                   # sits rounds out until this monotonic time (Kafka: its delay)

    def transition_to(self, target: ReplicaState) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise RuntimeError(f"{self.partition.topic}-{self.partition.partition}: {self.state.value} -> "
                               f"{target.value} is not a valid fetcher transition")
        self.state = target

    def delay(self, now: float, seconds: float) -> None:
        self.retry_at = now + seconds

    def is_ready(self, now: float) -> bool:
        return self.retry_at <= now


class ReplicaFetcherThread(threading.Thread):
    def __init__(self, manager: "ReplicaFetcherManager", leader_id: int):
        super().__init__(name=f"replica-fetcher-{leader_id}", daemon=True)
        self.manager = manager
        self.time: Time = manager.time
        self.leader_id = leader_id
        self.lock = threading.Lock()
        self.partitions: dict[tuple[str, int], PartitionFetchState] = {}
        self.running = True
        self._stopped = threading.Event()    # ends an idle or backoff wait at once
        self.session: FetchSession | None = None
        self._session_stub = None
        self._round = 0                      # rotates the partitions' order in each fetch

    def add(self, partition, leader_epoch: int) -> None:
        with self.lock:
            self.partitions[(partition.topic, partition.partition)] = PartitionFetchState(partition, leader_epoch)

    def remove(self, tp) -> None:
        with self.lock:
            self.partitions.pop(tp, None)

    def _stub(self):
        addr = self.manager.broker_address(self.leader_id)
        return self.manager.channels.stub(addr, broker_pb2_grpc.BrokerStub) if addr else None

    def stop(self) -> None:
        self.running = False
        self._stopped.set()
        self.close_session()

    def _backoff(self, seconds: float) -> None:
        self.time.wait_event(self._stopped, seconds)

    def run(self) -> None:
        while self.running:
            self.do_work()

    def do_work(self) -> None:
        """One round (Kafka's AbstractFetcherThread.doWork): truncate the partitions that must, then
        fetch the others; a partition still in its backoff (`retry_at`) sits the round out."""
        now = self.time.monotonic()
        with self.lock:
            parts = {tp: st for tp, st in self.partitions.items() if st.is_ready(now)}
        stub = self._stub()
        if not parts or stub is None:
            self._backoff(IDLE_BACKOFF_S)
            return
        try:
            self._truncate(stub, {tp: st for tp, st in parts.items() if st.state is ReplicaState.TRUNCATING})
            self._fetch(stub, {tp: st for tp, st in parts.items() if st.state is ReplicaState.FETCHING})
        except (grpc.RpcError, SessionClosed) as e:
            log.debug("fetch from broker %d failed: %s", self.leader_id,
                      e.code() if isinstance(e, grpc.RpcError) else type(e).__name__)
            self.close_session()
            self._backoff(RPC_ERROR_BACKOFF_S)
        except Exception:  # noqa: BLE001 - keep fetching
            log.exception("replica fetcher for leader %d", self.leader_id)
            self._backoff(BUG_BACKOFF_S)

    def _truncate(self, stub, parts: dict) -> None:
        if not parts:
            return
        req = broker_pb2.OffsetsForLeaderEpochRequest(replica_id=self.manager.broker_id)
        order = list(parts.items())
        self._round += 1                                   # round robin, as Kafka's fetcher moves a fetched
        k = self._round % len(order)                       # partition to the end: the leader fills its byte
        for (t, p), st in order[k:] + order[:k]:           # limits in request order
            req.partitions.add(topic=t, partition=p, current_leader_epoch=st.leader_epoch,
                               leader_epoch=st.partition.epochs.latest_epoch)
        resp = stub.OffsetsForLeaderEpoch(req, timeout=OFFSETS_FOR_LEADER_EPOCH_TIMEOUT_S)
        for r in resp.partitions:
            tp = (r.topic, r.partition)
            st = parts.get(tp)
            if st is None or not self._current(tp, st):      # re-added or removed meanwhile: stale
                continue
            part = st.partition
            if r.error != E.NONE:
                st.delay(self.time.monotonic(), PARTITION_BACKOFF_S)
                continue
            target, done = truncation_target(part, r.leader_epoch, r.end_offset)
            part.truncate_to(target)
            if done:
                with self.lock:
                    if tp in self.partitions and self.partitions[tp] is st:
                        st.transition_to(ReplicaState.FETCHING)

    def _current(self, tp, st: PartitionFetchState) -> bool:
        """Is `st` still the partition's fetch state (not removed or re-added by a LeaderAndIsr since)?"""
        return self.partitions.get(tp) is st

    def _fetch(self, stub, parts: dict) -> None:
        if not parts:
            self._backoff(NOTHING_TO_FETCH_BACKOFF_S)
            return
        req = broker_pb2.FetchRequest(replica_id=self.manager.broker_id, max_wait_ms=REPLICA_FETCH_WAIT_MAX_MS,
                                      max_bytes=REPLICA_FETCH_RESPONSE_MAX_BYTES)
        order = list(parts.items())
        self._round += 1                                   # round robin, as Kafka's fetcher moves a fetched
        k = self._round % len(order)                       # partition to the end: the leader fills its byte
        requested: dict = {}
        for (t, p), st in order[k:] + order[:k]:           # limits in request order
            requested[(t, p)] = st.partition.log_end_offset
            req.partitions.add(topic=t, partition=p, fetch_offset=requested[(t, p)],
                               current_leader_epoch=st.leader_epoch, partition_max_bytes=REPLICA_FETCH_MAX_BYTES,
                               log_start_offset=st.partition.log.log_start_offset)
        if self.session is None or self.session.closed or self._session_stub is not stub:
            self.close_session()
            self.session, self._session_stub = FetchSession(stub, self.name, self.time), stub
        resp = self.session.fetch(req)
        for r in resp.partitions:
            tp = (r.topic, r.partition)
            st = parts.get(tp)
            if st is None:
                continue
            with self.lock:
                # Kafka's processFetchRequest: an answer counts only for the fetch state it was asked for, at
                # the offset it was asked at; a LeaderAndIsr that truncated, removed or re-added the
                # partition while the fetch was out makes it stale, and it is dropped
                if not self._current(tp, st) or st.partition.log_end_offset != requested[tp]:
                    continue
                if r.error == E.NONE:
                    st.partition.append_as_follower(r.batches, r.high_watermark)
            if r.error == E.NONE:
                st.partition.follow_log_start_offset(r.log_start_offset)
            elif r.error == E.OFFSET_OUT_OF_RANGE and r.log_start_offset > st.partition.log_end_offset:
                st.partition.truncate_fully_and_start_at(r.log_start_offset)     # records deleted past our end
            elif r.error == E.OFFSET_OUT_OF_RANGE:
                st.transition_to(ReplicaState.TRUNCATING)
            else:   # the leader moved or does not know yet: this partition waits for LeaderAndIsr, not the others
                st.delay(self.time.monotonic(), PARTITION_BACKOFF_S)

    def close_session(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None


class ReplicaFetcherManager:
    def __init__(self, broker_id: int, broker_address, time: Time = SYSTEM):
        self.time = time
        self.broker_id = broker_id
        self.broker_address = broker_address   # broker id -> "host:port" | None
        self.channels = rpc.ChannelCache()
        self.threads: dict[int, ReplicaFetcherThread] = {}
        self.lock = threading.Lock()

    def add(self, partition, leader_id: int, leader_epoch: int) -> None:
        with self.lock:
            tp = (partition.topic, partition.partition)
            for lid, th in self.threads.items():
                if lid != leader_id:
                    th.remove(tp)
            th = self.threads.get(leader_id)
            if th is None:
                th = self.threads[leader_id] = ReplicaFetcherThread(self, leader_id)
                th.start()
            th.add(partition, leader_epoch)

    def remove(self, tp) -> None:
        with self.lock:
            for th in self.threads.values():
                th.remove(tp)

    def shutdown(self) -> None:
        with self.lock:
            for th in self.threads.values():
                th.stop()
        self.channels.close_all()
