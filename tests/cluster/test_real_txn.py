"""client_transaction's classification when the real client's own calls fail (no cluster needed)."""
import concurrent.futures

import pytest

from cluster.workloads.real_txn import client_transaction

pytestmark = pytest.mark.fast


class FlushTimesOut:
    """A transactional producer whose flush gives up, as kafka-python's does under a leader kill."""

    def begin(self):
        pass

    def send(self, topic, value, partition):
        return concurrent.futures.Future()

    def flush(self, timeout):
        raise TimeoutError("Timeout waiting for future")

    def abort(self, timeout):
        raise AssertionError("not reached")


def test_an_aborted_transaction_whose_flush_times_out_is_a_failed_op_not_a_crash():
    r = client_transaction(FlushTimesOut(), "t", [["send", 0, 1]], 1.0, abort=True)
    assert r.type == "fail" and r.healthy is False         # never committed; the producer is replaced


class CancelsADelivery:
    """A transactional producer whose client cancels one record's delivery (aiokafka cancels the batches it
    drops) and whose commit and abort then fail, as under a leader kill."""

    def __init__(self):
        self.committed = False

    def begin(self):
        pass

    def send(self, topic, value, partition):
        f = concurrent.futures.Future()
        f.cancel()
        return f

    def commit(self, timeout):
        self.committed = True
        raise TimeoutError("no answer")

    def abort(self, timeout):
        raise TimeoutError("no answer")


def test_a_cancelled_delivery_is_an_unsent_record_not_a_crash():
    """f.exception() of a cancelled future raises CancelledError: a worker thread ended on it (a lab error in
    a CI run). The cancelled record is unsent, so the commit is not asked for and the abort's failure leaves
    the transaction's outcome unknown."""
    p = CancelsADelivery()
    r = client_transaction(p, "t", [["send", 0, 1], ["send", 1, 2]], 1.0)
    assert r.type == "info" and not p.committed
    assert r.value == [["send", 0, [None, 1]], ["send", 1, [None, 2]]]


def test_an_aiokafka_consumer_whose_stop_is_cancelled_closes_without_raising():
    """After a broker kill aiokafka's stop() can end cancelled; closing at the end of a run is not a lab error."""
    import asyncio

    from cluster.workloads.real_clients import AioKafkaConsumer, _Loop

    class Cancelled:
        async def stop(self):
            raise asyncio.CancelledError()
    c = AioKafkaConsumer.__new__(AioKafkaConsumer)      # its close only, no client behind it
    c.io, c.c = _Loop(), Cancelled()
    c.close()                                           # raised CancelledError into the workload thread
