"""Idempotent produce throughput and ack latency on the local runtime, idempotence on vs off.

Usage: python bench/produce.py [--records 300000] [--partitions 3] [--replication-factor 1] [--rounds 2]
                               [--rate RECORDS_PER_S] [--disk plain|lazy|both]

Starts its own local cluster (ZooKeeper, 1 controller, 3 brokers), sends
100-byte records with acks=all from one producer, and prints records/s and
p50/p99 ack latency for enable.idempotence=true and =false side by side.
Rounds alternate the two settings to even out noise. Each send passes a
callback, as Kafka's ProducerPerformance does. Without --rate the producer
sends as fast as it can (throughput; the latency then includes time queued
in the accumulator, up to buffer.memory); with --rate it sends on a fixed
schedule of that many records per second, and a record's latency runs from
its scheduled send time (so a producer that falls behind is charged for it)
to its acknowledgement. `--disk lazy` puts the brokers' data on the lazy
filesystem (docs/lazyfs.md); `--disk both` starts one cluster on plain
directories and one on lazyfs side by side and alternates rounds between
them, so both see the same load, and prints the lazyfs / plain ratio.
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
    ap.add_argument("--disk", choices=("plain", "lazy", "both"), default="plain",
                    help="the brokers' data directories: plain, on the lazy filesystem, or both side by side")
    a = ap.parse_args()
    disks = ["plain", "lazy"] if a.disk == "both" else [a.disk]
    home = tempfile.mkdtemp(prefix="eoslab-bench-")
    rts = {d: LocalRuntime(f"bench-produce-{d}", home=home, brokers=3, controllers=1,
                           disk="lazy" if d == "lazy" else None) for d in disks}
    results: dict[tuple[str, bool], list[dict]] = {(d, i): [] for d in disks for i in (True, False)}
    try:
        for d, rt in rts.items():
            print(f"starting a local cluster (1 controller, 3 brokers, {d} disks)...", file=sys.stderr)
            rt.up()
        mds = {d: ClusterMetadata(rt.info().bootstrap) for d, rt in rts.items()}
        for r in range(a.rounds):
            for d, rt in rts.items():
                for idem in (True, False):
                    topic = f"bench-{'idem' if idem else 'plain'}-{r}"
                    create_topic(mds[d], topic, a.partitions, a.replication_factor)
                    res = run_once(rt.info().bootstrap, topic, a.records, idem, a.rate)
                    results[(d, idem)].append(res)
                    print(f"round {r + 1}: {d} disks, idempotence={'on ' if idem else 'off'} "
                          f"{res['records_per_s']:>9,.0f} rec/s  p50 {res['p50_ms']:.1f} ms  "
                          f"p99 {res['p99_ms']:.1f} ms  errors {res['errors']}", file=sys.stderr)
        for md in mds.values():
            md.close()
    finally:
        for rt in rts.values():
            rt.down()
    med = {key: {k: statistics.median(x[k] for x in runs) for k in ("records_per_s", "p50_ms", "p99_ms")}
           for key, runs in results.items()}
    print(f"\n{a.records:,} records of 100 bytes, acks=all, {a.partitions} partitions on 3 brokers, "
          f"replication factor {a.replication_factor}, "
          f"one producer{f' at {a.rate:,.0f} records/s' if a.rate else ''}, median of {a.rounds} rounds; "
          f"load average {os.getloadavg()[0]:.1f}")
    for d in disks:
        on, off = med[(d, True)], med[(d, False)]
        print(f"{d + ' disks':<22}{'idempotence on':>16}{'idempotence off':>17}")
        print(f"{'records/s':<22}{on['records_per_s']:>16,.0f}{off['records_per_s']:>17,.0f}")
        print(f"{'ack latency p50 (ms)':<22}{on['p50_ms']:>16.1f}{off['p50_ms']:>17.1f}")
        print(f"{'ack latency p99 (ms)':<22}{on['p99_ms']:>16.1f}{off['p99_ms']:>17.1f}")
        cost = 100 * (1 - on["records_per_s"] / off["records_per_s"])
        print(f"cost of idempotence: {cost:.1f}% of throughput")
    if len(disks) == 2:
        ratio = med[("lazy", True)]["records_per_s"] / med[("plain", True)]["records_per_s"]
        print(f"lazyfs / plain, idempotent records/s: {ratio:.2f}")


if __name__ == "__main__":
    main()
