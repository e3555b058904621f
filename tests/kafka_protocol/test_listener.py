"""KafkaListener and ApiHandlers over real sockets: framing, ordering, Kafka's answer to what is not
served, and bad frames closing one connection only."""
import io
import select
import socket
import struct
import threading
import time

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from services.kafka_protocol import codec
from services.kafka_protocol.apis import UNSUPPORTED_VERSION, ApiHandlers
from services.kafka_protocol.listener import KafkaListener

pytestmark = pytest.mark.fast
HEARTBEAT = 12


def _request(api_key, version, corr, **fields) -> bytes:
    cls = load_request_schema(api_key, version)
    buf = io.BytesIO()
    entity_writer(cls.__header_schema__)(buf, cls.__header_schema__(
        request_api_key=api_key, request_api_version=version, correlation_id=corr, client_id="test"))
    entity_writer(cls)(buf, codec.make(cls, fields))
    data = buf.getvalue()
    return struct.pack(">i", len(data)) + data


def _read_frame(sock) -> bytes:
    head = _recv_exactly(sock, 4)
    return _recv_exactly(sock, struct.unpack(">i", head)[0])


def _recv_exactly(sock, n) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


def _response(frame, api_key, version):
    cls = load_response_schema(api_key, version)
    corr = struct.unpack_from(">i", frame)[0]
    off = 4 + (1 if cls.__flexible__ and api_key != 18 else 0)
    return corr, entity_reader(cls)(frame, off)[0]


@pytest.fixture
def listener():
    h = ApiHandlers()
    delays = {}

    def heartbeat(header, req):
        time.sleep(delays.get(req.member_id, 0))
        return {"error_code": 27 if req.member_id == "rebalancing" else 0}
    h.register(HEARTBEAT, 0, 2, heartbeat)
    lst = KafkaListener("127.0.0.1:0", h, max_request_bytes=4096)
    lst.start()
    lst.delays = delays
    yield lst
    lst.stop()


def _connect(lst):
    return socket.create_connection(("127.0.0.1", lst.port), timeout=5)


def _heartbeat(corr, member="m", version=1):
    return _request(HEARTBEAT, version, corr, group_id="g", generation_id=1, member_id=member)


def test_api_versions_lists_exactly_what_is_served(listener):
    with _connect(listener) as s:
        s.sendall(_request(18, 3, 1, client_software_name="t", client_software_version="1"))
        corr, r = _response(_read_frame(s), 18, 3)
    assert corr == 1 and r.error_code.value == 0
    assert {(k.api_key, k.min_version, k.max_version) for k in r.api_keys} == {(18, 0, 4), (HEARTBEAT, 0, 2)}


def test_api_versions_at_an_unserved_version_gets_a_v0_answer_with_the_list(listener):
    with _connect(listener) as s:
        frame = bytearray(_request(18, 4, 7, client_software_name="t", client_software_version="1"))
        frame[6:8] = struct.pack(">h", 5)          # a version newer than any served (and than kio knows)
        s.sendall(bytes(frame))
        corr, r = _response(_read_frame(s), 18, 0)
    assert corr == 7 and r.error_code.value == UNSUPPORTED_VERSION
    assert (HEARTBEAT, 0, 2) in {(k.api_key, k.min_version, k.max_version) for k in r.api_keys}


def test_another_api_at_an_unserved_version_closes_that_connection_only(listener):
    """Kafka's SocketServer closes a connection whose request names an API or version it does not enable
    (no UNSUPPORTED_VERSION answer: only ApiVersions gets one); the listener goes on serving."""
    with _connect(listener) as s:
        s.sendall(_heartbeat(3, version=3))
        with pytest.raises(ConnectionError):
            _read_frame(s)
    with _connect(listener) as s:
        s.sendall(_heartbeat(4, member="rebalancing"))
        corr, r = _response(_read_frame(s), HEARTBEAT, 1)
        assert corr == 4 and r.error_code.value == 27


