"""Many producers at once: transactional vs idempotent throughput, and the cluster's CPU per transaction.

Usage: python bench/transactions_concurrent.py [--producers 8] [--records 40000] [--per-txn 100]
                                               [--rounds 2]

Starts its own local cluster (ZooKeeper, 1 controller, 3 brokers, 2
transaction coordinators; a 3-partition topic, RF 3), then in each round runs
--producers producer processes at once, first idempotent (acks=all, flushed
at the end), then transactional (each its own transactional.id, committing
every --per-txn records); --records 100-byte records in all, split evenly.
Throughput is all records over the time from the first producer's start to
the last one's end (the producers start together at a barrier, after
connecting). The cluster's CPU is read from /proc for every node process
(user + system time) before and after each run, so the table says how much
CPU of the cluster one transaction costs, which bounds what more producers
can add on this machine. At the end it measures the cluster's CPU for one
acks=all write of one record (500 writes, one at a time), the unit a
transaction is made of.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from clients.admin import create_topic  # noqa: E402
from clients.metadata import ClusterMetadata  # noqa: E402
from cluster.local import LocalRuntime  # noqa: E402

VALUE = b"x" * 100
TOPIC = "bench-txn-concurrent"


def _producer(bootstrap: str, tid: str, records: int, per_txn: int, barrier, out) -> None:
    from clients.producer import KafkaProducer, ProducerConfig   # in the child: gRPC is not fork-safe
    p = KafkaProducer(bootstrap, ProducerConfig(linger_ms=5, batch_size=64 * 1024, transactional_id=tid or None))
    try:
        if tid:
            p.init_transactions()
        else:
            p.send(TOPIC, VALUE).result(30)
        barrier.wait()
        t0 = time.perf_counter()
        if tid:
            for start in range(0, records, per_txn):
                p.begin_transaction()
                for _ in range(min(per_txn, records - start)):
                    p.send(TOPIC, VALUE)
                p.commit_transaction()
        else:
            for _ in range(records):
                p.send(TOPIC, VALUE)
            p.flush()
        out.put((t0, time.perf_counter()))
    finally:
        p.close()


def cluster_cpu_s(pids: list[int]) -> float:
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick    # utime, stime
    return total


def write_cpu_ms(bootstrap: str, pids: list[int], writes: int = 500) -> float:
    """The cluster's CPU for one acks=all write of one record, sent alone (linger 0)."""
    from clients.producer import KafkaProducer, ProducerConfig
    p = KafkaProducer(bootstrap, ProducerConfig(linger_ms=0))
    try:
        p.send(TOPIC, VALUE, partition=0).result(30)
        cpu0 = cluster_cpu_s(pids)
        for _ in range(writes):
            p.send(TOPIC, VALUE, partition=0).result(30)
        return 1000 * (cluster_cpu_s(pids) - cpu0) / writes
    finally:
        p.close()


def run(bootstrap: str, pids: list[int], producers: int, records: int, per_txn: int, tag: str | None):
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(producers + 1), ctx.Queue()
    each = records // producers
    procs = [ctx.Process(target=_producer, args=(bootstrap, f"{tag}-{i}" if tag else "", each, per_txn,
                                                 barrier, out)) for i in range(producers)]
    for p in procs:
        p.start()
    barrier.wait(120)
    cpu0 = cluster_cpu_s(pids)
    spans = [out.get(timeout=600) for _ in procs]
    cpu = cluster_cpu_s(pids) - cpu0
    for p in procs:
        p.join(30)
    wall = max(e for _, e in spans) - min(s for s, _ in spans)
    return each * producers / wall, cpu, wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--producers", type=int, default=8)
    ap.add_argument("--records", type=int, default=40_000)
    ap.add_argument("--per-txn", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    if a.producers < 1 or a.records < a.producers or a.per_txn < 1:
        ap.error("need --producers >= 1, --records >= --producers and --per-txn >= 1")
    home = tempfile.mkdtemp(prefix="eoslab-bench-")
    rt = LocalRuntime("bench-txn-conc", home=home, brokers=3, controllers=1, txn_coordinators=2)
    print("starting a local cluster (1 controller, 3 brokers, 2 transaction coordinators)...", file=sys.stderr)
    rt.up()
    try:
        boot = rt.bootstrap_all()
        md = ClusterMetadata(boot)
        create_topic(md, TOPIC, 3, 3)
        md.close()
        pids = [n.pid for n in rt.info().nodes if n.pid]
        rows: dict[str, list] = {"idem": [], "txn": [], "idem-cpu": [], "txn-cpu": [], "idem-wall": [],
                                 "txn-wall": []}
        for r in range(a.rounds):
            for kind, tag in (("idem", None), ("txn", f"conc-{r}")):
                rate, cpu, wall = run(boot, pids, a.producers, a.records, a.per_txn, tag)
                rows[kind].append(rate)
                rows[f"{kind}-cpu"].append(cpu)
                rows[f"{kind}-wall"].append(wall)
                print(f"round {r + 1} {kind}: {rate:,.0f} records/s, cluster CPU {cpu:.1f} s in {wall:.1f} s",
                      file=sys.stderr)
        idem, txn = statistics.median(rows["idem"]), statistics.median(rows["txn"])
        txns = (a.records // a.producers) * a.producers / a.per_txn
        each = (a.records // a.producers) * a.producers
        print(f"{a.producers} producers at once, {a.per_txn} records per transaction, median of {a.rounds} rounds")
        print(f"{'producers':<26}{'records/s':>12}{'cost':>8}{'cluster CPU s':>15}{'wall s':>9}"
              f"{'CPU ms per':>14}")
        print(f"{'idempotent':<26}{idem:>12,.0f}{'':>8}{statistics.median(rows['idem-cpu']):>15.1f}"
              f"{statistics.median(rows['idem-wall']):>9.1f}{1000 * statistics.median(rows['idem-cpu']) / each * a.per_txn:>10.2f}"
              f" /{a.per_txn} rec")
        print(f"{'transactional':<26}{txn:>12,.0f}{(1 - txn / idem) * 100:>7.0f}%"
              f"{statistics.median(rows['txn-cpu']):>15.1f}{statistics.median(rows['txn-wall']):>9.1f}"
              f"{1000 * statistics.median(rows['txn-cpu']) / txns:>10.2f} /txn")
        print(f"one acks=all write of one record alone: {write_cpu_ms(boot, pids):.2f} ms of cluster CPU")
        print(f"({os.cpu_count()} cores; cluster CPU counts ZooKeeper, the controller, the brokers and the "
              f"coordinators, not the producers)")
    finally:
        rt.down()


if __name__ == "__main__":
    main()
