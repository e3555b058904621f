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
