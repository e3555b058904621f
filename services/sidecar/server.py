"""The sidecar's gRPC service: token check, then the fault table.

Guarantees: a call without the shared token (metadata `x-eoslab-token`)
is refused with UNAUTHENTICATED before any handler runs; nonsense is
refused with INVALID_ARGUMENT and one line naming the field; a fault that
iptables or tc refuses gives FAILED_PRECONDITION; every answer lists the
rules in force afterwards.
"""
from __future__ import annotations

import hmac
import logging

import grpc

from eoslab.v1 import sidecar_pb2, sidecar_pb2_grpc
from services.sidecar.faults import BadFault, FaultFailed, Faults
from services.sidecar.iptables import IptablesError
from services.sidecar.shaping import ShapingError

TOKEN_KEY = "x-eoslab-token"
log = logging.getLogger("sidecar")


class TokenInterceptor(grpc.ServerInterceptor):
    def __init__(self, token: str):
        if not token:
            raise ValueError("the sidecar needs a non-empty token")
        self._token = token.encode()

        def deny(request, context):
            context.abort(grpc.StatusCode.UNAUTHENTICATED,
                          f"missing or wrong token: send the shared token in metadata {TOKEN_KEY!r}")
        self._deny = grpc.unary_unary_rpc_method_handler(deny)

    def intercept_service(self, continuation, handler_call_details):
        given = dict(handler_call_details.invocation_metadata or ()).get(TOKEN_KEY, "")
        if isinstance(given, str):
            given = given.encode()
        if hmac.compare_digest(given, self._token):
            return continuation(handler_call_details)
        return self._deny


class SidecarService(sidecar_pb2_grpc.SidecarServicer):
    def __init__(self, faults: Faults):
        self.faults = faults

    def _answer(self, context, action) -> sidecar_pb2.RulesResponse:
        try:
            rule = action()
            if rule is not None:
                log.info("fault %s in force: %s", rule.id, rule.description)
        except BadFault as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        except (FaultFailed, IptablesError, ShapingError) as e:
            log.error("%s", e)
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(e))
        return self.report()

    def report(self) -> sidecar_pb2.RulesResponse:
        iptables, tc = self.faults.listing()
        return sidecar_pb2.RulesResponse(
            rules=[sidecar_pb2.Rule(id=r.id, kind=r.kind, description=r.description, commands=r.commands)
                   for r in self.faults.rules()],
            delay_mode=self.faults.delay_mode, iptables=iptables, tc=tc)

    def Partition(self, request, context):
        return self._answer(context, lambda: self.faults.partition(list(request.peers), request.direction))

    def Loss(self, request, context):
        return self._answer(context, lambda: self.faults.loss(list(request.peers), request.direction,
                                                              request.probability))

    def Reset(self, request, context):
        return self._answer(context, lambda: self.faults.reset(list(request.peers), request.direction, request.port))

    def Bandwidth(self, request, context):
        return self._answer(context, lambda: self.faults.bandwidth(list(request.peers), request.rate_bits_per_second,
                                                                   request.burst_bytes))

    def DropResponses(self, request, context):
        return self._answer(context, lambda: self.faults.drop_responses(list(request.peers), request.port,
                                                                        request.probability))

    def Delay(self, request, context):
        return self._answer(context, lambda: self.faults.delay(list(request.peers), request.direction,
                                                               request.delay_ms, request.jitter_ms))

    def Heal(self, request, context):
        def heal():
            self.faults.heal()
            log.info("healed: every fault removed")
        return self._answer(context, heal)

    def ListRules(self, request, context):
        return self.report()
