"""Cluster membership on the internal RPCs: the cluster's secret, checked on the server, sent by members.

Guarantees: a service built with `ServerGuard` refuses every internal RPC
(controller to broker, broker to broker replication (ReplicaFetch), coordinator to broker
markers, broker to controller, fault injection) that does not carry the
cluster's secret in metadata `x-eoslab-cluster-secret`, with UNAUTHENTICATED,
before its handler runs; the comparison is constant-time (hmac.compare_digest).
Fetch and OffsetsForLeaderEpoch are internal only when they name a replica
(replica_id >= 0), AddPartitionsToTxn only when it is verify-only (a broker's
KIP-890 check), Produce only when it writes an internal topic
(__transaction_state, __consumer_offsets); every other client API stays open, as on Kafka's plaintext
listener. The read-only counters (TransactionMetrics, GroupMetrics) are client APIs too: they tell what
Kafka's DescribeTransactions, DescribeGroups and JMX metrics tell any client, and change nothing. A request that does not decode is answered INVALID_ARGUMENT with one
log line (not gRPC's INTERNAL and a traceback). Calls that may hold a thread
long (ProduceStream, JoinGroup, SyncGroup) are limited per method for callers
outside the cluster (CLIENT_LIMITS; RESOURCE_EXHAUSTED beyond). A process finds its own secret
in $EOSLAB_CLUSTER_SECRET or the file named by $EOSLAB_CLUSTER_SECRET_FILE; a
harness that talks to several clusters registers each cluster's secret for the
hosts of its nodes (`register`), and `rpc.channel` sends the matching secret on
every call. In ZooKeeper, members authenticate with the secret (digest) and
create znodes anyone may read but only members may change, the root included.
"""
from __future__ import annotations

import collections
import hmac
import logging
import os
import secrets
import threading
import time

import grpc

SECRET_KEY = "x-eoslab-cluster-secret"
SECRET_ENV = "EOSLAB_CLUSTER_SECRET"
SECRET_FILE_ENV = "EOSLAB_CLUSTER_SECRET_FILE"
SECRET_FILE_NAME = "cluster-secret"

# Always internal: only cluster members may call these.
INTERNAL_METHODS = frozenset({
    "/eoslab.v1.Broker/LeaderAndIsr",
    "/eoslab.v1.Broker/UpdateMetadata",
    "/eoslab.v1.Broker/StopReplica",
    "/eoslab.v1.Broker/WriteTxnMarkers",
    "/eoslab.v1.Broker/ReplicaFetch",
    "/eoslab.v1.Controller/AlterPartition",
    "/eoslab.v1.Controller/AllocateProducerIds",
    "/eoslab.v1.Controller/RegisterBroker",
    "/eoslab.v1.FaultInjector/InjectFault",
    "/eoslab.v1.FaultInjector/ClearFaults",
    "/eoslab.v1.FaultInjector/ListFaults",
})
INTERNAL_TOPICS = frozenset({"__transaction_state", "__consumer_offsets"})


def _writes_internal_topic(r) -> bool:
    return any(pd.topic in INTERNAL_TOPICS for pd in r.partitions)


# Internal when the request says so (a replica's fetch, a broker's verification, a write to an internal
# topic: only the coordinators write there, as Kafka refuses clients' appends to internal topics).
CONDITIONAL_METHODS = {
    "/eoslab.v1.Broker/Produce": _writes_internal_topic,
    "/eoslab.v1.Broker/ProduceStream": _writes_internal_topic,
    "/eoslab.v1.Broker/Fetch": lambda r: r.replica_id >= 0,
    "/eoslab.v1.Broker/OffsetsForLeaderEpoch": lambda r: r.replica_id >= 0,
    "/eoslab.v1.TransactionCoordinator/AddPartitionsToTxn": lambda r: r.verify_only,
}
DENIED = "not a member of this cluster: internal RPCs need the cluster's secret"
# Calls that may hold a server thread long (a stream is a producer's connection; a join waits for its group):
# at most this many at once from callers outside the cluster, so they can never take every thread of a
# server (rpc.make_server: 128); a caller over the limit gets RESOURCE_EXHAUSTED at once.
CLIENT_LIMITS = {
    "/eoslab.v1.Broker/ProduceStream": 32,
    "/eoslab.v1.Broker/JoinGroup": 16,
    "/eoslab.v1.Broker/SyncGroup": 16,
}

log = logging.getLogger(__name__)


class NoSecret(RuntimeError):
    pass


def new_secret() -> str:
    return secrets.token_hex(32)


