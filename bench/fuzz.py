"""Fuzz a running cluster as an outsider would: garbage and hostile messages to every RPC, then judge it.

Usage: python bench/fuzz.py [--requests 6000] [--time-limit 300] [--records 2000] [--seed 1]

Starts its own local cluster (loopback addresses of its own slot: nothing
leaves the machine), writes --records records with an idempotent acks=all
producer, then sends, from a process that does not hold the cluster's
secret, in equal shares and at most --requests in all, within --time-limit
seconds:
  garbage     random bytes to every gRPC method of the broker, controller,
              transaction coordinator and fault injector (streams too);
  hostile     well-formed requests whose fields come from hostile pools
              (-1, 0, 2^31-1, 2^63-1, 32768, empty and huge names, internal
              topics, repeated entries), to every method;
  kafka       random frames to the brokers' and coordinators' Kafka-protocol
              listeners (lengths of -1, 0, 2^31-1, random api keys).
Every 100 requests it checks liveness (Metadata, DescribeCluster,
DescribeTransactions, each within 5 s). Afterwards it checks: every node
still runs (no crash); every record written before is read back once, at
its offset; the controller epoch did not move (no forged request made
controllers resign); every ISR is a distinct subset of the replicas holding
the leader; a new topic takes writes; a transactional producer can init,
write and commit (nothing wedged). Prints one table: requests, answers by
gRPC status and Kafka error code, hangs (no answer within the deadline),
crashes, records lost, and the checks. Exit status 1 if any check failed.
"""
from __future__ import annotations

import argparse
import collections
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from concurrent import futures

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import grpc  # noqa: E402
from google.protobuf import message_factory  # noqa: E402

from bench.fuzz_kafka import _kafka_port, send_kafka  # noqa: E402
from clients.admin import create_topic  # noqa: E402
from clients.consumer import KafkaConsumer  # noqa: E402
from clients.metadata import ClusterMetadata  # noqa: E402
from clients.producer import KafkaProducer, ProducerConfig  # noqa: E402
from cluster.local import LocalRuntime  # noqa: E402
from eoslab.v1 import (broker_pb2, broker_pb2_grpc, common_pb2, controller_pb2, controller_pb2_grpc,  # noqa: E402
                       faults_pb2, txn_pb2, txn_pb2_grpc)

E = common_pb2.ErrorCode
DURABLE = "fuzz-durable"
INTS = [-1, 0, 1, 2, 3, 5, 32767, 32768, -32769, 2 ** 31 - 1, -2 ** 31, 10 ** 6]
LONGS = INTS + [2 ** 63 - 1, -2 ** 63, 10 ** 12]
STRINGS = ["", DURABLE, "fuzz-scratch", "nosuch", "__transaction_state", "__consumer_offsets", "../../etc",
           "a" * 300, "\x00", "é" * 50, "tid-1", "group-1"]
# Client APIs that may legitimately destroy the records the fuzz checks afterwards: Kafka's plaintext
# listener without an authorizer lets any client delete a topic or shorten its retention. Their hostile
# requests never name the durable topic, so a lost record is the cluster's fault, never the fuzzer's.
DESTRUCTIVE = {"DeleteTopics", "AlterTopicConfigs"}
SPARING = [s for s in STRINGS if s != DURABLE]
# (role, service descriptor, stub-less: methods are called by full name on raw channels)
SERVICES = [("broker", broker_pb2.DESCRIPTOR.services_by_name["Broker"]),
            ("controller", controller_pb2.DESCRIPTOR.services_by_name["Controller"]),
            ("txn-coordinator", txn_pb2.DESCRIPTOR.services_by_name["TransactionCoordinator"]),
            ("broker", faults_pb2.DESCRIPTOR.services_by_name["FaultInjector"])]


