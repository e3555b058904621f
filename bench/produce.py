"""Idempotent produce throughput and ack latency on the local runtime, idempotence on vs off.

Usage: python bench/produce.py [--records 300000] [--partitions 3] [--replication-factor 1] [--rounds 2]
                               [--rate RECORDS_PER_S]

Starts its own local cluster (ZooKeeper, 1 controller, 3 brokers), sends
100-byte records with acks=all from one producer, and prints records/s and
p50/p99 ack latency for enable.idempotence=true and =false side by side.
Rounds alternate the two settings to even out noise. Each send passes a
callback, as Kafka's ProducerPerformance does. Without --rate the producer
sends as fast as it can (throughput; the latency then includes time queued
in the accumulator, up to buffer.memory); with --rate it sends on a fixed
schedule of that many records per second, and a record's latency runs from
its scheduled send time (so a producer that falls behind is charged for it)
to its acknowledgement.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from clients.admin import create_topic  # noqa: E402
from clients.metadata import ClusterMetadata  # noqa: E402
from clients.producer import KafkaProducer, ProducerConfig  # noqa: E402
from cluster.local import LocalRuntime  # noqa: E402


def run_once(bootstrap: str, topic: str, records: int, idempotent: bool, rate: float = 0.0) -> dict:
    cfg = ProducerConfig(acks=-1, enable_idempotence=idempotent, linger_ms=5, batch_size=64 * 1024)
    value = b"x" * 100
    lat: list[float] = []
    p = KafkaProducer(bootstrap, cfg)
    p.send(topic, value).result(30)  # warm: producer id, metadata, connections
    t0 = time.perf_counter()
    now = time.perf_counter
    errors = []                  # the callbacks count failures: no future is kept (as ProducerPerformance)

    def done(_md, e, s):
        lat.append(now() - s)
        if e is not None:
            errors.append(e)
    for i in range(records):     # a callback per record, as Kafka's ProducerPerformance passes to send()
        if rate:
            sent = t0 + i / rate
            ahead = sent - now()
            if ahead > 0.001:
                time.sleep(ahead)
        else:
            sent = now()
        p.send(topic, value, callback=lambda md, e, s=sent: done(md, e, s))
    p.flush()
    elapsed = time.perf_counter() - t0
    p.close()
    lat.sort()
    return {"records_per_s": records / elapsed, "p50_ms": 1000 * lat[len(lat) // 2],
            "p99_ms": 1000 * lat[int(len(lat) * 0.99)], "errors": len(errors) + records - len(lat)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--replication-factor", type=int, default=1)
    ap.add_argument("--rate", type=float, default=0.0,
                    help="records per second on a fixed schedule (default: as fast as the producer can)")
    a = ap.parse_args()
    home = tempfile.mkdtemp(prefix="eoslab-bench-")
    rt = LocalRuntime("bench-produce", home=home, brokers=3, controllers=1)
    print("starting a local cluster (1 controller, 3 brokers)...", file=sys.stderr)
    rt.up()
    try:
        boot = rt.info().bootstrap
        md = ClusterMetadata(boot)
        results: dict[bool, list[dict]] = {True: [], False: []}
        for r in range(a.rounds):
            for idem in (True, False):
                topic = f"bench-{'idem' if idem else 'plain'}-{r}"
                create_topic(md, topic, a.partitions, a.replication_factor)
                res = run_once(boot, topic, a.records, idem, a.rate)
                results[idem].append(res)
                print(f"round {r + 1}: idempotence={'on ' if idem else 'off'} "
                      f"{res['records_per_s']:>9,.0f} rec/s  p50 {res['p50_ms']:.1f} ms  "
                      f"p99 {res['p99_ms']:.1f} ms  errors {res['errors']}", file=sys.stderr)
        md.close()
    finally:
        rt.down()
    on = {k: statistics.median(x[k] for x in results[True]) for k in ("records_per_s", "p50_ms", "p99_ms")}
    off = {k: statistics.median(x[k] for x in results[False]) for k in ("records_per_s", "p50_ms", "p99_ms")}
    print(f"\n{a.records:,} records of 100 bytes, acks=all, {a.partitions} partitions on 3 brokers, "
          f"replication factor {a.replication_factor}, "
          f"one producer{f' at {a.rate:,.0f} records/s' if a.rate else ''}, median of {a.rounds} rounds; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'':<22}{'idempotence on':>16}{'idempotence off':>17}")
    print(f"{'records/s':<22}{on['records_per_s']:>16,.0f}{off['records_per_s']:>17,.0f}")
    print(f"{'ack latency p50 (ms)':<22}{on['p50_ms']:>16.1f}{off['p50_ms']:>17.1f}")
    print(f"{'ack latency p99 (ms)':<22}{on['p99_ms']:>16.1f}{off['p99_ms']:>17.1f}")
    cost = 100 * (1 - on["records_per_s"] / off["records_per_s"])
    print(f"cost of idempotence: {cost:.1f}% of throughput")


if __name__ == "__main__":
    main()