def write_secret_file(path: str, secret: str | None = None) -> str:
    """Write a secret (a new one by default) to `path`, readable by its owner only; returns it."""
    secret = secret or new_secret()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secret)
    os.replace(tmp, path)
    return secret


def read_secret_file(path: str) -> str:
    with open(path) as f:
        secret = f.read().strip()
    if not secret:
        raise NoSecret(f"{path} is empty")
    return secret


_process_secret: str | None = None
_registered: dict[str, str] = {}       # host -> secret of the cluster that host belongs to
_lock = threading.Lock()


def process_secret() -> str | None:
    """This process's own cluster secret ($EOSLAB_CLUSTER_SECRET, else the file $EOSLAB_CLUSTER_SECRET_FILE)."""
    global _process_secret
    if _process_secret is None:
        s = os.environ.get(SECRET_ENV, "").strip()
        path = os.environ.get(SECRET_FILE_ENV, "")
        if not s and path:
            try:
                s = read_secret_file(path)
            except (OSError, NoSecret) as e:
                raise NoSecret(f"cannot read the cluster secret: {e}") from None
        _process_secret = s or None
    return _process_secret


def require_process_secret() -> str:
    s = process_secret()
    if not s:
        raise NoSecret(f"no cluster secret: set {SECRET_ENV} or {SECRET_FILE_ENV} "
                       "(`eoslab cluster up` does this for the services it starts)")
    return s


def register(hosts, secret: str) -> None:
    """Send `secret` on calls to these hosts (a harness's view of one cluster's nodes)."""
    with _lock:
        for h in hosts:
            _registered[h] = secret


def unregister(hosts) -> None:
    with _lock:
        for h in hosts:
            _registered.pop(h, None)


def secret_for(address: str) -> str | None:
    host = address.rpartition(":")[0] or address
    with _lock:
        s = _registered.get(host)
    if s is not None:
        return s
    try:
        return process_secret()
    except NoSecret:
        return None


# -- ZooKeeper -----------------------------------------------------------------------------------------
ZK_USER = "eoslab"


def zk_kwargs(secret: str | None = None) -> dict:
    """KazooClient arguments for a member: digest credentials from the cluster's secret, and znodes that
    everyone may read but only members may change (registrations, the controller's election, partition
    state, producer-id blocks)."""
    from kazoo.security import make_acl, make_digest_acl
    secret = secret or process_secret()
    if not secret:
        return {}
    return {"auth_data": [("digest", f"{ZK_USER}:{secret}")],
            "default_acl": [make_acl("world", "anyone", read=True), make_digest_acl(ZK_USER, secret, all=True)]}


def lock_zk_root(zk) -> None:
    """After connecting: the root (or chroot) may be read by anyone, changed by members only, so nobody
    else can create /controller or /brokers. Idempotent; every member does it."""
    acl = zk_kwargs().get("default_acl")
    if acl:
        zk.set_acls("/", acl)


# -- client side -------------------------------------------------------------------------------------
class _Details(collections.namedtuple("_Details", ("method", "timeout", "metadata", "credentials",
                                                   "wait_for_ready", "compression")),
               grpc.ClientCallDetails):
    pass


class SecretClientInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                              grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds the cluster's secret to every call made on the channel."""

    def __init__(self, secret: str):
        self._md = (SECRET_KEY, secret)

    def _details(self, d):
        md = [m for m in (d.metadata or ()) if m[0] != SECRET_KEY] + [self._md]
        return _Details(d.method, d.timeout, md, d.credentials, getattr(d, "wait_for_ready", None),
                        getattr(d, "compression", None))

    def intercept_unary_unary(self, continuation, client_call_details, request):
        return continuation(self._details(client_call_details), request)

    def intercept_unary_stream(self, continuation, client_call_details, request):
        return continuation(self._details(client_call_details), request)

    def intercept_stream_unary(self, continuation, client_call_details, request_iterator):
        return continuation(self._details(client_call_details), request_iterator)

    def intercept_stream_stream(self, continuation, client_call_details, request_iterator):
        return continuation(self._details(client_call_details), request_iterator)


# -- server side -------------------------------------------------------------------------------------
class _Undecodable:
    __slots__ = ("error",)

    def __init__(self, error: Exception):
        self.error = error


def _tolerant(deserializer):
    if deserializer is None:
        return None

    def decode(data):
        try:
            return deserializer(data)
        except Exception as e:  # noqa: BLE001 - any decode failure is the caller's bad request
            return _Undecodable(e)
    return decode


