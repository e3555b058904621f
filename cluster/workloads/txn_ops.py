"""One producer transaction as one f "txn" op: how its outcome is decided.

Guarantees of `transaction(...)`: the returned type is
- "ok" only when commit_transaction returned (committed);
- "fail" when the transaction certainly did not commit: the client aborted it
  on purpose, or it ended before EndTxn(commit) was sent (a send failed, the
  producer was fenced, ...: then it can never commit; the coordinator aborts
  it), or EndTxn got an error the errors table calls definite on an attempt
  that was the only one (`maybe_applied` false, see cluster.workloads.base);
- "info" otherwise (EndTxn timed out, or was retried after a lost answer).
The value has one ["send", k, [offset or null, v]] per send (offsets of acked
sends; an ok op's send acked without an offset is ["send", k, v]) and `seq`
the sequence number each record got. `healthy` says whether the producer can
run another transaction (False after a fatal error, a failed send or an
EndTxn that failed: the caller makes a new producer with the same
transactional.id).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from clients.producer import KafkaProducer
from clients.producer import transaction_manager as txm
from cluster.workloads.base import cause, outcome


@dataclass
class TxnResult:
    type: str
    value: list
    seq: list
    pid: int
    epoch: int
    healthy: bool
    extra: dict = field(default_factory=dict)


def transaction(producer: KafkaProducer, topic: str, mops: list, op_timeout: float, abort: bool = False,
                before_commit=None) -> TxnResult:
    """Run mops ([["send", partition, value], ...]) in one transaction. before_commit() runs after every
    send is acknowledged and before EndTxn (the zombie workload pauses or cuts the client there)."""
    futures: list = []
    tm = producer.transaction_manager
    committing = False
    try:
        producer.begin_transaction()
        for _, k, v in mops:
            futures.append(producer.send(topic, str(v).encode(), partition=k))
        if abort or before_commit is not None:
            producer.flush(op_timeout)              # the records reach the log before the abort / the pause
        if abort:
            try:
                producer.abort_transaction(timeout=op_timeout)
                healthy = True
            except Exception:  # noqa: BLE001 - no EndTxn(commit) was ever sent: it stays uncommitted
                healthy = False
            return _result("fail", mops, futures, producer, healthy, error="aborted-by-client")
        if before_commit is not None:
            before_commit()
        committing = True
        producer.commit_transaction()
    except Exception as e:  # noqa: BLE001 - classified here
        if committing and tm.commit_sent:
            t, err = outcome(e)                     # EndTxn may have gone out: the table (and retries) decide
            return _result(t, mops, futures, producer, False, error=err)
        err = cause(producer, e)
        send_failed = tm.abortable_error is not None
        if tm.fatal_error is None:
            try:
                producer.abort_transaction(timeout=op_timeout)
            except Exception:  # noqa: BLE001
                pass
        # after a failed send the producer's sequences may not match the log's any more: a new
        # producer (InitProducerId, a new epoch) starts them over, as KIP-360's epoch bump does
        healthy = tm.fatal_error is None and tm.state == txm.READY and not send_failed
        return _result("fail", mops, futures, producer, healthy, error=err)
    return _result("ok", mops, futures, producer, True)


def _result(t: str, mops, futures, producer, healthy: bool, **extra) -> TxnResult:
    value, seqs = [], []
    pid, epoch = producer.producer_id, producer.producer_epoch
    for i, (_, k, v) in enumerate(mops):
        m = None
        if i < len(futures) and futures[i].done() and futures[i].exception(0) is None:
            m = futures[i].result(0)
        if m is not None and m.offset >= 0:
            value.append(["send", k, [m.offset, v]])
        else:
            value.append(["send", k, v] if t == "ok" else ["send", k, [None, v]])
        if m is not None:
            pid, epoch = m.producer_id, m.producer_epoch
        seqs.append(m.base_sequence if m is not None else None)
    return TxnResult(t, value, seqs, pid, epoch, healthy, extra)
