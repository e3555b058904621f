"""Leader failover under steady produce: SIGKILL the partition leader N times.

Usage: python bench/failover.py [--kills 20] [--session-timeout-ms 2000] [--cpu-hogs N] [--quiet-s S]

Starts a local cluster (3 brokers, 2 controllers; the ZooKeeper session timeout
defaults to the cluster's own default), a topic with replication factor 3 and
min.insync.replicas 2, and an idempotent acks=all producer that sends a record
every 2 ms. Each round SIGKILLs the current leader and measures the time from
the kill to the first successful ack of a record sent after the kill (an ack of
an earlier record may still arrive just after it), then restarts the broker and
waits until it is back in the ISR. Prints p50/p99/max, and checks that nothing
acknowledged was lost or duplicated.

The other side of a short session timeout is a live broker declared dead: with
`--cpu-hogs N`, N busy processes share the machine with the cluster for the
whole run, and the benchmark counts the brokers the controller declared gone
beyond the ones it killed (`spurious expiries`), including during `--quiet-s`
seconds of produce with no kill at all before the first kill.
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

    from eoslab.common.errors import KafkaError
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


def hog(stop_at: float) -> None:
    """A busy loop until `stop_at` (time.time()): one core's worth of someone else's work."""
    x = 0
    while time.time() < stop_at:
        for _ in range(100_000):
            x += 1


def brokers_declared_gone(rt) -> int:
    """How many broker departures the controllers logged ("brokers gone: [...]"), over every controller's
    log: the active one logs each departure once."""
    import glob
    import re
    n = 0
    for path in glob.glob(os.path.join(rt.dir, "logs", "controller-*.log*")):
        with open(path, errors="replace") as f:
            for m in re.finditer(r"brokers gone: \[([0-9, ]*)\]", f.read()):
                n += len([x for x in m.group(1).split(",") if x.strip()])
    return n


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--session-timeout-ms", type=int, default=LocalRuntime.DEFAULT_SESSION_TIMEOUT_MS)
    ap.add_argument("--cpu-hogs", type=int, default=0, help="busy processes beside the cluster for the whole run")
    ap.add_argument("--quiet-s", type=float, default=0.0,
                    help="seconds of produce with no kill before the first (counts spurious expiries alone)")
    a = ap.parse_args()
    import multiprocessing
    hogs = [multiprocessing.Process(target=hog, args=(time.time() + 3600,), daemon=True) for _ in range(a.cpu_hogs)]
    for h in hogs:
        h.start()
    load_before = os.getloadavg()[0]
    rt = LocalRuntime("bench-failover", home=tempfile.mkdtemp(prefix="eoslab-bench-"), brokers=3, controllers=2,
                      session_timeout_ms=a.session_timeout_ms)
    rt.up()
    try:
        boot = rt.bootstrap_all()
        md = ClusterMetadata(boot)
        create_topic(md, "failover", 1, 3, {"min.insync.replicas": "2"})
        acks: list[tuple[float, int]] = []
        sent = [0]                                  # the next record's number
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
                sent[0] = i
                time.sleep(0.002)

        t = threading.Thread(target=produce, daemon=True)
        t.start()
        times = []
        time.sleep(a.quiet_s)
        for k in range(a.kills):
            md.refresh(["failover"])
            leader = md.leader("failover", 0)[0]
            time.sleep(0.5)
            first_after = sent[0]            # sent after the kill starts: its ack needs the new leader
            t_kill = time.monotonic()
            rt.kill(f"broker-{leader}")
            while True:
                with lock:
                    after = [ts for ts, i in acks if i >= first_after]
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
        gone = brokers_declared_gone(rt)
    finally:
        rt.down()
        for h in hogs:
            h.terminate()
    lost = acked - set(values)
    print(f"\n{a.kills} leader kills (SIGKILL), ZooKeeper session timeout {a.session_timeout_ms} ms, "
          f"RF 3, min.insync.replicas 2, acks=all, idempotent; {a.cpu_hogs} CPU hogs, {a.quiet_s:g} s without "
          f"kills first; load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after")
    print(f"time from kill to next successful ack: p50 {percentile(times, 0.5) * 1000:.0f} ms, "
          f"p99 {percentile(times, 0.99) * 1000:.0f} ms, max {max(times) * 1000:.0f} ms")
    print(f"acknowledged {len(acked)}, read back {len(values)}, lost {len(lost)}, "
          f"duplicates {len(values) - len(set(values))}")
    print(f"brokers declared gone: {gone}, of them killed {a.kills}, spurious expiries {max(0, gone - a.kills)}")


if __name__ == "__main__":
    main()
