"""Leader failover under steady produce: SIGKILL the partition leader N times.

Usage: python bench/failover.py [--kills 20] [--session-timeout-ms 1000]

Starts a local cluster (3 brokers, 2 controllers), a topic with replication
factor 3 and min.insync.replicas 2, and an idempotent acks=all producer that
sends a record every 2 ms. Each round SIGKILLs the current leader and measures
the time from the kill to the producer's next successful ack, then restarts
the broker and waits until it is back in the ISR. Prints p50/p99/max, and
checks that nothing acknowledged was lost or duplicated.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from clients.admin import create_topic  # noqa: E402
from clients.consumer import KafkaConsumer  # noqa: E402
from clients.metadata import ClusterMetadata  # noqa: E402
from clients.producer import KafkaProducer, ProducerConfig  # noqa: E402
from cluster.local import LocalRuntime  # noqa: E402


def in_sync(md, restarted: str) -> int:
    """The ISR size of failover-0, asked of any broker that answers: the one just restarted may not
    listen yet (UNAVAILABLE), and the metadata may still name it first."""
    import grpc

    from clients.errors import KafkaError
    from eoslab.v1 import broker_pb2
    try:
        md.refresh(["failover"])
    except KafkaError:
        return 0
    for addr in md.addresses():
        try:
            r = md.stub(addr).Metadata(broker_pb2.MetadataRequest(topics=["failover"]), timeout=3)
        except grpc.RpcError:
            continue
        if r.topics and r.topics[0].partitions:
            return len(r.topics[0].partitions[0].isr)
    return 0


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--session-timeout-ms", type=int, default=1000)
    a = ap.parse_args()
    rt = LocalRuntime("bench-failover", home=tempfile.mkdtemp(prefix="eoslab-bench-"), brokers=3, controllers=2,
                      session_timeout_ms=a.session_timeout_ms)
    rt.up()
    try:
        boot = rt.bootstrap_all()
        md = ClusterMetadata(boot)
        create_topic(md, "failover", 1, 3, {"min.insync.replicas": "2"})
        acks: list[tuple[float, int]] = []
        lock, stop = threading.Lock(), threading.Event()
        p = KafkaProducer(boot, ProducerConfig(linger_ms=0, request_timeout_ms=1000, retry_backoff_ms=20))

        def on_ack(i):
            def cb(f):
                if f.exception() is None:
                    with lock:
                        acks.append((time.monotonic(), i))
            return cb

        def produce():
            i = 0
            while not stop.is_set():
                p.send("failover", b"%d" % i, partition=0).add_done_callback(on_ack(i))
                i += 1
                time.sleep(0.002)

        t = threading.Thread(target=produce, daemon=True)
        t.start()
        times = []
        for k in range(a.kills):
            md.refresh(["failover"])
            leader = md.leader("failover", 0)[0]
            time.sleep(0.5)
            t_kill = time.monotonic()
            rt.kill(f"broker-{leader}")
            while True:
                with lock:
                    after = [ts for ts, _ in acks if ts > t_kill]
                if after:
                    times.append(after[0] - t_kill)
                    break
                if time.monotonic() - t_kill > 60:
                    raise SystemExit("no ack within 60 s of the kill")
                time.sleep(0.005)
            print(f"kill {k + 1:>2}: broker-{leader}, next ack after {times[-1] * 1000:.0f} ms", file=sys.stderr)
            rt.start(f"broker-{leader}")
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:      # back in the ISR before the next round
                if rt.node_state(f"broker-{leader}") == "running" and in_sync(md, f"broker-{leader}") == 3:
                    break
                time.sleep(0.1)
        stop.set()
        t.join()
        p.flush()
        p.close()
        with lock:
            acked = {i for _, i in acks}
        c = KafkaConsumer(boot)
        n = md.partitions_for("failover")
        values = [int(r.value) for r in c.read_all([("failover", q) for q in range(n)], timeout=60)]
        c.close()
        md.close()
    finally:
        rt.down()
    lost = acked - set(values)
    print(f"\n{a.kills} leader kills (SIGKILL), ZooKeeper session timeout {a.session_timeout_ms} ms, "
          f"RF 3, min.insync.replicas 2, acks=all, idempotent")
    print(f"time from kill to next successful ack: p50 {percentile(times, 0.5) * 1000:.0f} ms, "
          f"p99 {percentile(times, 0.99) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms")
    print(f"acknowledged {len(acked)}, read back {len(values)}, lost {len(lost)}, "
          f"duplicates {len(values) - len(set(values))}")


if __name__ == "__main__":
    main()
