"""eoslab.common.auth: the membership check and the decode check, on a real in-process gRPC server."""
import grpc
import pytest

from eoslab.v1 import faults_pb2, faults_pb2_grpc
from services.common.faults import FaultInjectorService, FaultRegistry
from eoslab.common import auth, rpc

pytestmark = pytest.mark.fast
SECRET = "s3cret-of-this-cluster"


@pytest.fixture
def injector():
    server = rpc.make_server(max_workers=4, secret=SECRET)
    faults_pb2_grpc.add_FaultInjectorServicer_to_server(FaultInjectorService(FaultRegistry()), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}"
    server.stop(0)


def test_internal_rpc_without_or_with_a_wrong_secret_is_refused(injector):
    for md in ((), ((auth.SECRET_KEY, "wrong"),), ((auth.SECRET_KEY, SECRET[:-1]),)):
        with grpc.insecure_channel(injector) as ch, pytest.raises(grpc.RpcError) as e:
            faults_pb2_grpc.FaultInjectorStub(ch).ListFaults(faults_pb2.ListFaultsRequest(), metadata=md, timeout=5)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_a_registered_secret_goes_with_every_call_to_that_host(injector):
    auth.register(["127.0.0.1"], SECRET)
    try:
        with rpc.channel(injector) as ch:
            r = faults_pb2_grpc.FaultInjectorStub(ch).InjectFault(faults_pb2.InjectFaultRequest(
                drop_produce_responses=faults_pb2.DropProduceResponses(topic="t", partition=0, count=1)), timeout=5)
        assert r.fault_id
    finally:
        auth.unregister(["127.0.0.1"])
    with rpc.channel(injector) as ch, pytest.raises(grpc.RpcError) as e:
        faults_pb2_grpc.FaultInjectorStub(ch).ListFaults(faults_pb2.ListFaultsRequest(), timeout=5)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_undecodable_request_is_invalid_argument_with_one_log_line(injector, caplog):
    with grpc.insecure_channel(injector) as ch:
        raw = ch.unary_unary("/eoslab.v1.FaultInjector/InjectFault")   # bytes in, bytes out
        for _ in range(3):
            with pytest.raises(grpc.RpcError) as e:
                raw(b"\xff\xff\xff\xff\xff", metadata=((auth.SECRET_KEY, SECRET),), timeout=5)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    lines = [r for r in caplog.records if "does not decode" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0].getMessage()


def test_a_service_does_not_start_without_a_secret(monkeypatch):
    monkeypatch.delenv(auth.SECRET_ENV, raising=False)
    monkeypatch.delenv(auth.SECRET_FILE_ENV, raising=False)
    monkeypatch.setattr(auth, "_process_secret", None)
    with pytest.raises(SystemExit, match="no cluster secret"):
        rpc.make_server()


def test_secret_file_is_owner_only(tmp_path, monkeypatch):
    path = str(tmp_path / "c" / auth.SECRET_FILE_NAME)
    s = auth.write_secret_file(path)
    assert len(s) >= 32 and (tmp_path / "c" / auth.SECRET_FILE_NAME).stat().st_mode & 0o077 == 0
    monkeypatch.delenv(auth.SECRET_ENV, raising=False)
    monkeypatch.setenv(auth.SECRET_FILE_ENV, path)
    monkeypatch.setattr(auth, "_process_secret", None)
    assert auth.process_secret() == s


def test_compose_hands_the_cluster_secret_to_every_service():
    import os

    import yaml
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "docker-compose.yml")) as f:
        compose = yaml.safe_load(f)
    for name, svc in compose["services"].items():
        if svc.get("command") and svc["command"][0] in ("broker", "controller", "txn-coordinator"):
            assert svc["environment"][auth.SECRET_ENV].startswith("${EOSLAB_CLUSTER_SECRET"), name


def test_any_bytes_get_an_answer_or_invalid_argument_never_internal(injector):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    ch = grpc.insecure_channel(injector)
    md = ((auth.SECRET_KEY, SECRET),)
    calls = [ch.unary_unary(f"/eoslab.v1.FaultInjector/{m}") for m in ("InjectFault", "ClearFaults", "ListFaults")]

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.sampled_from(calls), st.binary(max_size=300))
    def one(call, data):
        try:
            call(data, metadata=md, timeout=5)
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, (data, e.code(), e.details())
    try:
        one()
    finally:
        ch.close()
