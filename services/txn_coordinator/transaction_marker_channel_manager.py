"""TransactionMarkerChannelManager: COMMIT / ABORT markers to every partition of a transaction.

Guarantees: `send_markers` returns only when every partition of the
transaction holds the marker replicated to its ISR (WriteTxnMarkers answered
NONE, or the partition no longer exists: its topic or index missing from
three metadata refreshes in a row), retrying through leader changes, dead brokers and NOT_ENOUGH_REPLICAS; it gives up (returns the
error) only when the broker says this coordinator epoch is fenced
(TRANSACTION_COORDINATOR_FENCED) or `still_owner()` turns false, so a
deposed coordinator stops writing markers. Requests to one broker carry the
markers of all its partitions at once; the brokers are asked in parallel.
The backoff between rounds (20 ms doubling to 500 ms) is slept on the
injected `Time`.
"""
from __future__ import annotations

import logging

import grpc

from eoslab.common.errors import E, KafkaError
from eoslab.common.time import SYSTEM, Time
from clients.metadata import ClusterMetadata
from eoslab.v1 import broker_pb2, common_pb2

log = logging.getLogger(__name__)


class TransactionMarkerChannelManager:
    def __init__(self, bootstrap: str, time: Time = SYSTEM):
        self.time = time
        self.metadata = ClusterMetadata(bootstrap)

    def send_markers(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, committed: bool,
                     partitions, still_owner) -> int:
        pending = set(partitions)
        delay = 0.02
        refreshes = 0                      # successful metadata refreshes during this call
        gone: dict[tuple[str, int], int] = {}
        while pending:
            if not still_owner():
                return E.NOT_COORDINATOR
            by_leader: dict[str, list] = {}
            for tp in sorted(pending):
                ld = self.metadata.leader(*tp)
                if ld is None:
                    n = self.metadata.partitions_for(tp[0])
                    if refreshes and (n is None or not 0 <= tp[1] < n):
                        gone[tp] = gone.get(tp, 0) + 1
                        if gone[tp] >= 3:     # the partition does not exist: no marker can go there
                            log.warning("%s-%d does not exist: no marker for producer %d", tp[0], tp[1],
                                        producer_id)
                            pending.discard(tp)
                    continue
                gone.pop(tp, None)
                by_leader.setdefault(ld[1], []).append(tp)
            stale = len(by_leader) == 0 or sum(len(v) for v in by_leader.values()) < len(pending)
            calls = {}
            for addr, tps in by_leader.items():   # every leader at once: each answers after its ISR has it
                req = broker_pb2.WriteTxnMarkersRequest(markers=[broker_pb2.WritableTxnMarker(
                    producer_id=producer_id, producer_epoch=producer_epoch, committed=committed,
                    coordinator_epoch=coordinator_epoch,
                    partitions=[common_pb2.TopicPartition(topic=t, partition=p) for t, p in tps])])
                calls[addr] = self.metadata.stub(addr).WriteTxnMarkers.future(req, timeout=35)
            for addr, call in calls.items():
                try:
                    resp = call.result()
                except grpc.RpcError as e:
                    log.info("WriteTxnMarkers to %s failed: %s", addr, e.code().name)
                    stale = True
                    continue
                for pr in resp.markers[0].partitions if resp.markers else []:
                    tp = (pr.topic, pr.partition)
                    if pr.error == E.NONE or pr.error == E.UNKNOWN_TOPIC_OR_PARTITION and \
                            self.metadata.partitions_for(pr.topic) is None:
                        pending.discard(tp)
                    elif pr.error == E.TRANSACTION_COORDINATOR_FENCED:
                        log.warning("markers for producer %d refused: coordinator epoch %d is fenced",
                                    producer_id, coordinator_epoch)
                        return E.TRANSACTION_COORDINATOR_FENCED
                    elif pr.error == E.INVALID_PRODUCER_EPOCH:
                        # a newer epoch already wrote this partition's marker: nothing left to do here
                        log.warning("%s-%d: marker at epoch %d is older than the partition's: %s",
                                    tp[0], tp[1], producer_epoch, pr.error_message)
                        pending.discard(tp)
                    else:
                        stale = True
            if pending:
                if stale:
                    try:
                        self.metadata.refresh()
                        refreshes += 1
                    except KafkaError:
                        pass
                self.time.sleep(delay)
                delay = min(delay * 2, 0.5)
        return E.NONE

    def close(self) -> None:
        self.metadata.close()
