"""ProducerIdManager (brokers and transaction coordinators, Kafka's RPCProducerIdManager): ids from controller blocks.

Guarantees: every id handed out lies in a block the active controller
claimed in ZooKeeper for this broker, and each is handed out once; when the
controller cannot be reached the caller gets COORDINATOR_LOAD_IN_PROGRESS
(retriable) instead of a made-up id. It tries for `timeout_s` of the `Time` it
was given, backing off (sleeping on that clock) from 50 ms up to 500 ms.
"""
from __future__ import annotations

import logging
import threading

import grpc

from eoslab.v1 import controller_pb2, controller_pb2_grpc
from eoslab.common import rpc
from eoslab.common.errors import E
from eoslab.common.time import SYSTEM, Time

log = logging.getLogger(__name__)

ALLOCATE_TIMEOUT_S = 5.0     # one AllocateProducerIds call to the active controller


class ProducerIdManager:
    def __init__(self, broker_id: int, controller_address, broker_epoch, timeout_s: float = 10.0,
                 time: Time = SYSTEM):
        self.time = time
        self.broker_id = broker_id
        self._controller_address = controller_address  # () -> "host:port" | None
        self._broker_epoch = broker_epoch              # () -> int
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._next = 0
        self._end = -1  # inclusive end of the current block

    def generate_producer_id(self) -> tuple[int, int]:
        """(error, producer id)."""
        with self._lock:
            if self._next > self._end:
                err = self._fetch_block()
                if err != E.NONE:
                    return err, -1
            pid = self._next
            self._next += 1
            return E.NONE, pid

    def _fetch_block(self) -> int:
        deadline = self.time.monotonic() + self.timeout_s
        delay = 0.05
        while self.time.monotonic() < deadline:
            addr = self._controller_address()
            if addr:
                try:
                    with rpc.channel(addr) as ch:
                        r = controller_pb2_grpc.ControllerStub(ch).AllocateProducerIds(
                            controller_pb2.AllocateProducerIdsRequest(broker_id=self.broker_id,
                                                                      broker_epoch=self._broker_epoch()),
                            timeout=ALLOCATE_TIMEOUT_S)
                    if r.error == E.NONE and r.producer_id_len > 0:
                        self._next = r.producer_id_start
                        self._end = r.producer_id_start + r.producer_id_len - 1
                        log.info("producer id block %d..%d", self._next, self._end)
                        return E.NONE
                    log.info("controller at %s answered %s", addr, E.Name(r.error))
                except grpc.RpcError as e:
                    log.info("controller at %s unreachable: %s", addr, e.code())
            self.time.sleep(delay)
            delay = min(delay * 2, 0.5)
        return E.COORDINATOR_LOAD_IN_PROGRESS