def hostile(desc, rng: random.Random, depth: int = 0, strings: list[str] = STRINGS):
    """A message of type `desc` with every field drawn from the hostile pools (names from `strings`)."""
    msg = message_factory.GetMessageClass(desc)()
    for f in desc.fields:
        if f.containing_oneof is not None and rng.random() < 0.5:
            continue
        n = (rng.choice([0, 1, 2, 3, 40]) if depth < 2 else rng.choice([0, 1])) \
            if f.is_repeated else 1
        for _ in range(n):
            v = _value(f, rng, depth, strings)
            if v is None:
                continue
            if f.is_repeated:
                if f.type == f.TYPE_MESSAGE:
                    getattr(msg, f.name).add().CopyFrom(v)
                else:
                    getattr(msg, f.name).append(v)
            elif f.type == f.TYPE_MESSAGE:
                getattr(msg, f.name).CopyFrom(v)
            else:
                setattr(msg, f.name, v)
    return msg


def hostile_request(method, rng: random.Random):
    """A hostile request for `method` (a gRPC method descriptor); destructive ones spare the durable topic."""
    return hostile(method.input_type, rng, strings=SPARING if method.name in DESTRUCTIVE else STRINGS)


def _value(f, rng, depth, strings):
    t = f.type
    if t == f.TYPE_MESSAGE:
        if f.message_type.GetOptions().map_entry:
            return None
        return hostile(f.message_type, rng, depth + 1, strings) if depth < 3 else None
    if t in (f.TYPE_INT32, f.TYPE_SINT32, f.TYPE_SFIXED32):
        v = rng.choice(INTS)
        if f.name in ("num_partitions", "replication_factor") and abs(v) > 10:   # no 10^6-partition topics
            v = rng.choice([-1, 0, 1, 2, 10001, 2 ** 31 - 1])
        return v
    if t in (f.TYPE_INT64, f.TYPE_SINT64, f.TYPE_SFIXED64):
        return rng.choice(LONGS)
    if t in (f.TYPE_UINT32, f.TYPE_FIXED32):
        return rng.choice([0, 1, 2 ** 32 - 1])
    if t in (f.TYPE_UINT64, f.TYPE_FIXED64):
        return rng.choice([0, 1, 2 ** 64 - 1])
    if t == f.TYPE_BOOL:
        return rng.random() < 0.5
    if t == f.TYPE_STRING:
        return rng.choice(strings)
    if t == f.TYPE_BYTES:
        return rng.randbytes(rng.choice([0, 1, 61, 300]))
    if t == f.TYPE_ENUM:
        return rng.choice([v.number for v in f.enum_type.values] + [99, -7])
    if t in (f.TYPE_DOUBLE, f.TYPE_FLOAT):
        return rng.choice([0.0, -1.0, float("inf"), float("nan")])
    return None


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = collections.Counter()        # phase -> n
        self.status = collections.Counter()          # (phase, gRPC status) -> n
        self.kafka = collections.Counter()           # Kafka error name -> n (answers that carried one)
        self.hangs = collections.Counter()           # phase -> n
        self.liveness_failures: list[str] = []

    def count(self, counter: str, key) -> None:
        with self.lock:
            getattr(self, counter)[key] += 1

    def answer(self, phase: str, resp) -> None:
        self.count("status", (phase, "OK"))
        err = getattr(resp, "error", None) if resp is not None and hasattr(resp, "DESCRIPTOR") else None
        if err is None and resp is not None and hasattr(resp, "DESCRIPTOR"):
            for f in ("partitions", "topics", "markers", "partition_errors"):
                items = getattr(resp, f, None) if f in resp.DESCRIPTOR.fields_by_name else None
                if items:
                    err = getattr(items[0], "error", None)
                    break
        if err is not None:
            self.count("kafka", E.Name(err) if err in E.values() else str(err))


