"""KafkaConsumer: reads partitions from their leaders (assign / seek / poll, or subscribe with a group).

Guarantees: records of a partition come back in offset order, each offset at
most once per position (a batch that starts before the position is trimmed),
control batches are never returned; a leader change or a fenced leader epoch
makes it refresh metadata and retry, not fail. With
isolation_level="read_committed" the broker returns data only below the last
stable offset, and records of aborted transactions (from the aborted list
the broker sends) are dropped, as Kafka's fetcher does. With a group_id,
`subscribe` joins the group (group.py); positions start at the committed
offsets (waiting while a transactional commit is pending), else at the
beginning. As Kafka's Fetcher, each leader has at most one fetch in flight;
one still waiting when `poll` returns is kept, and its answer counts only for
partitions whose position has not moved since it was sent (a seek or a new
assignment drops it). A leader whose fetch failed (the call, or a partition
error that needs new metadata) gets no fetch for `retry_backoff_ms`, and a
poll with nothing to send waits out that backoff rather than spinning, as
Kafka's retry.backoff.ms. Every deadline, backoff and wait (poll's timeout,
the leader backoff, list_offsets' retries, read_all) reads the `Time` given,
which the consumer hands to its metadata and group membership.
"""
from __future__ import annotations

import collections
import threading
from dataclasses import dataclass

import grpc

from eoslab.common.errors import E, NEEDS_METADATA, KafkaError
from eoslab.common.time import SYSTEM, Time
from clients.metadata import ClusterMetadata
from eoslab.v1 import broker_pb2
from eoslab.common import record_batch as rb

LIST_OFFSETS_TIMEOUT_S = 5.0    # one ListOffsets call to a partition's leader
RETRY_BACKOFF_S = 0.1           # before asking again after a leader change (Kafka's retry.backoff.ms default, 100 ms)
DEFAULT_API_TIMEOUT_S = 60.0    # how long end/beginning offsets keep asking (Kafka's default.api.timeout.ms)