class _OneLine:
    """At most one log line per second per kind, counting the rest (a flood cannot fill the disk)."""

    def __init__(self):
        self._last: dict[str, float] = {}
        self._skipped: dict[str, int] = {}
        self._lock = threading.Lock()

    def warn(self, kind: str, msg: str) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._last.get(kind, -10.0) < 1.0:
                self._skipped[kind] = self._skipped.get(kind, 0) + 1
                return
            self._last[kind] = now
            skipped = self._skipped.pop(kind, 0)
        log.warning("%s%s", msg, f" ({skipped} more like it not logged)" if skipped else "")


class ServerGuard(grpc.ServerInterceptor):
    """Membership check on internal RPCs and INVALID_ARGUMENT for requests that do not decode."""

    def __init__(self, secret: str):
        if not secret:
            raise NoSecret("the cluster secret must not be empty")
        self._secret = secret.encode()
        self._cache: dict[tuple[str, bool], grpc.RpcMethodHandler] = {}
        self._lines = _OneLine()
        self._in_use: collections.Counter = collections.Counter()
        self._slots = threading.Lock()

        def deny(request, context):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, DENIED)
        self._deny = grpc.unary_unary_rpc_method_handler(deny)

    def member(self, metadata) -> bool:
        given = ""
        for k, v in metadata or ():
            if k == SECRET_KEY:
                given = v
        if isinstance(given, str):
            given = given.encode()
        return hmac.compare_digest(given, self._secret)

    def intercept_service(self, continuation, handler_call_details):
        method = handler_call_details.method
        member = self.member(handler_call_details.invocation_metadata)
        if method in INTERNAL_METHODS and not member:
            self._lines.warn("denied", f"refused {method} from a caller without the cluster secret")
            return self._deny
        key = (method, member)
        h = self._cache.get(key)
        if h is None:
            inner = continuation(handler_call_details)
            if inner is None:
                return None
            h = self._cache[key] = self._wrap(method, inner, member)
        return h

    def _acquire(self, method: str, context) -> None:
        with self._slots:
            if self._in_use[method] < CLIENT_LIMITS[method]:
                self._in_use[method] += 1
                return
        self._lines.warn("busy", f"refused {method}: {CLIENT_LIMITS[method]} already in progress")
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                      f"too many {method.rsplit('/', 1)[-1]} calls in progress; try again")

    def _release(self, method: str) -> None:
        with self._slots:
            self._in_use[method] -= 1

    def _reject(self, method: str, context, req) -> None:
        if isinstance(req, _Undecodable):
            self._lines.warn("undecodable", f"{method}: request does not decode ({req.error!r}): INVALID_ARGUMENT")
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"request does not decode: {req.error}")

    def _wrap(self, method: str, h: grpc.RpcMethodHandler, member: bool) -> grpc.RpcMethodHandler:
        internal = None if member else CONDITIONAL_METHODS.get(method)
        limited = not member and method in CLIENT_LIMITS
        guard = self

        def check(req, context):
            guard._reject(method, context, req)
            if internal is not None and internal(req):
                guard._lines.warn("denied", f"refused {method} (a replica's or an internal topic's) from a "
                                            "caller without the cluster secret")
                context.abort(grpc.StatusCode.UNAUTHENTICATED, DENIED)

        def checked_stream(it, context):
            for req in it:
                check(req, context)
                yield req

        des, ser = _tolerant(h.request_deserializer), h.response_serializer
        if h.unary_unary is not None:
            fn = h.unary_unary

            def uu(req, context):
                check(req, context)
                if not limited:
                    return fn(req, context)
                guard._acquire(method, context)
                try:
                    return fn(req, context)
                finally:
                    guard._release(method)
            return grpc.unary_unary_rpc_method_handler(uu, request_deserializer=des, response_serializer=ser)
        if h.unary_stream is not None:
            fn = h.unary_stream

            def us(req, context):
                check(req, context)
                return fn(req, context)
            return grpc.unary_stream_rpc_method_handler(us, request_deserializer=des, response_serializer=ser)
        if h.stream_unary is not None:
            fn = h.stream_unary
            return grpc.stream_unary_rpc_method_handler(lambda it, context: fn(checked_stream(it, context), context),
                                                        request_deserializer=des, response_serializer=ser)
        fn = h.stream_stream

        def ss(it, context):
            if not limited:
                yield from fn(checked_stream(it, context), context)
                return
            guard._acquire(method, context)
            try:
                yield from fn(checked_stream(it, context), context)
            finally:
                guard._release(method)
        return grpc.stream_stream_rpc_method_handler(ss, request_deserializer=des, response_serializer=ser)