def deadline_for(req) -> float:
    wait = getattr(req, "max_wait_ms", 0) if req is not None and hasattr(req, "DESCRIPTOR") else 0
    if req is not None and hasattr(req, "DESCRIPTOR") and "timeout_ms" in req.DESCRIPTOR.fields_by_name:
        wait = max(wait, getattr(req, "timeout_ms"))
    if req is not None and hasattr(req, "DESCRIPTOR") and "rebalance_timeout_ms" in req.DESCRIPTOR.fields_by_name:
        wait = max(wait, req.rebalance_timeout_ms, req.session_timeout_ms)
    # the longest a well-behaved server may take: its own caps (30 s long poll, 30 s produce wait, 30 min
    # rebalance) are checked elsewhere; here a hang is no answer within the request's wait (capped) + 10 s
    return min(max(wait, 0), 30_000) / 1000.0 + 10.0


def call(ch: grpc.Channel, method, body, stream: bool, timeout: float):
    if stream:
        rpc = ch.stream_stream(method) if isinstance(body, bytes) else ch.stream_stream(
            method, request_serializer=lambda m: m.SerializeToString())
        return list(rpc(iter([body, body]), timeout=timeout))
    if isinstance(body, bytes):
        return ch.unary_unary(method)(body, timeout=timeout)
    return ch.unary_unary(method, request_serializer=lambda m: m.SerializeToString(),
                          response_deserializer=None)(body, timeout=timeout)


def send_one(tally: Tally, phase: str, ch, method: str, mdesc, body, out_cls):
    stream = mdesc.client_streaming
    req = body if not isinstance(body, bytes) else None
    try:
        raw = call(ch, method, body, stream, deadline_for(req))
    except grpc.RpcError as e:
        code = e.code()
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            tally.count("hangs", phase)
        tally.count("status", (phase, code.name))
        return
    resp = None
    try:
        data = raw[-1] if stream and raw else (raw if not stream else None)
        resp = out_cls.FromString(data) if data is not None else None
    except Exception:  # noqa: BLE001 - an answer we cannot read is still an answer
        resp = None
    tally.answer(phase, resp)


def liveness(rt, tally: Tally) -> None:
    for n in rt.info().nodes:
        if n.role == "zookeeper":
            continue
        ch = grpc.insecure_channel(n.address)
        try:
            if n.role == "broker":
                broker_pb2_grpc.BrokerStub(ch).Metadata(broker_pb2.MetadataRequest(), timeout=5)
            elif n.role == "controller":
                controller_pb2_grpc.ControllerStub(ch).DescribeCluster(controller_pb2.DescribeClusterRequest(),
                                                                        timeout=5)
            else:
                txn_pb2_grpc.TransactionCoordinatorStub(ch).DescribeTransactions(
                    txn_pb2.DescribeTransactionsRequest(), timeout=5)
        except grpc.RpcError as e:
            tally.liveness_failures.append(f"{n.name}: {e.code().name}")
        finally:
            ch.close()


def describe(rt):
    from eoslab.common import rpc
    for n in rt.info().by_role("controller"):
        with rpc.channel(n.address) as ch:
            r = controller_pb2_grpc.ControllerStub(ch).DescribeCluster(controller_pb2.DescribeClusterRequest(),
                                                                         timeout=5)
        if r.error == 0:
            return r
    return None


def write_records(boot: str, n: int) -> dict[tuple[int, int], bytes]:
    md = ClusterMetadata(boot)
    create_topic(md, DURABLE, 3, 3, {"min.insync.replicas": "2"})
    p = KafkaProducer(boot, ProducerConfig(acks=-1, enable_idempotence=True, linger_ms=5))
    try:
        fs = [(p.send(DURABLE, f"r{i}".encode(), partition=i % 3), f"r{i}".encode()) for i in range(n)]
        p.flush()
        return {(f.result().partition, f.result().offset): v for f, v in fs}
    finally:
        p.close()
        md.close()


def records_lost(boot: str, written: dict) -> tuple[int, int]:
    c = KafkaConsumer(boot)
    try:
        got = c.read_all([(DURABLE, p) for p in range(3)])
    finally:
        c.close()
    seen = collections.Counter((r.partition, r.offset, r.value) for r in got)
    lost = sum(1 for (p, o), v in written.items() if seen[(p, o, v)] != 1)
    dup = sum(1 for k, c in seen.items() if c > 1)
    return lost, dup


