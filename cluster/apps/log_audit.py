"""The output log as it is, markers included: which records were committed, aborted or left open.

Guarantees: `audit(bootstrap, topic, partitions)` reads every partition from
offset 0 to its high watermark at read_uncommitted with raw Fetch requests
and classifies each data record by the log's own transaction markers, not
by the broker's aborted-transaction index (which is what a read_committed
fetch relies on, and so what this check is independent of): a
transactional record is "aborted" when the next marker of its producer
after it is an ABORT, "committed" when it is a COMMIT, "open" when there is
none yet; a non-transactional record counts as such. The result is the
value of the history's "log-audit" op: {"out-<p>": {"aborted": [[offset,
value], ...], "open": [...], "committed": n, "non_transactional": n}}.
"""
from __future__ import annotations

import time

from clients.metadata import ClusterMetadata
from cluster.apps.seeder import text
from eoslab.common import record_batch as rb
from eoslab.common.control_records import ABORT, parse_control_record
from eoslab.common.errors import E, KafkaError
from eoslab.v1 import broker_pb2

FETCH_BYTES = 4 << 20


def _fetch(md: ClusterMetadata, topic: str, p: int, offset: int):
    ld = md.leader(topic, p)
    if ld is None:
        md.refresh([topic])
        ld = md.leader(topic, p)
        if ld is None:
            raise KafkaError(E.LEADER_NOT_AVAILABLE, f"no leader for {topic}-{p}")
    req = broker_pb2.FetchRequest(replica_id=-1, max_wait_ms=0, max_bytes=FETCH_BYTES,
                                  isolation_level=broker_pb2.READ_UNCOMMITTED,
                                  partitions=[broker_pb2.FetchPartition(topic=topic, partition=p, fetch_offset=offset,
                                                                        current_leader_epoch=ld[2],
                                                                        partition_max_bytes=FETCH_BYTES)])
    pr = md.stub(ld[1]).Fetch(req, timeout=10).partitions[0]
    if pr.error != E.NONE:
        md.refresh([topic])
        raise KafkaError(pr.error, f"fetch {topic}-{p}")
    return pr


def read_partition(md: ClusterMetadata, topic: str, p: int, timeout: float = 60.0):
    """(data records [(offset, value, producer_id, transactional)], markers [(offset, producer_id, kind)])."""
    data, markers, offset = [], [], 0
    deadline = time.monotonic() + timeout
    hw = None
    while hw is None or offset < hw:
        try:
            pr = _fetch(md, topic, p, offset)
        except (KafkaError, Exception):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
            continue
        hw = pr.high_watermark
        progressed = False
        for b in pr.batches:
            end = b.base_offset + rb.last_offset_delta(b) + 1    # a cleaned batch may end past its records
            if end <= offset:
                continue
            progressed = True
            recs = rb.records_with_offsets(b)
            if b.attributes & rb.CONTROL_FLAG:
                if recs:        # an empty control batch: the cleaner removed its transaction
                    k, v = recs[0][1:3]
                    markers.append((b.base_offset, b.producer_id, parse_control_record(k, v)[0]))
            else:
                txn = bool(b.attributes & rb.TRANSACTIONAL_FLAG)
                for off, _, v, _, _ in recs:
                    if off >= offset:
                        data.append((off, v, b.producer_id, txn))
            offset = max(offset, end)
        if not progressed and offset < hw:
            if time.monotonic() > deadline:
                raise KafkaError(E.REQUEST_TIMED_OUT, f"{topic}-{p}: the audit did not reach offset {hw}")
            time.sleep(0.2)
    return data, markers


def classify(data, markers) -> dict:
    by_pid: dict[int, list[tuple[int, int]]] = {}
    for off, pid, kind in markers:
        by_pid.setdefault(pid, []).append((off, kind))
    out = {"aborted": [], "open": [], "committed": 0, "non_transactional": 0}
    for off, value, pid, txn in data:
        if not txn:
            out["non_transactional"] += 1
            continue
        kind = next((k for m_off, k in by_pid.get(pid, ()) if m_off > off), None)
        if kind is None:
            out["open"].append([off, text(value)])
        elif kind == ABORT:
            out["aborted"].append([off, text(value)])
        else:
            out["committed"] += 1
    return out


def audit(bootstrap: str, topic: str, partitions: int) -> dict:
    md = ClusterMetadata(bootstrap)
    try:
        return {f"out-{p}": classify(*read_partition(md, topic, p)) for p in range(partitions)}
    finally:
        md.close()
