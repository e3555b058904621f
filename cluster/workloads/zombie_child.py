"""`python -m cluster.workloads.zombie_child`: one instance of a transactional.id, in its own process.

It inits the id (recorded as an `init-producer` op with `producer`), then runs transactions
(f "txn", decided by cluster.workloads.txn_ops) until the parent says stop or the producer is
fenced. Between a transaction's last acknowledged send and its EndTxn it reports the checkpoint
"flushed" and waits: that is where the zombie workload pauses it (SIGSTOP) or cuts it off from the
coordinators, with records of an open transaction in the log. Values come from --value-base up,
so they are unique across every instance of a run. Ops go to the parent (cluster.workloads.remote).
"""
from __future__ import annotations

import argparse
import itertools
import json
import random
import time

from clients.producer import KafkaProducer, ProducerConfig
from cluster.workloads.base import outcome, producer_field
from cluster.workloads.remote import ChildRecorder
from cluster.workloads.txn_ops import transaction


class Stopped(Exception):
    pass


def main() -> None:
    ap = argparse.ArgumentParser()
    for a in ("--bootstrap", "--transactional-id", "--topic", "--session"):
        ap.add_argument(a, required=True)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--value-base", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-sends", type=int, default=3)
    ap.add_argument("--op-timeout", type=float, default=10.0)
    ap.add_argument("--producer-props", default="{}")
    a = ap.parse_args()
    rec = ChildRecorder()
    tid = a.transactional_id
    props = {"linger.ms": "0", "request.timeout.ms": "3000", "delivery.timeout.ms": str(int(a.op_timeout * 1000)),
             "transaction.timeout.ms": "10000"}
    props.update(json.loads(a.producer_props))
    props["transactional.id"] = tid
    producer = KafkaProducer(a.bootstrap, ProducerConfig.from_props(props))
    try:
        if not rec.invoke("init-producer", None, transactional_id=tid):
            return
        try:
            producer.init_transactions(timeout=a.op_timeout * 3)
        except Exception as e:  # noqa: BLE001
            t, err = outcome(e)
            rec.complete(t, "init-producer", None, error=err, transactional_id=tid)
            return
        rec.complete("ok", "init-producer", None,
                     producer=producer_field(producer.producer_id, producer.producer_epoch, a.session, tid))
        rng = random.Random(a.seed)
        values = itertools.count(a.value_base)
        while True:
            mops = [["send", rng.randrange(a.partitions), next(values)] for _ in range(rng.randint(1, a.max_sends))]
            if not rec.invoke("txn", mops):
                return

            def flushed():
                if not rec.checkpoint("flushed"):
                    raise Stopped()
            r = transaction(producer, a.topic, mops, a.op_timeout, before_commit=flushed)
            extra = dict(r.extra)
            if extra.get("error") == "Stopped":
                extra["error"] = "halted"
            rec.complete(r.type, "txn", r.value, seq=r.seq, producer=producer_field(r.pid, r.epoch, a.session, tid),
                         **extra)
            if not r.healthy or extra.get("error") == "halted":
                return                                   # fenced (or stopped): this instance is done
            time.sleep(rng.uniform(0.01, 0.05))
    finally:
        producer.close(2)


if __name__ == "__main__":
    main()
