"""The offsets monitor: each partition's last stable offset and high watermark, sampled through a run.

Guarantees: while running, about every `interval` seconds, it asks each partition's leader for its
high watermark (ListOffsets latest, read_uncommitted) and last stable offset (the same,
read_committed) and records one lone info op of process "monitor", f "offsets", value
[[partition, lso, hw], ...] (checker.kafka.hangs reads them); a partition whose leader does not
answer within `rpc_timeout` is left out of that sample, so faults never stop or fail the monitor;
`probe()` takes one sample without recording it (a fault package aiming at an open transaction).
`settle(timeout)` samples until every partition's LSO has reached its high watermark, or the
timeout passes: after the final heal, a transaction Kafka would still end (by its timeout and the
coordinator's abort) has that long to move the LSO before the checker's threshold counts it as a
hang. The monitor reads through the lab's own client (gRPC, as a cluster member) and never writes.
"""
from __future__ import annotations

import threading

import grpc

from eoslab.common.time import SYSTEM, Time
from eoslab.v1 import broker_pb2

LATEST = -1
PROCESS, F = "monitor", "offsets"


class OffsetsMonitor(threading.Thread):
    def __init__(self, metadata, history, topic: str, partitions: int, interval: float = 0.5,
                 rpc_timeout: float = 1.0, time: Time = SYSTEM):
        super().__init__(name="offsets-monitor", daemon=True)
        self.md, self.history, self.topic, self.partitions = metadata, history, topic, partitions
        self.interval, self.rpc_timeout, self.time = interval, rpc_timeout, time
        self.stopping = threading.Event()
        self.samples = 0
        self._stale = True                       # metadata to refresh before the next sample

    def _latest(self, addr: str, p: int, isolation) -> int | None:
        r = self.md.stub(addr).ListOffsets(broker_pb2.ListOffsetsRequest(
            isolation_level=isolation,
            partitions=[broker_pb2.ListOffsetsPartition(topic=self.topic, partition=p, timestamp=LATEST)]),
            timeout=self.rpc_timeout)
        pr = r.partitions[0] if r.partitions else None
        return pr.offset if pr is not None and pr.error == 0 else None

    def sample(self) -> list[list[int]]:
        """[[partition, lso, hw], ...] for the partitions whose leader answered; recorded."""
        out = self.probe()
        if out:
            self.history.lone(PROCESS, F, out)
            self.samples += 1
        return out

    def probe(self) -> list[list[int]]:
        """[[partition, lso, hw], ...] for the partitions whose leader answered, not recorded."""
        out = []
        if self._stale or any(self.md.leader(self.topic, p) is None for p in range(self.partitions)):
            try:
                self.md.refresh([self.topic])
                self._stale = False
            except Exception:  # noqa: BLE001 - no broker answers now (a fault): the next sample asks again
                pass
        for p in range(self.partitions):
            try:
                leader = self.md.leader(self.topic, p)
                if leader is None:
                    continue
                addr = leader[1]
                # the LSO first: both only grow on one leader, so the pair never shows lso > hw
                lso = self._latest(addr, p, broker_pb2.READ_COMMITTED)
                hw = self._latest(addr, p, broker_pb2.READ_UNCOMMITTED)
            except (grpc.RpcError, OSError, ValueError):
                self._stale = True
                continue
            if hw is not None and lso is not None:
                out.append([p, lso, hw])
            else:
                self._stale = True              # NOT_LEADER_OR_FOLLOWER and the like: ask again next time
        return out

    def run(self) -> None:
        while not self.stopping.is_set():
            self.sample()
            self.time.wait_event(self.stopping, self.interval)

    def stop(self) -> None:
        self.stopping.set()
        self.join(10)

    def settle(self, timeout: float) -> bool:
        """Sample until every partition sampled has its LSO at its high watermark; False when the
        timeout passed first."""
        deadline = self.time.monotonic() + timeout
        while True:
            s = self.sample()
            if s and all(lso >= hw for _, lso, hw in s) and len(s) == self.partitions:
                return True
            if self.time.monotonic() >= deadline:
                return False
            self.time.sleep(self.interval)
