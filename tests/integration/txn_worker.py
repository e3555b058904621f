"""A transactional producer or copier in its own process, driven by tests through stdin/stdout.

`producer` mode: init_transactions, begin, send --count records, flush, print
"SENT"; then on the line "commit" on stdin: send one more record and commit,
printing JSON {"send_error", "commit_error"} (error names or null).

`copier` mode: Kafka's transactional copier: read from --input with the
group's committed offsets, write each record to --output in a transaction
with the offsets (send_offsets_to_transaction), commit every --batch
records (about); runs until the input's end offsets sum to --total and it has
read them all, printing JSON progress lines.
"""
from __future__ import annotations

import argparse
import json
import sys

from clients.consumer import KafkaConsumer
from eoslab.common.errors import KafkaError
from clients.producer import KafkaProducer, ProducerConfig


def _name(e: BaseException | None):
    return None if e is None else getattr(e, "name", type(e).__name__)


def producer_mode(a) -> None:
    p = KafkaProducer(a.bootstrap, ProducerConfig(transactional_id=a.transactional_id, linger_ms=0,
                                                  request_timeout_ms=3000, delivery_timeout_ms=20000))
    p.init_transactions()
    p.begin_transaction()
    for i in range(a.count):
        p.send(a.topic, f"{a.prefix}{i}".encode(), partition=i % a.partitions)
    p.flush()
    print(json.dumps({"sent": a.count, "producer_id": p.producer_id, "epoch": p.producer_epoch}), flush=True)
    print("SENT", flush=True)
    sys.stdin.readline()
    out = {"send_error": None, "commit_error": None}
    try:
        f = p.send(a.topic, f"{a.prefix}late".encode(), partition=0)
        p.flush()
        out["send_error"] = _name(f.exception())
    except KafkaError as e:
        out["send_error"] = e.name
    try:
        p.commit_transaction()
    except KafkaError as e:
        out["commit_error"] = e.name
    print(json.dumps(out), flush=True)
    p.close(5)


def copier_mode(a) -> None:
    tps = [(a.input, i) for i in range(a.partitions)]
    p = KafkaProducer(a.bootstrap, ProducerConfig(transactional_id=a.transactional_id, linger_ms=2,
                                                  request_timeout_ms=3000, delivery_timeout_ms=60000))
    p.init_transactions(timeout=120)   # first: fences a previous copier and aborts its transaction
    c = KafkaConsumer(a.bootstrap, isolation_level="read_committed", group_id=a.group, fetch_max_bytes=a.batch * 64)
    c.assign(tps)
    for tp, off in c.committed(tps).items():   # require_stable: waits out a pending commit
        c.seek(tp, off if off >= 0 else 0)
    copied = 0
    while True:
        ends = c.end_offsets(tps)
        if all(c.positions[tp] >= ends[tp] for tp in tps) and sum(ends.values()) >= a.total:
            break
        recs = c.poll(500)
        if not recs:
            continue
        p.begin_transaction()
        positions = {}
        for r in recs:
            p.send(a.output, r.value, key=r.key, partition=r.partition)
            positions[(r.topic, r.partition)] = r.offset + 1
        p.send_offsets_to_transaction(positions, c.group_metadata())
        p.commit_transaction(timeout=120)
        copied += len(recs)
        print(json.dumps({"copied": copied}), flush=True)
    print("DONE", flush=True)
    p.close(5)
    c.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["producer", "copier"])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--transactional-id", required=True)
    ap.add_argument("--topic", default="t")
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--count", type=int, default=10)
    ap.add_argument("--prefix", default="z")
    ap.add_argument("--input", default="in")
    ap.add_argument("--output", default="out")
    ap.add_argument("--group", default="copier")
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--total", type=int, default=0)
    a = ap.parse_args()
    producer_mode(a) if a.mode == "producer" else copier_mode(a)


if __name__ == "__main__":
    main()
