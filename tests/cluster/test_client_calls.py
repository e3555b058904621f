"""bounded_call: a real client's call bounded from outside (no cluster needed)."""
import threading
import time

import pytest

from cluster.workloads.client_calls import ClientCallHung, bounded_call

pytestmark = pytest.mark.fast


def test_a_call_that_returns_gives_its_value_and_one_that_raises_raises_it():
    assert bounded_call(lambda: 42, 5, "quick") == 42
    with pytest.raises(KeyError):
        bounded_call(lambda: {}["missing"], 5, "failing")


def test_a_call_that_never_returns_is_given_up_at_the_bound_and_left_behind():
    release = threading.Event()
    t0 = time.monotonic()
    with pytest.raises(ClientCallHung, match="send_offsets_to_transaction did not return within 0 s"):
        bounded_call(lambda: release.wait(60), 0.2, "send_offsets_to_transaction")
    assert time.monotonic() - t0 < 5                  # the worker goes on; the call is still blocked
    assert any(t.name == "client-call-send_offsets_to_transaction" and t.is_alive() for t in threading.enumerate())
    release.set()


class _History:
    def __init__(self):
        self.ops = []

    def invoke(self, process, f, value, **extra):
        self.ops.append(("invoke", process, f, value, extra))

    def complete(self, process, t, f, value, **extra):
        self.ops.append((t, process, f, value, extra))


class _HungProducer:
    """A transactional producer whose send_offsets_to_transaction never returns (librdkafka's orphaned
    coordinator lookup); every other call is recorded."""

    def __init__(self):
        self.calls, self.release = [], threading.Event()

    def begin(self):
        self.calls.append("begin")

    def send(self, topic, value, partition):
        import concurrent.futures
        return concurrent.futures.Future()

    def send_offsets(self, positions, consumer, timeout):
        self.calls.append("send_offsets")
        self.release.wait(60)

    def commit(self, timeout):
        self.calls.append("commit")

    def abort(self, timeout):
        self.calls.append("abort")

    def abandon(self):
        self.calls.append("abandon")


def test_a_copier_whose_client_hangs_in_send_offsets_fails_the_step_and_replaces_the_producer(monkeypatch):
    from types import SimpleNamespace as NS
    from cluster.workloads import real_copier
    from cluster.workloads.real_clients import Record
    monkeypatch.setattr(real_copier, "HANG_GRACE_S", 0.2)
    history = _History()
    wl = NS(history=history, out_topic="out", options={"offsets": "transaction"}, op_timeout=0.1,
            session_name=lambda slot: f"s{slot}", tid=lambda slot: f"tid-{slot}", take_crash=lambda *a: False,
            stop_copiers=threading.Event(), out_key=lambda p: f"out-{p}", new_process=lambda: 9)
    inst = real_copier.RealCopierInstance(wl, 0, 1)
    hung = inst.producer = _HungProducer()
    inst.consumer = NS(rewind=lambda timeout: None)
    replaced = []
    monkeypatch.setattr(inst, "_new_producer", lambda: replaced.append(1) or _HungProducer())
    try:
        t = inst._copy([Record("in", 0, 5, b"7")], {"in-0": [[5, 7]]})
    finally:
        hung.release.set()
    assert t == "fail"                                    # no commit was asked for
    assert hung.calls == ["begin", "send_offsets", "abandon"]      # never called again, not even abort
    assert replaced == [1] and inst.producer is not hung
    last = history.ops[-1]
    assert last[0] == "fail" and "send_offsets_to_transaction did not return" in last[4]["error"]


class _KafkaPythonNeverAnswers:
    """kafka-python's KafkaProducer while no transaction coordinator answers: its transaction calls,
    which take no timeout, wait for good."""

    def __init__(self):
        self.release = threading.Event()

    def init_transactions(self):
        self.release.wait(60)

    commit_transaction = abort_transaction = init_transactions

    def send_offsets_to_transaction(self, offsets, group_metadata):
        self.release.wait(60)


def test_kafka_pythons_transaction_calls_are_bounded_at_the_op_timeout():
    from cluster.workloads.real_txn import KafkaPythonTxnProducer
    prod = KafkaPythonTxnProducer.__new__(KafkaPythonTxnProducer)     # its calls only, no client behind them
    prod.p = _KafkaPythonNeverAnswers()
    try:
        for call in (lambda: prod.init_transactions(0.2), lambda: prod.commit(0.2), lambda: prod.abort(0.2)):
            t0 = time.monotonic()
            with pytest.raises(ClientCallHung, match="kafka-python"):
                call()
            assert time.monotonic() - t0 < 5
    finally:
        prod.p.release.set()


def test_a_transaction_whose_kafka_python_commit_hangs_is_info_and_never_aborted():
    """The commit may have reached the coordinator: info, and the hung client is not called again (an abort
    would wait as long)."""
    import concurrent.futures
    from cluster.workloads.real_clients import SendResult
    from cluster.workloads.real_txn import KafkaPythonTxnProducer, client_transaction
    prod = KafkaPythonTxnProducer.__new__(KafkaPythonTxnProducer)
    prod.p = _KafkaPythonNeverAnswers()
    aborts = []
    prod.begin = lambda: None
    prod.abort = lambda timeout: aborts.append(timeout)

    def send(topic, value, partition):
        f = concurrent.futures.Future()
        f.set_result(SendResult(3))
        return f
    prod.send = send
    try:
        r = client_transaction(prod, "t", [["send", 0, 1]], 0.2)
    finally:
        prod.p.release.set()
    assert (r.type, r.healthy, aborts) == ("info", False, [])
    assert "client-hung" in r.extra["error"]
