"""Transactional vs idempotent produce throughput at 10, 100 and 1000 records per transaction.

Usage: python bench/transactions.py [--records 30000] [--sizes 10,100,1000] [--rounds 3]
                                    [--replication-factor 3] [--partitions 3]
                                    [--commit-interval-ms MS]

Starts its own local cluster (ZooKeeper, 1 controller, 3 brokers, 2
transaction coordinators), then, alternating in each round: one idempotent
producer sending --records 100-byte records (acks=all, flushed at the end),
and one transactional producer sending the same number in transactions of N
records (begin, N sends, commit) for each N in --sizes (at N=10 a tenth of
the records, so a round stays short). Prints the median records/s of each
and the cost of transactions relative to the idempotent run of the same round,
with the fixed cost of one transaction that this implies. It also measures
the latency of one acks=all write of one record to a replicated partition
(the unit a transaction is made of: the coordinator's Ongoing, PrepareCommit
and CompleteCommit records, the markers, the data) and prints the ceiling
that five such writes in a row put on a single producer's transaction rate,
and the cluster's CPU (user + system time of every node process, from /proc)
per such write and per transaction.

With --commit-interval-ms MS, each round also runs a transactional producer
that sends the same --records as fast as it can and commits whenever MS ms
have passed since its transaction began (the way Kafka's authors measure the
cost of transactions), and prints its cost against the idempotent producer
of the same round in a row starting `transactional, MS ms commit interval`.
--sizes '' leaves out the fixed-size runs.

For each size it also prints where a commit's time goes (p50 of each, from
the producer's side): AddPartitionsToTxn (which the coordinator answers once
the previous transaction's markers and CompleteCommit are written, and
after writing this one's Ongoing record), the data (from that answer until
every record of the transaction is acknowledged, partition verification
included) and EndTxn (the PrepareCommit record).
"""
from __future__ import annotations

import argparse
import json
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from transactions_concurrent import cluster_cpu_s  # noqa: E402

VALUE = b"x" * 100


def idempotent(bootstrap: str, topic: str, records: int) -> float:
    p = KafkaProducer(bootstrap, ProducerConfig(linger_ms=5, batch_size=64 * 1024))
    try:
        p.send(topic, VALUE).result(30)
        t0 = time.perf_counter()
        for _ in range(records):
            p.send(topic, VALUE)
        p.flush()
        return records / (time.perf_counter() - t0)
    finally:
        p.close()


def replicated_write_ms(bootstrap: str, topic: str, pids: list[int], writes: int = 300) -> tuple[float, float]:
    """Median latency of one acks=all write of one record, sent alone (linger 0), and the cluster's
    CPU ms per such write."""
    p = KafkaProducer(bootstrap, ProducerConfig(linger_ms=0))
    try:
        p.send(topic, VALUE, partition=0).result(30)
        lat = []
        cpu0 = cluster_cpu_s(pids)
        for _ in range(writes):
            t0 = time.perf_counter()
            p.send(topic, VALUE, partition=0).result(30)
            lat.append(time.perf_counter() - t0)
        return 1000 * statistics.median(lat), 1000 * (cluster_cpu_s(pids) - cpu0) / writes
    finally:
        p.close()


def _ready_transactional(bootstrap: str, topic: str, tid: str) -> KafkaProducer:
    """A transactional producer that has committed one transaction (connections and coordinator known)."""
    p = KafkaProducer(bootstrap, ProducerConfig(linger_ms=5, batch_size=64 * 1024, transactional_id=tid))
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, VALUE)
        p.commit_transaction()
    except BaseException:
        p.close()
        raise
    return p


