"""librdkafka's idempotent produce throughput against the lab, beside the lab's own client, in one run.

Usage: python bench/real_clients.py [--records 100000] [--partitions 3] [--rounds 2] [--profile DIR]

Starts its own local cluster (ZooKeeper, 1 controller, 3 brokers, no
transaction coordinators), creates one topic with replication factor 3 and
min.insync.replicas 2, and sends 100-byte records with acks=all and
enable.idempotence=true from one producer: confluent-kafka (librdkafka) over
the brokers' Kafka listeners, and the lab's KafkaProducer over gRPC. Rounds
alternate the two clients to even out noise. Prints records/s and p50/p99
ack latency (send to delivery report) per client and round, the CPU seconds
the brokers spent per 1000 records, and the versions of both clients.

With --profile DIR, py-spy samples every broker during each round (`py-spy record --gil --nonblocking
--format raw`: the thread holding the GIL, 100 Hz, without pausing the broker; files
`DIR/<client>-<round>-<broker>.txt`) and the run ends with each
client's top frames over all its rounds and brokers: by self time (the frame on top of the stack)
and by total time (anywhere on it), as shares of the busy samples.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from clients.admin import create_topic  # noqa: E402
from clients.metadata import ClusterMetadata  # noqa: E402
from clients.producer import KafkaProducer, ProducerConfig  # noqa: E402
from cluster.local import LocalRuntime  # noqa: E402

VALUE = b"x" * 100
PY_SPY = shutil.which("py-spy", path=os.path.dirname(sys.executable)) or shutil.which("py-spy") or "py-spy"


def _brokers_cpu(rt) -> float:
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for n in rt.info().nodes:
        if n.role == "broker" and n.pid:
            with open(f"/proc/{n.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _summary(lat: list[float], records: int, elapsed: float, errors: int) -> dict:
    lat.sort()
    return {"records_per_s": round(records / elapsed), "p50_ms": round(1000 * lat[len(lat) // 2], 1),
            "p99_ms": round(1000 * lat[int(len(lat) * 0.99)], 1), "errors": errors}


def librdkafka_round(kafka_bootstrap: str, topic: str, records: int) -> dict:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 5, "batch.size": 64 * 1024, "queue.buffering.max.messages": 2_000_000})
    p.produce(topic, VALUE)
    p.flush(30)                      # warm: producer id, metadata, connections
    lat: list[float] = []
    errors = [0]

    def report(err, _msg, sent):
        if err is not None:
            errors[0] += 1
        lat.append(time.perf_counter() - sent)
    t0 = time.perf_counter()
    for _ in range(records):
        sent = time.perf_counter()
        while True:
            try:
                p.produce(topic, VALUE, on_delivery=lambda err, msg, s=sent: report(err, msg, s))
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    left = p.flush(120)
    elapsed = time.perf_counter() - t0
    return _summary(lat, records, elapsed, errors[0] + left)


def lab_round(bootstrap: str, topic: str, records: int) -> dict:
    cfg = ProducerConfig(acks=-1, enable_idempotence=True, linger_ms=5, batch_size=64 * 1024)
    p = KafkaProducer(bootstrap, cfg)
    p.send(topic, VALUE).result(30)
    lat: list[float] = []
    t0 = time.perf_counter()
    futs = []
    for _ in range(records):
        sent = time.perf_counter()
        f = p.send(topic, VALUE)
        f.add_done_callback(lambda _f, s=sent: lat.append(time.perf_counter() - s))
        futs.append(f)
    p.flush()
    elapsed = time.perf_counter() - t0
    errors = sum(1 for f in futs if f.exception() is not None)
    p.close()
    return _summary(lat, records, elapsed, errors)


def start_profiles(rt, out_dir: str, tag: str) -> list[tuple[subprocess.Popen, str]]:
    """py-spy on every broker until stop_profiles (raw collapsed stacks of the thread holding the GIL)."""
    procs = []
    for n in rt.info().nodes:
        if n.role == "broker" and n.pid:
            path = os.path.join(out_dir, f"{tag}-{n.name}.txt")
            procs.append((subprocess.Popen([PY_SPY, "record", "--rate", "100", "--gil", "--nonblocking", "--format", "raw", "--pid",
                                            str(n.pid), "--output", path], stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL), path))
    return procs


def stop_profiles(procs) -> None:
    for p, _ in procs:
        p.send_signal(signal.SIGINT)      # py-spy writes its file on SIGINT
    for p, _ in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()


def _frame_name(frame: str) -> str:
    """`func (path/file.py:12)` -> `func (file.py)`: one name for a function whatever line was sampled."""
    func, _, where = frame.partition(" (")
    return f"{func} ({os.path.basename(where.rsplit(':', 1)[0])})" if where else func


def top_frames(paths: list[str], n: int = 15) -> dict:
    """Self and total shares of the busy samples in py-spy's raw files (`frame;frame;... count`)."""
    own, total, samples = collections.Counter(), collections.Counter(), 0
    for path in paths:
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for line in f:
                stack, _, count = line.rstrip("\n").rpartition(" ")
                if not stack or not count.isdigit():
                    continue
                c = int(count)
                frames = [_frame_name(fr) for fr in stack.split(";")]
                if not frames:
                    continue
                samples += c
                own[frames[-1]] += c
                for fr in set(frames):
                    total[fr] += c
    pct = (lambda k: round(100 * k / samples, 1)) if samples else (lambda k: 0.0)
    return {"busy_samples": samples, "self": [(f, pct(k)) for f, k in own.most_common(n)],
            "total": [(f, pct(k)) for f, k in total.most_common(n)]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--profile", metavar="DIR", help="sample the brokers with py-spy during each round")
    a = ap.parse_args()
    if a.profile:
        os.makedirs(a.profile, exist_ok=True)
    import confluent_kafka
    home = tempfile.mkdtemp(prefix="eoslab-bench-")
    rt = LocalRuntime("bench-real-clients", home=home, brokers=3, controllers=1, txn_coordinators=0)
    print("starting a local cluster (1 controller, 3 brokers)...", file=sys.stderr)
    rt.up()
    try:
        info = rt.info()
        md = ClusterMetadata(info.bootstrap)
        topic = "bench-real"
        create_topic(md, topic, a.partitions, 3, configs={"min.insync.replicas": "2"})
        md.close()
        results, profiles = [], collections.defaultdict(list)
        for r in range(a.rounds):
            for name, fn, boot in (("librdkafka", librdkafka_round, info.kafka_bootstrap),
                                   ("eoslab", lab_round, info.bootstrap)):
                procs = start_profiles(rt, a.profile, f"{name}-{r + 1}") if a.profile else []
                cpu0 = _brokers_cpu(rt)
                res = fn(boot, topic, a.records)
                res["broker_cpu_s_per_1000"] = round(1000 * (_brokers_cpu(rt) - cpu0) / a.records, 4)
                stop_profiles(procs)
                profiles[name] += [path for _, path in procs]
                res.update(client=name, round=r + 1)
                results.append(res)
                print(json.dumps(res), flush=True)
        print(json.dumps({"records": a.records, "partitions": a.partitions, "replication_factor": 3, "acks": "all",
                          "confluent_kafka": confluent_kafka.version(),
                          "librdkafka": confluent_kafka.libversion()[0]}))
        for name, paths in profiles.items():
            print(json.dumps({"profile": name, **top_frames(paths)}))
    finally:
        rt.down()


if __name__ == "__main__":
    main()