def still_works(boot: str) -> list[str]:
    problems = []
    try:
        md = ClusterMetadata(boot)
        create_topic(md, "fuzz-after", 1, 3)
        md.close()
        p = KafkaProducer(boot, ProducerConfig(transactional_id="fuzz-after-txn", linger_ms=0,
                                               transaction_timeout_ms=10000))
        try:
            p.init_transactions()
            p.begin_transaction()
            p.send("fuzz-after", b"after").result(timeout=30)
            p.commit_transaction()
        finally:
            p.close()
    except Exception as e:  # noqa: BLE001 - reported in the table
        problems.append(f"new topic / transaction after the fuzz: {type(e).__name__}: {e}")
    return problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=6000, help="garbage + hostile + kafka requests in all")
    ap.add_argument("--time-limit", type=float, default=300.0, help="seconds for the fuzzing phases")
    ap.add_argument("--records", type=int, default=2000, help="records written (and checked) before the fuzz")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=16, help="requests in flight at once")
    a = ap.parse_args()
    if not 1 <= a.requests <= 1_000_000 or not 0 < a.time_limit <= 3600 or not 0 <= a.records <= 1_000_000 \
            or not 1 <= a.threads <= 256:
        ap.error("--requests 1..1000000, --time-limit 0..3600 s, --records 0..1000000, --threads 1..256")
    rng = random.Random(a.seed)
    home = tempfile.mkdtemp(prefix="eoslab-fuzz-")
    rt = LocalRuntime(f"fuzz-{os.getpid()}", home=home, brokers=3, controllers=2, txn_coordinators=2)
    t_start = time.monotonic()
    rt.up()
    tally = Tally()
    checks: list[tuple[str, bool, str]] = []
    try:
        info = rt.info()
        boot = rt.bootstrap_all()
        written = write_records(boot, a.records)
        epoch_before = describe(rt).controller_epoch
        logs_before = log_bytes(rt)
        targets = {role: [n.address for n in info.nodes if n.role == role]
                   for role in ("broker", "controller", "txn-coordinator")}
        kafka_targets = [f"{n.host}:{port}" for n in info.nodes for port in [_kafka_port(rt, n)] if port]
        channels = {addr: grpc.insecure_channel(addr) for addrs in targets.values() for addr in addrs}
        methods = [(role, f"/{s.full_name}/{m.name}", m) for role, s in SERVICES for m in s.methods]
        phases = ["garbage", "hostile"] + (["kafka"] if kafka_targets else [])
        per_phase = a.requests // len(phases)
        deadline = time.monotonic() + a.time_limit
        with futures.ThreadPoolExecutor(a.threads) as pool:
            for phase in phases:
                pending = []
                for i in range(per_phase):
                    if time.monotonic() > deadline:
                        break
                    tally.requests[phase] += 1
                    if phase == "kafka":
                        pending.append(pool.submit(send_kafka, tally, rng.choice(kafka_targets),
                                                   random.Random(rng.random())))
                    else:
                        role, method, m = methods[i % len(methods)]
                        ch = channels[rng.choice(targets[role])]
                        body = rng.randbytes(rng.choice([1, 6, 50, 500, 5000])) if phase == "garbage" \
                            else hostile_request(m, rng)
                        out_cls = message_factory.GetMessageClass(m.output_type)
                        pending.append(pool.submit(send_one, tally, phase, ch, method, m, body, out_cls))
                    if i % 100 == 99:
                        liveness(rt, tally)
                    while len(pending) > 4 * a.threads:
                        pending = [f for f in pending if not f.done()]
                        time.sleep(0.005)
                futures.wait(pending)
        fuzz_seconds = time.monotonic() - t_start
        liveness(rt, tally)
        crashed = [n.name for n in rt.info().nodes if n.state != "running"]
        try:
            lost, dup, read_error = *records_lost(boot, written), ""
        except Exception as e:  # noqa: BLE001 - a read that fails is a failed check, reported in the table
            lost, dup, read_error = len(written), 0, f"read failed: {type(e).__name__}: {e}"
        d = describe(rt)
        bad_isr = [f"{s.topic}-{s.partition}" for s in d.partition_states
                   if len(set(s.isr)) != len(s.isr) or not set(s.isr) <= set(s.replicas)
                   or (s.leader >= 0 and s.leader not in s.isr)] if d else ["no active controller"]
        after = still_works(boot)
        checks = [
            ("no process crashed", not crashed, ", ".join(crashed)),
            ("liveness: every probe answered within 5 s", not tally.liveness_failures,
             "; ".join(tally.liveness_failures[:5])),
            (f"records written before ({len(written)}) read back once at their offsets",
             lost == 0 and dup == 0 and not read_error, read_error or f"{lost} lost, {dup} duplicated"),
            ("controller epoch unchanged", d is not None and d.controller_epoch == epoch_before,
             f"{epoch_before} -> {d.controller_epoch if d else '?'}"),
            ("every ISR a distinct subset of its replicas holding the leader", not bad_isr, ", ".join(bad_isr[:5])),
            ("a new topic and a new transaction work afterwards", not after, "; ".join(after)),
        ]
        print_table(a, tally, crashed, lost, checks, fuzz_seconds, log_bytes(rt) - logs_before)
        for ch in channels.values():
            ch.close()
    finally:
        passed = bool(checks) and all(ok for _, ok, _ in checks)
        if not passed:
            keep_logs(rt)
        rt.down()
        shutil.rmtree(home, ignore_errors=True)
    return 0 if passed else 1