def test_pipelined_requests_are_answered_in_request_order(listener):
    listener.delays.update({"m0": 0.3, "m1": 0.0, "m2": 0.1})
    with _connect(listener) as s:
        s.sendall(b"".join(_heartbeat(100 + i, member=f"m{i}") for i in range(3)))
        order = [_response(_read_frame(s), HEARTBEAT, 1)[0] for _ in range(3)]
    assert order == [100, 101, 102]


@pytest.mark.parametrize("bad", [struct.pack(">i", 5000) + b"x" * 16,          # over max_request_bytes
                                 struct.pack(">i", -1),                        # negative size
                                 struct.pack(">i", 12) + struct.pack(">hhi", HEARTBEAT, 1, 9) + b"\xff\xff\xff\xff"])
def test_a_bad_frame_closes_its_connection_only(listener, bad):
    with _connect(listener) as healthy, _connect(listener) as victim:
        victim.sendall(bad)
        with pytest.raises(ConnectionError):
            _read_frame(victim)
        healthy.sendall(_heartbeat(5))
        assert _response(_read_frame(healthy), HEARTBEAT, 1)[0] == 5
    with _connect(listener) as again:       # and the listener still accepts
        again.sendall(_heartbeat(6))
        assert _response(_read_frame(again), HEARTBEAT, 1)[0] == 6


@pytest.mark.parametrize("api_key,version,fields", [
    (67, 0, {"broker_id": 1, "broker_epoch": 1}),                                           # AllocateProducerIds
    (63, 0, {"broker_id": 9, "broker_epoch": 1, "current_metadata_offset": 0}),            # BrokerHeartbeat
])
def test_inter_broker_apis_from_a_client_are_cluster_authorization_failed(listener, api_key, version, fields):
    with _connect(listener) as s:
        s.sendall(_request(api_key, version, 11, **fields))
        corr, r = _response(_read_frame(s), api_key, version)
        assert corr == 11 and r.error_code.value == 31            # CLUSTER_AUTHORIZATION_FAILED
        s.sendall(_heartbeat(12))                                  # the connection goes on
        assert _response(_read_frame(s), HEARTBEAT, 1)[0] == 12


@pytest.mark.parametrize("api_key", [4, 6, 27, 56])     # LeaderAndIsr, UpdateMetadata, WriteTxnMarkers, AlterPartition
def test_inter_broker_apis_without_a_client_schema_close_that_connection_only(listener, api_key):
    """Kafka's client schemas (kio) do not describe these: no answer can be encoded, so the connection
    closes, as Kafka closes one it cannot answer; the listener goes on serving."""
    body = struct.pack(">hhih", api_key, 7, 21, 4) + b"test" + b"\x00" * 16
    with _connect(listener) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        with pytest.raises(ConnectionError):
            _read_frame(s)
    with _connect(listener) as s:
        s.sendall(_heartbeat(22))
        assert _response(_read_frame(s), HEARTBEAT, 1)[0] == 22


def _closed_by_peer(sock, wait_s) -> bool:
    """True once the listener has closed `sock` (waits up to `wait_s` for it to become readable)."""
    return bool(select.select([sock], [], [], wait_s)[0]) and sock.recv(1) == b""


def _wait_for(cond, timeout_s=10):
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.01)


def test_a_connection_idle_past_connections_max_idle_is_closed_and_a_busy_one_is_not():
    """The busy connection sends ten requests at once, each taking 0.1 s to handle: it is in use for
    longer than the 0.5 s idle timeout without the listener ever waiting on this client, however late
    a loaded machine schedules the test."""
    h = ApiHandlers()
    h.register(HEARTBEAT, 0, 2, lambda header, req: time.sleep(0.1) or {"error_code": 0})
    lst = KafkaListener("127.0.0.1:0", h, idle_timeout_s=0.5)
    lst.start()
    try:
        with _connect(lst) as idle, _connect(lst) as busy:
            busy.settimeout(30)
            busy.sendall(b"".join(_heartbeat(corr) for corr in range(1, 11)))
            assert [_response(_read_frame(busy), HEARTBEAT, 1)[0] for _ in range(10)] == list(range(1, 11))
            assert _closed_by_peer(idle, 30)                # closed by the listener, not by us
    finally:
        lst.stop()