class Phases:
    """Times the producer's AddPartitionsToTxn and EndTxn calls and the data in between (while active,
    by wrapping TransactionRequests' methods: this process runs one transactional producer at a time)."""

    def __init__(self):
        self.ms: dict[str, list[float]] = {"AddPartitionsToTxn": [], "data": [], "EndTxn": []}
        self._added = None

    def __enter__(self):
        from clients.producer.transactions import TransactionRequests as TR
        self._orig = TR.add_partitions, TR.end_txn
        add, end = self._orig
        ph = self

        def add_partitions(tr, tps):
            t = time.perf_counter()
            try:
                return add(tr, tps)
            finally:
                ph._added = time.perf_counter()
                ph.ms["AddPartitionsToTxn"].append(1000 * (ph._added - t))

        def end_txn(tr, committed):
            t = time.perf_counter()
            if ph._added is not None:         # flush() is done: every record of the transaction is acknowledged
                ph.ms["data"].append(1000 * (t - ph._added))
                ph._added = None
            try:
                return end(tr, committed)
            finally:
                ph.ms["EndTxn"].append(1000 * (time.perf_counter() - t))
        TR.add_partitions, TR.end_txn = add_partitions, end_txn
        return self

    def __exit__(self, *exc):
        from clients.producer.transactions import TransactionRequests as TR
        TR.add_partitions, TR.end_txn = self._orig

    def medians(self) -> dict[str, float]:
        return {k: statistics.median(v) for k, v in self.ms.items() if v}


def transactional(bootstrap: str, topic: str, records: int, per_txn: int, tid: str) -> tuple[float, float, dict]:
    with Phases() as ph:                  # before the producer exists: its sender binds add_partitions
        p = _ready_transactional(bootstrap, topic, tid)
        try:
            for v in ph.ms.values():      # the warm-up transaction is not measured
                v.clear()
            commits = []
            t0 = time.perf_counter()
            for start in range(0, records, per_txn):
                p.begin_transaction()
                for _ in range(min(per_txn, records - start)):
                    p.send(topic, VALUE)
                c0 = time.perf_counter()
                p.commit_transaction()
                commits.append(time.perf_counter() - c0)
            rate = records / (time.perf_counter() - t0)
        finally:
            p.close()
    return rate, 1000 * statistics.median(commits), ph.medians()


