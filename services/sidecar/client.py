"""A client for the fault sidecar, as the runtimes and tests use it.

Guarantees: every call carries the shared token; each method returns the
RulesResponse (the rules in force after the call); a refusal raises
SidecarError with the status code and the sidecar's one-line message.
"""
from __future__ import annotations

import grpc

from eoslab.v1 import sidecar_pb2, sidecar_pb2_grpc
from services.sidecar.server import TOKEN_KEY

DIRECTION = {"both": sidecar_pb2.DIRECTION_BOTH, "inbound": sidecar_pb2.DIRECTION_INBOUND,
             "outbound": sidecar_pb2.DIRECTION_OUTBOUND}


class SidecarError(RuntimeError):
    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


class SidecarClient:
    def __init__(self, address: str, token: str, timeout: float = 10.0):
        self.address = address
        self._channel = grpc.insecure_channel(address)
        self._stub = sidecar_pb2_grpc.SidecarStub(self._channel)
        self._md = ((TOKEN_KEY, token),)
        self.timeout = timeout

    def close(self) -> None:
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method: str, request):
        try:
            return getattr(self._stub, method)(request, metadata=self._md, timeout=self.timeout)
        except grpc.RpcError as e:
            raise SidecarError(e.code(), e.details() or "") from None

    def partition(self, peers: list[str], direction: str = "both"):
        return self._call("Partition", sidecar_pb2.PartitionRequest(peers=peers, direction=DIRECTION[direction]))

    def loss(self, probability: float, peers: list[str] = (), direction: str = "both"):
        return self._call("Loss", sidecar_pb2.LossRequest(peers=list(peers), direction=DIRECTION[direction],
                                                          probability=probability))

    def reset(self, peers: list[str] = (), direction: str = "both", port: int = 0):
        return self._call("Reset", sidecar_pb2.ResetRequest(peers=list(peers), direction=DIRECTION[direction],
                                                            port=port))

    def bandwidth(self, rate_bits_per_second: int, peers: list[str] = (), burst_bytes: int = 0):
        return self._call("Bandwidth", sidecar_pb2.BandwidthRequest(
            peers=list(peers), rate_bits_per_second=rate_bits_per_second, burst_bytes=burst_bytes))

    def drop_responses(self, peers: list[str] = (), port: int = 0, probability: float = 0.0):
        return self._call("DropResponses", sidecar_pb2.DropResponsesRequest(peers=list(peers), port=port,
                                                                            probability=probability))

    def delay(self, delay_ms: int, jitter_ms: int = 0, peers: list[str] = (), direction: str = "both"):
        return self._call("Delay", sidecar_pb2.DelayRequest(peers=list(peers), direction=DIRECTION[direction],
                                                            delay_ms=delay_ms, jitter_ms=jitter_ms))

    def heal(self):
        return self._call("Heal", sidecar_pb2.HealRequest())

    def rules(self):
        return self._call("ListRules", sidecar_pb2.ListRulesRequest())
