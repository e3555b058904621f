"""ProducerIdManager (controller side): blocks of producer ids claimed in ZooKeeper.

Guarantees: a block is handed out only after a versioned compare-and-set on
/latest_producer_id_block succeeded, so two controllers racing (or a standby
taking over from a SIGKILLed active one) never hand out overlapping blocks,
and ids never repeat across controller failover. The znode holds Kafka's
JSON shape: {"version":1,"broker":N,"block_start":"S","block_end":"E"}.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from services.common import zk_paths

log = logging.getLogger(__name__)

PID_BLOCK_SIZE = 1000
MAX_PRODUCER_ID = 2**63 - 1


@dataclass(frozen=True)
class ProducerIdBlock:
    assigned_to: int
    first_id: int
    size: int

    @property
    def last_id(self) -> int:
        return self.first_id + self.size - 1


class ProducerIdsExhausted(Exception):
    pass


def parse_block(data: bytes) -> ProducerIdBlock:
    d = zk_paths.decode(data)
    start, end = int(d["block_start"]), int(d["block_end"])
    return ProducerIdBlock(int(d.get("broker", -1)), start, end - start + 1)


class ProducerIdManager:
    def __init__(self, zk, controller_id: int, block_size: int = PID_BLOCK_SIZE):
        if block_size <= 0:
            raise ValueError("pid block size must be positive")
        self.zk = zk
        self.controller_id = controller_id
        self.block_size = block_size
        self._lock = threading.Lock()

    def generate_block(self, for_broker: int) -> ProducerIdBlock:
        """Claim the next block with compare-and-set; retries when another writer won the race."""
        with self._lock:
            while True:
                try:
                    data, stat = self.zk.get(zk_paths.LATEST_PRODUCER_ID_BLOCK)
                except NoNodeError:
                    data, stat = None, None
                if data:
                    current = parse_block(data)
                    if current.last_id > MAX_PRODUCER_ID - self.block_size:
                        raise ProducerIdsExhausted(f"producer ids exhausted after {current.last_id}")
                    first = current.last_id + 1
                else:
                    first = 0
                block = ProducerIdBlock(for_broker, first, self.block_size)
                payload = zk_paths.encode({"version": 1, "broker": for_broker,
                                           "block_start": str(block.first_id),
                                           "block_end": str(block.last_id)})
                try:
                    if stat is None:
                        self.zk.create(zk_paths.LATEST_PRODUCER_ID_BLOCK, payload, makepath=True)
                    else:
                        self.zk.set(zk_paths.LATEST_PRODUCER_ID_BLOCK, payload, version=stat.version)
                except (BadVersionError, NodeExistsError):
                    log.info("producer id block race lost, retrying")
                    continue
                log.info("claimed producer id block %d..%d for broker %d",
                         block.first_id, block.last_id, for_broker)
                return block