def test_a_request_already_here_when_the_idle_deadline_passes_is_answered():
    """A loop that wakes late (a loaded machine) finds a request and the connection's idle deadline due
    at once: the request is answered, as Kafka's Selector reads what is ready before it expires idle
    connections, and the connection is not closed with the request unread (a reset for the client)."""
    h = ApiHandlers()
    h.register(HEARTBEAT, 0, 2, lambda header, req: {"error_code": 0})
    lst = KafkaListener("127.0.0.1:0", h, idle_timeout_s=2.0)
    lst.start()
    try:
        with _connect(lst) as s:
            s.settimeout(10)
            _wait_for(lambda: lst._writers)                 # the connection's idle clock has started
            clock_start = time.monotonic()
            due = clock_start + lst.idle_timeout_s + 0.5
            held = threading.Event()

            def hold_the_loop():                           # the listener's thread, not scheduled until `due`
                held.set()
                while time.monotonic() < due:
                    time.sleep(0.05)
            lst.loop.call_soon_threadsafe(hold_the_loop)
            assert held.wait(10) and time.monotonic() < clock_start + lst.idle_timeout_s, \
                "the loop took the hold after the idle deadline"
            s.sendall(_heartbeat(31))                      # arrives while the loop is held, before `due`
            assert _response(_read_frame(s), HEARTBEAT, 1)[0] == 31
    finally:
        lst.stop()


JOIN_FIELDS = dict(group_id="g", session_timeout=10000, rebalance_timeout=30000, member_id="", group_instance_id=None,
                   protocol_type="consumer", protocols=[])


@pytest.mark.parametrize("api_key,version,fields,answer", [
    (11, 5, JOIN_FIELDS, {"error_code": 27, "generation_id": -1, "protocol_name": "", "leader": "", "member_id": ""}),
    (37, 1, dict(topics=[dict(name="t", count=2, assignments=None)], timeout_ms=30000, validate_only=False), {}),
    (44, 0, dict(resources=[dict(resource_type=2, resource_name="t", configs=[])], validate_only=False), {}),
    (33, 0, dict(resources=[dict(resource_type=2, resource_name="t", configs=[])], validate_only=False), {}),
], ids=["join-group", "create-partitions", "incremental-alter-configs", "alter-configs"])
def test_requests_that_wait_never_hold_the_threads_other_requests_need(api_key, version, fields, answer):
    """40 requests waiting (more than the 32 request threads) and a Heartbeat on another connection is
    still answered at once: waiting requests have a pool of their own, as Kafka parks them in purgatory.
    JoinGroup waits out a rebalance; CreatePartitions and the config changes wait, forwarded, through a
    controller failover."""
    release = threading.Event()
    h = ApiHandlers()
    h.register(api_key, 0, version, lambda header, req: release.wait(30) and answer)
    h.register(HEARTBEAT, 0, 2, lambda header, req: {"error_code": 0})
    lst = KafkaListener("127.0.0.1:0", h)
    lst.start()
    held = [_connect(lst) for _ in range(40)]
    try:
        for i, c in enumerate(held):
            c.sendall(_request(api_key, version, i, **fields))
        with _connect(lst) as other:
            other.settimeout(5)
            other.sendall(_heartbeat(99))
            assert _response(_read_frame(other), HEARTBEAT, 1)[0] == 99
    finally:
        release.set()
        for c in held:
            c.close()
        lst.stop()


def test_stop_ends_every_connection_task_and_closes_the_connections(listener):
    import asyncio
    socks = [_connect(listener) for _ in range(3)]
    try:
        listener.delays["slow"] = 0.5
        socks[0].sendall(_heartbeat(1, member="slow"))          # one in a handler as stop comes
        deadline = time.monotonic() + 10
        while len(listener._writers) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(listener._writers) == 3
        listener.stop()
        assert not [t for t in asyncio.all_tasks(listener.loop) if not t.done()]
        for s in socks:
            s.settimeout(5)
            while s.recv(4096):                              # whatever came, then the close
                pass
    finally:
        for s in socks:
            s.close()
