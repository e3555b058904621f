"""CoordinatorClient: find the transaction or group coordinator for a key and call it with retries.

Guarantees: `call` retries, until its deadline, exactly the answers Kafka's
clients retry for coordinator requests (COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR and lost connections, the
last two after finding the coordinator again, and CONCURRENT_TRANSACTIONS
after a short back-off); any other error comes back to the caller at once.
`unanswered` counts the attempts of the last call that got no answer (a lost
connection or a timeout): such an attempt may still have taken effect.
Deadlines and back-offs are seconds of the `Time` given (a call that keeps
getting a retriable answer returns it, or raises, once `timeout_s` of that
clock would pass before the next attempt).
"""
from __future__ import annotations

import grpc

from eoslab.common.errors import E, KafkaError
from eoslab.common.time import SYSTEM, Time
from clients.metadata import ClusterMetadata
from eoslab.v1 import broker_pb2, broker_pb2_grpc, txn_pb2_grpc

RETRY = {E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_COORDINATOR,
         E.CONCURRENT_TRANSACTIONS, E.NETWORK_EXCEPTION, E.REQUEST_TIMED_OUT}
REFIND = {E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE, E.NETWORK_EXCEPTION, E.REQUEST_TIMED_OUT}
# OffsetCommit and TxnOffsetCommit: beyond the group coordinator's 30 s wait for the commit's replication
OFFSET_COMMIT_TIMEOUT_S = 35.0
FIND_COORDINATOR_BACKOFF_S = 0.05    # between two rounds of FindCoordinator over the known brokers


class CoordinatorClient:
    def __init__(self, metadata: ClusterMetadata, key_type: int, key: str, request_timeout_s: float = 5.0,
                 retry_backoff_s: float = 0.02, time: Time = SYSTEM):
        self.time = time
        self.metadata = metadata
        self.key_type = key_type
        self.key = key
        self.request_timeout = request_timeout_s
        self.backoff = retry_backoff_s
        self.address: str | None = None
        self.node_id = -1
        self.unanswered = 0

    def find(self, deadline: float) -> str:
        last = None
        while self.time.monotonic() < deadline:
            for addr in self.metadata.addresses():
                try:
                    r = self.metadata.stub(addr).FindCoordinator(broker_pb2.FindCoordinatorRequest(
                        key_type=self.key_type, key=self.key), timeout=self.request_timeout)
                except grpc.RpcError as e:
                    last = KafkaError(E.NETWORK_EXCEPTION, f"FindCoordinator at {addr}: {e.code().name}")
                    continue
                if r.error == E.NONE:
                    self.address, self.node_id = f"{r.host}:{r.port}", r.node_id
                    return self.address
                last = KafkaError(r.error, r.error_message)
                break
            self.time.sleep(FIND_COORDINATOR_BACKOFF_S)
        raise last or KafkaError(E.COORDINATOR_NOT_AVAILABLE, f"no coordinator for {self.key!r}")

    def txn_stub(self):
        return self.metadata.channels.stub(self.address, txn_pb2_grpc.TransactionCoordinatorStub)

    def broker_stub(self):
        return self.metadata.channels.stub(self.address, broker_pb2_grpc.BrokerStub)

    def call(self, fn, timeout_s: float, error_of=lambda r: r.error):
        """fn(coordinator address) -> response; retried as the module doc says."""
        deadline = self.time.monotonic() + timeout_s
        delay = self.backoff
        self.unanswered = 0
        while True:
            if self.address is None:
                self.find(deadline)
            try:
                r = fn(self.address)
                err = error_of(r)
            except grpc.RpcError as e:
                r, err = None, E.NETWORK_EXCEPTION
                last_msg = e.code().name
                self.unanswered += 1
            else:
                last_msg = ""
                if err == E.NONE or err not in RETRY:
                    return r
            if err in REFIND:
                self.address = None
            wait = 0.005 if err == E.CONCURRENT_TRANSACTIONS else delay   # markers take a few ms: poll fast
            if self.time.monotonic() + wait > deadline:
                if r is not None:
                    return r
                raise KafkaError(err, f"coordinator for {self.key!r}: {last_msg}")
            self.time.sleep(wait)
            if err != E.CONCURRENT_TRANSACTIONS:
                delay = min(delay * 2, 0.2)
