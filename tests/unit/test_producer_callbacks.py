"""A send's own callback (Kafka's send(record, callback)), kept as a thunk in its batch: called once, in append
order, with the record's metadata or the batch's error, after the future-style callbacks."""
import pytest

from eoslab.common.errors import E, KafkaError
from clients.producer.futures import RecordMetadata
from clients.producer.record_accumulator import RecordAccumulator

pytestmark = pytest.mark.fast


def _acc():
    return RecordAccumulator(batch_size=1 << 20, linger_ms=0, buffer_memory=1 << 30)


def test_thunks_get_each_records_metadata_in_append_order():
    acc, calls = _acc(), []
    futs = [acc.append("t", 0, None, b"v%d" % i, 0, lambda: None,
                       callback=lambda md, e, i=i: calls.append((i, md, e))) for i in range(3)]
    plain = acc.append("t", 0, None, b"no callback", 0, lambda: None)
    order = []
    futs[0].add_done_callback(lambda f: order.append("future"))
    batch = acc.batches[("t", 0)][0]
    batch.result.complete(40, None, 7, 1000, 2)
    assert [c[0] for c in calls] == [0, 1, 2]
    assert [c[1] for c in calls] == [RecordMetadata("t", 0, 40 + i, 7 + i, 1000, 2) for i in range(3)]
    assert all(c[2] is None for c in calls)
    assert futs[2].result() == calls[2][1] and plain.result().offset == 43
    assert order == ["future"]
    batch.result.complete(99, None, 0, 1, 1)           # a batch completes once: no second call
    assert len(calls) == 3


def test_thunks_get_the_error_and_no_metadata():
    acc, calls = _acc(), []
    acc.append("t", 1, None, b"v", 0, lambda: None, callback=lambda md, e: calls.append((md, e)))
    err = KafkaError(E.NOT_ENOUGH_REPLICAS, "x")
    acc.batches[("t", 1)][0].result.complete(-1, err, None, -1, -1)
    assert calls == [(None, err)]


def test_a_failing_callback_does_not_stop_the_others():
    acc, calls = _acc(), []

    def boom(md, e):
        raise RuntimeError("user code")
    acc.append("t", 0, None, b"a", 0, lambda: None, callback=boom)
    acc.append("t", 0, None, b"b", 0, lambda: None, callback=lambda md, e: calls.append(md.offset))
    acc.batches[("t", 0)][0].result.complete(0, None, None, -1, -1)
    assert calls == [1]


def test_offset_unknown_stays_unknown():
    # a duplicate the broker no longer has the offset for (or acks=0): offset -1 for every record
    acc, calls = _acc(), []
    for _ in range(2):
        acc.append("t", 0, None, b"v", 0, lambda: None, callback=lambda md, e: calls.append(md.offset))
    acc.batches[("t", 0)][0].result.complete(-1, None, 3, 5, 0)
    assert calls == [-1, -1]
