"""In-process fault injection for the broker: lost produce responses (the seeds' lost ACK).

Guarantees: a dropped response belongs to a request the broker handled in
full (appended, producer state updated); on a ProduceStream (the producer's
connection) no later response of that stream is sent either, as on Kafka's
ordered connection (kafka_server.ProduceStream); only faults injected through
the FaultInjector RPC exist; `ClearFaults` removes all of them.
"""
from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass

from eoslab.v1 import faults_pb2, faults_pb2_grpc


@dataclass
class DropResponses:
    fault_id: str
    topic: str
    partition: int
    skip: int
    remaining: int
    applied: int = 0

    def describe(self) -> str:
        return f"drop produce responses for {self.topic}-{self.partition} (skip {self.skip})"


class FaultRegistry:
    def __init__(self):
        self._lock = threading.Lock()
        self._faults: list[DropResponses] = []
        self._ids = itertools.count(1)

    def add_drop(self, topic: str, partition: int, skip: int, count: int) -> str:
        with self._lock:
            f = DropResponses(f"drop-{next(self._ids)}", topic, partition, max(0, skip), max(0, count))
            self._faults.append(f)
            return f.fault_id

    def should_drop(self, request) -> bool:
        """Called once per handled produce request; True means: lose its response."""
        if not self._faults:
            return False
        drop = False
        with self._lock:
            for f in self._faults:
                if f.remaining <= 0:
                    continue
                if any(pd.topic == f.topic and pd.partition == f.partition for pd in request.partitions):
                    if f.skip > 0:
                        f.skip -= 1
                    else:
                        f.remaining -= 1
                        f.applied += 1
                        drop = True
        return drop

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def states(self) -> faults_pb2.FaultsResponse:
        with self._lock:
            return faults_pb2.FaultsResponse(faults=[
                faults_pb2.FaultState(fault_id=f.fault_id, description=f.describe(), remaining=f.remaining,
                                      applied=f.applied) for f in self._faults])


class FaultInjectorService(faults_pb2_grpc.FaultInjectorServicer):
    def __init__(self, registry: FaultRegistry):
        self.registry = registry

    def InjectFault(self, request, context):
        import grpc
        if request.WhichOneof("fault") != "drop_produce_responses":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "unknown fault")
        d = request.drop_produce_responses
        if d.count <= 0 or d.skip < 0 or d.partition < 0 or not d.topic:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          "drop_produce_responses needs a topic, partition >= 0, skip >= 0, count > 0")
        return faults_pb2.InjectFaultResponse(
            fault_id=self.registry.add_drop(d.topic, d.partition, d.skip, d.count))

    def ClearFaults(self, request, context):
        self.registry.clear()
        return self.registry.states()

    def ListFaults(self, request, context):
        return self.registry.states()
