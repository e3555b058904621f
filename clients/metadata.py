"""ClusterMetadata: what a client knows of the cluster (brokers, partitions, leaders).

Guarantees: `refresh` asks the brokers in turn (a different one first each
time, skipping for a while one that just timed out), so a single broker with
stale metadata (a partitioned one) cannot pin the client; a partition's
leader never moves back to an older leader epoch than one already seen
(KIP-320); an unreachable cluster raises KafkaError(NETWORK_EXCEPTION) with
every address tried in the message. The skip of a slow address (10 s) and
`wait_for_cluster`'s deadline and back-off are seconds of the `Time` given.
"""
from __future__ import annotations

import threading

import grpc

from eoslab.common.errors import E, KafkaError
from eoslab.common.time import SYSTEM, Time
from eoslab.v1 import broker_pb2, broker_pb2_grpc
from eoslab.common import rpc


class ClusterMetadata:
    def __init__(self, bootstrap: str | list[str], channels: rpc.ChannelCache | None = None,
                 timeout: float = 3.0, time: Time = SYSTEM):
        self.time = time
        self.bootstrap = [bootstrap] if isinstance(bootstrap, str) else list(bootstrap)
        self.bootstrap = [a.strip() for addr in self.bootstrap for a in addr.split(",") if a.strip()]
        for a in self.bootstrap:
            rpc.split_address(a)  # ValueError on a malformed address
        self.channels = channels or rpc.ChannelCache()
        self.timeout = timeout
        self.lock = threading.Lock()
        self.brokers: dict[int, str] = {}
        self.leaders: dict[tuple[str, int], tuple[int, int]] = {}   # tp -> (leader id, leader epoch)
        self.partition_counts: dict[str, int] = {}
        self.topic_errors: dict[str, int] = {}
        self.controller_id = -1
        self._turn = 0
        self._slow: dict[str, float] = {}   # address -> monotonic time until which it is skipped

    def stub(self, address: str) -> broker_pb2_grpc.BrokerStub:
        return self.channels.stub(address, broker_pb2_grpc.BrokerStub)

    def addresses(self) -> list[str]:
        """Every address once: bootstrap then known brokers, rotated by one each call, slow ones last."""
        with self.lock:
            known = list(self.brokers.values())
            self._turn += 1
            turn = self._turn
        out: list[str] = []
        for a in self.bootstrap + known:
            if a not in out:
                out.append(a)
        k = turn % len(out) if out else 0
        out = out[k:] + out[:k]
        now = self.time.monotonic()
        return [a for a in out if self._slow.get(a, 0) <= now] + [a for a in out if self._slow.get(a, 0) > now]

    def refresh(self, topics: list[str] | None = None) -> broker_pb2.MetadataResponse:
        errors = []
        for addr in self.addresses():
            try:
                resp = self.stub(addr).Metadata(broker_pb2.MetadataRequest(topics=topics or []),
                                                timeout=self.timeout)
            except grpc.RpcError as e:
                errors.append(f"{addr}: {e.code().name}")
                if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                    self._slow[addr] = self.time.monotonic() + 10.0
                continue
            if not resp.brokers:
                errors.append(f"{addr}: no live brokers known yet")
                continue
            self._slow.pop(addr, None)
            self._apply(resp)
            return resp
        raise KafkaError(E.NETWORK_EXCEPTION, "cannot reach the cluster (" + "; ".join(errors) + ")")

    def wait_for_cluster(self, timeout_s: float = 10.0, topics: list[str] | None = None):
        """refresh, tried again while no address answers (a broker restarting, a published port not yet
        forwarding) until timeout_s has passed; then the last error. Other errors are raised at once."""
        deadline = self.time.monotonic() + timeout_s
        delay = 0.1
        while True:
            try:
                return self.refresh(topics)
            except KafkaError as e:
                if e.code != E.NETWORK_EXCEPTION or self.time.monotonic() + delay > deadline:
                    raise
            self.time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def _apply(self, resp: broker_pb2.MetadataResponse) -> None:
        with self.lock:
            self.brokers = {b.broker_id: f"{b.host}:{b.port}" for b in resp.brokers}
            self.controller_id = resp.controller_id
            for t in resp.topics:
                self.topic_errors[t.name] = t.error
                if t.error != E.NONE:
                    self.partition_counts.pop(t.name, None)
                    continue
                self.partition_counts[t.name] = len(t.partitions)
                for p in t.partitions:
                    tp = (t.name, p.partition)
                    known = self.leaders.get(tp)
                    if known is not None and p.leader_epoch < known[1]:
                        continue          # KIP-320: stale metadata from a broker that is behind
                    if p.error == E.NONE and p.leader >= 0:
                        self.leaders[tp] = (p.leader, p.leader_epoch)
                    else:
                        self.leaders.pop(tp, None)

    def leader(self, topic: str, partition: int) -> tuple[int, str, int] | None:
        """(leader id, address, leader epoch) or None when unknown."""
        with self.lock:
            le = self.leaders.get((topic, partition))
            if le is None or le[0] not in self.brokers:
                return None
            return le[0], self.brokers[le[0]], le[1]

    def partitions_for(self, topic: str) -> int | None:
        with self.lock:
            return self.partition_counts.get(topic)

    def any_broker(self) -> str:
        return self.addresses()[0]

    def close(self) -> None:
        self.channels.close_all()