def keep_logs(rt) -> None:
    """A failed fuzz keeps its services' logs (Jepsen's store/) under $EOSLAB_HOME, for the reader."""
    src = os.path.join(rt.dir, "logs")
    if not os.path.isdir(src):
        return
    dest = os.path.join(os.environ.get("EOSLAB_HOME") or tempfile.gettempdir(),
                        f"fuzz-failed-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}")
    shutil.copytree(src, dest, dirs_exist_ok=True)
    print(f"the services' logs of this failed fuzz are kept in {dest}")


def log_bytes(rt) -> int:
    d = os.path.join(rt.dir, "logs")
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)) if os.path.isdir(d) else 0


def print_table(a, tally: Tally, crashed, lost, checks, seconds, log_growth) -> None:
    print(f"\nbench/fuzz.py --requests {a.requests} --time-limit {a.time_limit:g} --records {a.records} "
          f"--seed {a.seed}  ({time.strftime('%Y-%m-%d', time.gmtime())}, {seconds:.0f} s in all)\n")
    print("| phase | requests | answered | refused / failed (gRPC status) | hangs |")
    print("|---|---:|---:|---|---:|")
    for phase in tally.requests:
        codes = {c: n for (p, c), n in tally.status.items() if p == phase}
        ok = codes.pop("answered" if phase == "kafka" else "OK", 0)
        rest = ", ".join(f"{c} {n}" for c, n in sorted(codes.items(), key=lambda x: -x[1])) or "-"
        print(f"| {phase} | {tally.requests[phase]} | {ok} | {rest} | {tally.hangs[phase]} |")
    print("\nKafka error codes in the answers: " + (", ".join(
        f"{c} {n}" for c, n in tally.kafka.most_common()) or "-"))
    print(f"\ncrashes: {len(crashed)}; records lost: {lost}; service logs grew by {log_growth / 1e6:.2f} MB\n")
    print("| check | result |")
    print("|---|---|")
    for name, ok, detail in checks:
        print(f"| {name} | {'ok' if ok else 'FAILED: ' + detail} |")


if __name__ == "__main__":
    sys.exit(main())