def commit_interval(bootstrap: str, topic: str, records: int, interval_ms: int, tid: str) -> tuple[float, int]:
    """Send `records` as fast as possible in transactions committed every `interval_ms`: (records/s,
    transactions)."""
    p = _ready_transactional(bootstrap, topic, tid)
    try:
        interval = interval_ms / 1000.0
        txns = 0
        t0 = time.perf_counter()
        p.begin_transaction()
        began = time.perf_counter()
        for i in range(records):
            p.send(topic, VALUE)
            if i & 63 == 0 and time.perf_counter() - began >= interval:
                p.commit_transaction()
                txns += 1
                p.begin_transaction()
                began = time.perf_counter()
        p.commit_transaction()
        return records / (time.perf_counter() - t0), txns + 1
    finally:
        p.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=30_000)
    ap.add_argument("--sizes", default="10,100,1000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--replication-factor", type=int, default=3)
    ap.add_argument("--commit-interval-ms", type=int, default=0,
                    help="also run a producer that commits every MS ms (0: not)")
    a = ap.parse_args()
    try:
        sizes = [int(x) for x in a.sizes.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--sizes takes comma-separated record counts, got {a.sizes!r}")
    if any(n < 1 for n in sizes) or a.records < 1 or a.rounds < 1 or a.commit_interval_ms < 0:
        ap.error("--sizes, --records and --rounds must be positive and --commit-interval-ms not negative")
    home = tempfile.mkdtemp(prefix="eoslab-bench-")
    rt = LocalRuntime("bench-txn", home=home, brokers=3, controllers=1, txn_coordinators=2)
    print("starting a local cluster (1 controller, 3 brokers, 2 transaction coordinators)...", file=sys.stderr)
    rt.up()
    try:
        boot = rt.bootstrap_all()
        md = ClusterMetadata(boot)
        create_topic(md, "bench-txn", a.partitions, a.replication_factor)
        md.close()
        pids = [n.pid for n in rt.info().nodes if n.pid]
        rows: dict[str, list] = {"idempotent": [], "write-ms": [], "write-cpu-ms": [], "interval": [],
                                 "interval-txns": []}
        for n in sizes:
            rows[f"txn-{n}"] = []
            rows[f"commit-ms-{n}"] = []
            rows[f"txn-cpu-ms-{n}"] = []
            for k in ("AddPartitionsToTxn", "data", "EndTxn"):
                rows[f"{k}-ms-{n}"] = []
        for r in range(a.rounds):
            write_ms, write_cpu = replicated_write_ms(boot, "bench-txn", pids)
            rows["write-ms"].append(write_ms)
            rows["write-cpu-ms"].append(write_cpu)
            rows["idempotent"].append(idempotent(boot, "bench-txn", a.records))
            if a.commit_interval_ms:
                rate, txns = commit_interval(boot, "bench-txn", a.records, a.commit_interval_ms, f"bench-int-{r}")
                rows["interval"].append(rate)
                rows["interval-txns"].append(txns)
            for n in sizes:
                recs = a.records // 10 if n <= 10 else a.records
                cpu0 = cluster_cpu_s(pids)
                rate, commit_ms, phases = transactional(boot, "bench-txn", recs, n, f"bench-{n}")
                for k, v in phases.items():
                    rows[f"{k}-ms-{n}"].append(v)
                rows[f"txn-cpu-ms-{n}"].append(1000 * (cluster_cpu_s(pids) - cpu0) / (recs / n + 1))
                rows[f"txn-{n}"].append(rate)
                rows[f"commit-ms-{n}"].append(commit_ms)
            print(json.dumps({k: round(v[-1], 1) for k, v in rows.items() if v}), file=sys.stderr)
        idem = statistics.median(rows["idempotent"])
        write_ms = statistics.median(rows["write-ms"])
        print(f"{'producer':<36}{'records/s':>12}{'cost':>8}{'commit p50 ms':>16}{'ms/txn fixed':>14}"
              f"{'ceiling rec/s':>15}{'cluster CPU ms/txn':>20}")
        print(f"{'idempotent':<36}{idem:>12,.0f}")
        for n in sizes:
            rate = statistics.median(rows[f"txn-{n}"])
            cm = statistics.median(rows[f"commit-ms-{n}"])
            fixed = 1000 * n * (1 / rate - 1 / idem)
            ceiling = n / (5 * write_ms / 1000 + n / idem)
            print(f"{f'transactional, {n}/txn':<36}{rate:>12,.0f}{(1 - rate / idem) * 100:>7.0f}%{cm:>16.1f}"
                  f"{fixed:>14.1f}{ceiling:>15,.0f}{statistics.median(rows[f'txn-cpu-ms-{n}']):>20.1f}")
        for n in sizes:
            parts = ", ".join(f"{k} {statistics.median(rows[f'{k}-ms-{n}']):.1f} ms"
                              for k in ("AddPartitionsToTxn", "data", "EndTxn") if rows[f"{k}-ms-{n}"])
            print(f"  {n}/txn, p50 of each part: {parts}")
        if a.commit_interval_ms:
            rate = statistics.median(rows["interval"])
            label = f"transactional, {a.commit_interval_ms} ms commit interval"
            print(f"{label:<36}{rate:>12,.0f}{(1 - rate / idem) * 100:>7.1f}%"
                  f"   ({statistics.median(rows['interval-txns']):.0f} transactions per round)")
        print(f"one acks=all write of one record (RF {a.replication_factor}): p50 {write_ms:.2f} ms, cluster CPU "
              f"{statistics.median(rows['write-cpu-ms']):.2f} ms per write; a transaction makes at least 5 such "
              f"writes one after another (Ongoing, data, PrepareCommit, markers, CompleteCommit), so 'ceiling' "
              f"is the most a single producer can reach")
    finally:
        rt.down()


if __name__ == "__main__":
    main()