@dataclass(frozen=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    producer_id: int = -1
    producer_epoch: int = -1
    sequence: int = -1


class KafkaConsumer:
    def __init__(self, bootstrap: str, isolation_level: str = "read_uncommitted",
                 max_wait_ms: int = 200, fetch_max_bytes: int = 4 << 20, group_id: str | None = None,
                 session_timeout_ms: int = 6000, heartbeat_interval_ms: int = 500, retry_backoff_ms: int = 100,
                 time: Time = SYSTEM):
        if isolation_level not in ("read_uncommitted", "read_committed"):
            raise ValueError("isolation_level must be read_uncommitted or read_committed")
        self.time = time
        self.metadata = ClusterMetadata(bootstrap, time=time)
        self.isolation = (broker_pb2.READ_COMMITTED if isolation_level == "read_committed"
                          else broker_pb2.READ_UNCOMMITTED)
        self.max_wait_ms = max_wait_ms
        self.fetch_max_bytes = fetch_max_bytes
        self._fetch_round = 0          # rotates the partitions' order in each leader's fetch
        self.positions: dict[tuple[str, int], int] = {}
        self._fetches: dict = {}                    # fetch in flight -> (leader address, {tp: fetch offset})
        self._fetch_errors: list[KafkaError] = []   # partition errors of answered fetches, raised by poll
        self._answered: collections.deque = collections.deque()   # fetches that have answered, in order
        self._answered_cond = threading.Condition(threading.Lock())
        self.retry_backoff = retry_backoff_ms / 1000.0
        self._backoff: dict[str, float] = {}        # leader address -> no fetch to it before this time
        self.group = None
        if group_id:
            from clients.group import ConsumerCoordinator
            self.group = ConsumerCoordinator(self.metadata, group_id, session_timeout_ms,
                                             heartbeat_interval_ms=heartbeat_interval_ms, time=time)

    def subscribe(self, topics: list[str]) -> None:
        if self.group is None:
            raise KafkaError(E.INVALID_GROUP_ID, "subscribe needs a group_id")
        self.group.topics = list(topics)
        self.group.assignment = None

    def _ensure_group(self) -> None:
        g = self.group
        if g is None or not g.topics:
            return
        g.maybe_heartbeat()
        if g.need_rejoin():
            tps = g.join()
            committed = g.committed(tps) if tps else {}
            self.positions = {tp: committed.get(tp, -1) for tp in tps}

    def group_metadata(self):
        if self.group is None:
            raise KafkaError(E.INVALID_GROUP_ID, "no group_id")
        return self.group.group_metadata()

    def commit(self, offsets: dict[tuple[str, int], int] | None = None) -> None:
        """Commit offsets (default: the current positions) with the group's generation and member id."""
        if self.group is None:
            raise KafkaError(E.INVALID_GROUP_ID, "commit needs a group_id")
        self.group.commit(offsets if offsets is not None else {tp: o for tp, o in self.positions.items() if o >= 0})

    def committed(self, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        if self.group is None:
            raise KafkaError(E.INVALID_GROUP_ID, "committed needs a group_id")
        return self.group.committed(tps)

    def assign(self, partitions: list[tuple[str, int]]) -> None:
        self.positions = {tp: self.positions.get(tp, -1) for tp in partitions}

    def assignment(self) -> list[tuple[str, int]]:
        return list(self.positions)

    def seek(self, tp: tuple[str, int], offset: int) -> None:
        self.positions[tp] = offset

    def _leader(self, tp) -> tuple[int, str, int]:
        ld = self.metadata.leader(*tp)
        if ld is None:
            self.metadata.refresh([tp[0]])
            ld = self.metadata.leader(*tp)
        if ld is None:
            raise KafkaError(E.LEADER_NOT_AVAILABLE, f"no leader for {tp[0]}-{tp[1]}")
        return ld

    def list_offsets(self, tps: list[tuple[str, int]], timestamp: int) -> dict[tuple[str, int], int]:
        out = {}
        deadline = self.time.monotonic() + DEFAULT_API_TIMEOUT_S
        for tp in tps:
            while True:
                try:
                    _, addr, _ = self._leader(tp)
                    r = self.metadata.stub(addr).ListOffsets(broker_pb2.ListOffsetsRequest(
                        isolation_level=self.isolation,
                        partitions=[broker_pb2.ListOffsetsPartition(topic=tp[0], partition=tp[1],
                                                                    timestamp=timestamp)]), timeout=LIST_OFFSETS_TIMEOUT_S)
                    pr = r.partitions[0]
                    if pr.error == E.NONE:
                        out[tp] = pr.offset
                        break
                    if pr.error not in NEEDS_METADATA:
                        raise KafkaError(pr.error, f"ListOffsets {tp[0]}-{tp[1]}")
                except grpc.RpcError:
                    pass
                except KafkaError as e:
                    if e.code not in NEEDS_METADATA and e.code != E.LEADER_NOT_AVAILABLE:
                        raise
                if self.time.monotonic() > deadline:
                    raise KafkaError(E.LEADER_NOT_AVAILABLE, f"ListOffsets {tp[0]}-{tp[1]} kept failing for "
                                                             f"{DEFAULT_API_TIMEOUT_S:.0f} s")
                self.time.sleep(RETRY_BACKOFF_S)
                self.metadata.refresh([tp[0]])
        return out

    def beginning_offsets(self, tps):
        return self.list_offsets(tps, -2)

    def end_offsets(self, tps):
        return self.list_offsets(tps, -1)

    def seek_to_beginning(self, tps=None) -> None:
        for tp, off in self.beginning_offsets(list(tps or self.positions)).items():
            self.positions[tp] = off

    def poll(self, timeout_ms: int = 500) -> list[ConsumerRecord]:
        """Records from the fetches that have answered, waiting up to `timeout_ms` for the first ones.
        As Kafka's Fetcher: at most one fetch in flight per leader, sent to every leader without one; a
        fetch that has not answered when poll returns stays in flight, and its answer is used by a later
        poll for each partition whose position is still the offset it asked from (else dropped)."""
        self._ensure_group()
        unset = [tp for tp, off in self.positions.items() if off < 0]
        if unset:
            self.seek_to_beginning(unset)
        out: list[ConsumerRecord] = []
        end = self.time.monotonic() + timeout_ms / 1000.0
        while True:
            self._send_fetches(timeout_ms)
            if not self._fetches:
                left = end - self.time.monotonic()
                if left <= 0 or not any(off >= 0 for off in self.positions.values()):
                    return out
                self.time.sleep(min(left, self.retry_backoff))   # every leader is backing off, or none is known
                continue
            answered = self._take_answered(max(0.0, end - self.time.monotonic()))
            if not answered:
                return out
            while answered:                  # the first answer and every other that is in already
                for call in answered:
                    self._complete(call, out)
                answered = self._take_answered(0.0)
            if self._fetch_errors:
                errors, self._fetch_errors = self._fetch_errors, []
                if not out:
                    raise errors[0]
                return out
            if out or self.time.monotonic() >= end:
                return out

    def _answer(self, call) -> None:
        """A fetch's done callback (on gRPC's thread): queue it for poll."""
        with self._answered_cond:
            self._answered.append(call)
            self._answered_cond.notify_all()

    def _take_answered(self, timeout: float) -> list:
        """The fetches that have answered, waiting up to `timeout` seconds of the clock for the first."""
        with self._answered_cond:
            if not self._answered and timeout > 0:
                self.time.wait_for(self._answered_cond, lambda: bool(self._answered), timeout)
            out = list(self._answered)
            self._answered.clear()
            return out

    def _send_fetches(self, timeout_ms: int) -> None:
        """A fetch to each leader of an assigned partition that has none in flight, for its partitions
        not already asked for."""
        asked = {tp for _, offsets in self._fetches.values() for tp in offsets}
        now = self.time.monotonic()
        by_leader: dict[str, list] = {}
        for tp, off in self.positions.items():
            if tp in asked or off < 0:
                continue
            try:
                _, addr, epoch = self._leader(tp)
            except KafkaError:
                continue
            if self._backoff.get(addr, 0.0) > now or any(a == addr for a, _ in self._fetches.values()):
                continue
            by_leader.setdefault(addr, []).append(broker_pb2.FetchPartition(
                topic=tp[0], partition=tp[1], fetch_offset=off, current_leader_epoch=epoch,
                partition_max_bytes=self.fetch_max_bytes))
        self._fetch_round += 1
        for addr, parts in by_leader.items():
            k = self._fetch_round % len(parts)    # round robin: the broker fills its byte limits in request
            parts = parts[k:] + parts[:k]         # order, so no partition may always come last
            req = broker_pb2.FetchRequest(
                replica_id=-1, max_wait_ms=min(self.max_wait_ms, timeout_ms), max_bytes=self.fetch_max_bytes,
                isolation_level=self.isolation, partitions=parts)
            try:
                call = self.metadata.stub(addr).Fetch.future(req, timeout=req.max_wait_ms / 1000 + 5)
            except (grpc.RpcError, ValueError):       # the channel was closed meanwhile
                self._back_off(addr)
                self.metadata.refresh()
                continue
            self._fetches[call] = (addr, {(p.topic, p.partition): p.fetch_offset for p in parts})
            call.add_done_callback(self._answer)

    def _complete(self, call, out: list[ConsumerRecord]) -> None:
        """One answered fetch: its records for the partitions still at the offsets it asked from."""
        entry = self._fetches.pop(call, None)
        if entry is None:
            return                           # from before a close
        addr, offsets = entry
        try:
            resp = call.result()
        except grpc.FutureCancelledError:
            return
        except grpc.RpcError:
            self._back_off(addr)
            self.metadata.refresh()
            return
        current = [pr for pr in resp.partitions
                   if self.positions.get((pr.topic, pr.partition)) == offsets.get((pr.topic, pr.partition))]
        if len(current) != len(resp.partitions):
            resp = broker_pb2.FetchResponse(partitions=current)
        if any(pr.error in NEEDS_METADATA or pr.error == E.LEADER_NOT_AVAILABLE for pr in resp.partitions):
            self._back_off(addr)
        self._take(resp, out)

    def _back_off(self, addr: str) -> None:
        self._backoff[addr] = self.time.monotonic() + self.retry_backoff

    def _take(self, resp: broker_pb2.FetchResponse, out: list[ConsumerRecord]) -> None:
        """The records of one fetch answer into `out`, moving the positions past them."""
        for pr in resp.partitions:
            tp = (pr.topic, pr.partition)
            if pr.error in NEEDS_METADATA or pr.error == E.LEADER_NOT_AVAILABLE:
                self.metadata.refresh([pr.topic])
                continue
            if pr.error == E.OFFSET_OUT_OF_RANGE:
                self.seek_to_beginning([tp])
                continue
            if pr.error != E.NONE:
                # Kafka's Fetcher: the other partitions' records are returned first; the error is raised
                # by this poll only when it has no records, else by the next (whose fetch meets it again)
                self._fetch_errors.append(KafkaError(pr.error, f"fetch {pr.topic}-{pr.partition}"))
                continue
            if tp not in self.positions:
                continue
            pos = self.positions[tp]
            aborted = sorted((a.first_offset, a.producer_id) for a in pr.aborted_transactions)
            aborted_pids: set[int] = set()
            for b in pr.batches:
                last = b.base_offset + rb.last_offset_delta(b)     # a cleaned batch may end past its records
                while aborted and aborted[0][0] <= last:
                    aborted_pids.add(aborted.pop(0)[1])
                if b.attributes & rb.CONTROL_FLAG:
                    if b.producer_id in aborted_pids and _is_abort_marker(b):
                        aborted_pids.discard(b.producer_id)
                    pos = max(pos, last + 1)
                    continue
                if b.attributes & rb.TRANSACTIONAL_FLAG and b.producer_id in aborted_pids:
                    pos = max(pos, last + 1)   # a record of an aborted transaction
                    continue
                append_time = b.max_timestamp if b.attributes & rb.TIMESTAMP_TYPE_FLAG else None
                for off, k, v, ts, _ in rb.records_with_offsets(b):
                    if off < pos:
                        continue
                    ts = ts if append_time is None else append_time     # LogAppendTime: the batch's stamp
                    seq = b.base_sequence + off - b.base_offset if b.base_sequence >= 0 else -1
                    out.append(ConsumerRecord(pr.topic, pr.partition, off, k, v, ts,
                                              b.producer_id, b.producer_epoch, seq))
                pos = max(pos, last + 1)       # Kafka's nextOffset: past the batch, gaps and all
            self.positions[tp] = pos

    def read_all(self, tps: list[tuple[str, int]], timeout: float = 30.0) -> list[ConsumerRecord]:
        """Every record from the beginning up to the end offsets as of the call, partition by partition
        in the order `tps` names them, each in offset order (fetches interleave partitions in any order)."""
        self.assign(tps)
        self.seek_to_beginning(tps)
        ends = self.end_offsets(tps)
        out: list[ConsumerRecord] = []
        deadline = self.time.monotonic() + timeout
        while any(self.positions[tp] < ends[tp] for tp in tps):
            if self.time.monotonic() > deadline:
                raise KafkaError(E.REQUEST_TIMED_OUT, "could not read up to the end offsets in time")
            out.extend(self.poll())
        order = {tp: i for i, tp in enumerate(tps)}
        return sorted(out, key=lambda r: (order.get((r.topic, r.partition), len(order)), r.offset))

    def close(self) -> None:
        fetches, self._fetches = list(self._fetches), {}
        for call in fetches:
            call.cancel()
        if self.group is not None:
            self.group.leave()
        self.metadata.close()


def _is_abort_marker(b) -> bool:
    from eoslab.common.control_records import ABORT, parse_control_record
    try:
        k, v = rb.records_of(b)[0][:2]
        return parse_control_record(k, v)[0] == ABORT
    except (IndexError, ValueError):
        return False
