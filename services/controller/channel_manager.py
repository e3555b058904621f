"""ControllerChannelManager: pushes the controller's view to every live broker.

Guarantees: each broker eventually receives the newest state (UpdateMetadata
for the whole cluster, StopReplica for the replicas of deleted topics it still
holds, LeaderAndIsr for the partitions it hosts, in that order, the later ones only
once the broker took the UpdateMetadata), stamped
with this controller's epoch and the broker epoch it knows for the receiver; a
failed send, or one the broker refused as meant for another of its processes
(STALE_BROKER_EPOCH), is retried until it succeeds, the broker leaves, or the
controller resigns. Sends to one broker never wait on
another broker. The backoff after a failed send (50 ms doubling to 1 s)
runs on the injected `Time` and ends at once when the sender stops.
"""
from __future__ import annotations

import logging
import threading

import grpc

from eoslab.v1 import broker_pb2, broker_pb2_grpc, common_pb2
from eoslab.common import rpc
from eoslab.common.time import SYSTEM, Time

log = logging.getLogger(__name__)

# a broker that did not take the state is sent it again after a backoff that doubles up to a cap
SEND_BACKOFF_INITIAL_S, SEND_BACKOFF_MAX_S = 0.05, 1.0
UPDATE_METADATA_TIMEOUT_S = 5.0
LEADER_AND_ISR_TIMEOUT_S = 10.0      # the broker may open logs and truncate before it answers


class _NotTaken(Exception):
    """The broker refused the state (not the process the controller knows): sent again after a backoff."""


class _BrokerSender(threading.Thread):
    def __init__(self, manager: "ControllerChannelManager", broker_id: int, address: str):
        super().__init__(name=f"controller-to-broker-{broker_id}", daemon=True)
        self.manager = manager
        self.broker_id = broker_id
        self.address = address
        self.cond = threading.Condition()
        self.version = 0       # bumped when there is newer state to send
        self.sent_version = 0
        self.stopped = False
        self.channel = rpc.channel(address)
        self.stub = broker_pb2_grpc.BrokerStub(self.channel)

    def poke(self) -> None:
        with self.cond:
            self.version += 1
            self.cond.notify()

    def stop(self) -> None:
        with self.cond:
            self.stopped = True
            self.cond.notify()

    def run(self) -> None:
        backoff = SEND_BACKOFF_INITIAL_S
        while True:
            with self.cond:
                while not self.stopped and self.sent_version == self.version:
                    self.cond.wait()
                if self.stopped:
                    break
                target = self.version
            requests = self.manager.build_requests(self.broker_id)
            if requests is None:  # no longer active
                with self.cond:
                    self.sent_version = target
                continue
            um, lai, *rest = requests
            stop = rest[0] if rest else None
            try:
                r1 = self.stub.UpdateMetadata(um, timeout=UPDATE_METADATA_TIMEOUT_S)
                if r1.error == common_pb2.STALE_BROKER_EPOCH:
                    # not the process we know (or not registered yet): no LeaderAndIsr either, so a broker
                    # never makes partitions before it holds the metadata (topic configs) they are made with
                    raise _NotTaken("STALE_BROKER_EPOCH")
                r3 = self.stub.StopReplica(stop, timeout=LEADER_AND_ISR_TIMEOUT_S) if stop is not None else None
                if r3 is not None and r3.error == common_pb2.NONE and self.manager.on_replicas_stopped:
                    self.manager.on_replicas_stopped(self.broker_id, list(stop.partitions))
                r2 = self.stub.LeaderAndIsr(lai, timeout=LEADER_AND_ISR_TIMEOUT_S)
                errors = (r1.error, r2.error, r3.error if r3 else common_pb2.NONE)
                if common_pb2.STALE_CONTROLLER_EPOCH in errors:
                    log.warning("broker %d says our controller epoch is stale", self.broker_id)
                    self.manager.on_stale_epoch()
                if common_pb2.STALE_BROKER_EPOCH in errors:      # another process of that broker: wait for it
                    raise _NotTaken("STALE_BROKER_EPOCH")        # to register, then send what holds then
                with self.cond:
                    self.sent_version = target
                backoff = SEND_BACKOFF_INITIAL_S
            except (grpc.RpcError, _NotTaken) as e:
                log.debug("send to broker %d failed: %s", self.broker_id, e.code() if isinstance(e, grpc.RpcError) else e)
                with self.cond:
                    self.manager.time.wait_for(self.cond, lambda: self.stopped, backoff)
                backoff = min(backoff * 2, SEND_BACKOFF_MAX_S)
        self.channel.close()


class ControllerChannelManager:
    def __init__(self, build_requests, on_stale_epoch, time: Time = SYSTEM, on_replicas_stopped=None):
        self.time = time
        # broker_id -> (UpdateMetadataRequest, LeaderAndIsrRequest[, StopReplicaRequest or None]) | None
        self.build_requests = build_requests
        self.on_stale_epoch = on_stale_epoch
        self.on_replicas_stopped = on_replicas_stopped   # (broker_id, partitions) after a StopReplica is taken
        self._senders: dict[int, _BrokerSender] = {}
        self._lock = threading.Lock()

    def set_brokers(self, brokers: dict[int, str]) -> None:
        """Keep exactly one sender per live broker (a new address means a new sender)."""
        with self._lock:
            for bid in list(self._senders):
                s = self._senders[bid]
                if bid not in brokers or brokers[bid] != s.address:
                    s.stop()
                    del self._senders[bid]
            for bid, addr in brokers.items():
                if bid not in self._senders:
                    s = _BrokerSender(self, bid, addr)
                    self._senders[bid] = s
                    s.start()

    def send_all(self) -> None:
        with self._lock:
            for s in self._senders.values():
                s.poke()

    def close(self) -> None:
        self.set_brokers({})


def update_metadata_request(controller_id, epoch, states, brokers, controller_ep, configs, topic_ids=None):
    return broker_pb2.UpdateMetadataRequest(
        controller_id=controller_id, controller_epoch=epoch, partition_states=states,
        live_brokers=brokers, controller=controller_ep,
        topic_configs=[broker_pb2.TopicConfig(topic=t, configs=c) for t, c in configs.items()],
        topic_ids=topic_ids or {})
