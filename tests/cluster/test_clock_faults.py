"""The clock faults (cluster.faketime, cluster.nemesis_clock) on a real local cluster started with the preload:
a service's wall clock reads the offset its control file holds while its monotonic clock does not move; a
forward clock-jump on the coordinator of an open transaction makes the coordinator abort it and fences its
producer, while the same transaction on an unjumped coordinator commits; a run with a clock fault is refused
in one line where libfaketime is missing."""
from __future__ import annotations

import os
import random
import subprocess
import sys
import time
import uuid

import pytest

from cluster import faketime
from cluster.nemesis import Context
from cluster.nemesis_clock import CLOCK_PACKAGES, ClockJump, ClockStrobe
from eoslab.common import rpc
from eoslab.common.errors import E, KafkaError
from eoslab.v1 import txn_pb2, txn_pb2_grpc
from tests import helpers as h

PROBE = ("import time, sys\n"
         "while True:\n"
         "    print(time.time(), time.monotonic(), flush=True)\n"
         "    if sys.stdin.readline() == '':\n"
         "        break\n")


@pytest.fixture(scope="module")
def clock_cluster(eoslab_home, request):
    from cluster.local import LocalRuntime
    from tests.conftest import _zookeeper_missing
    missing = _zookeeper_missing()
    if missing:
        pytest.fail(f"integration tests need ZooKeeper and Java: {missing}")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw")
    rt = LocalRuntime(f"t-{worker}-clock-{uuid.uuid4().hex[:6]}", home=eoslab_home, brokers=1, controllers=1,
                      txn_coordinators=2, txn_coordinator_args=["--transaction-check-interval-ms=300"])
    faketime.enable(rt)
    failures = request.session.testsfailed
    try:
        rt.up(timeout=120)
        yield rt
    finally:
        if request.session.testsfailed > failures:      # a test here failed: what the nodes logged
            for n in rt.info().nodes:
                print(f"--- {n.name} log tail ---\n{rt.logs(n.name, 40)}")
        rt.down()


# libfaketime still intercepts CLOCK_MONOTONIC with FAKETIME_DONT_FAKE_MONOTONIC and answers it through
# its own call, so a probe's reading can land a millisecond outside the window this process measured
# around it (seen once: 1.2 ms after it, under load); the faults moved clocks by minutes and hours.
SLACK_S = 0.05


class Probe:
    """A Python process started with the environment the runtime gives NODE (its libfaketime preload and
    control file): each `read()` answers its (time.time(), time.monotonic()) beside this process's own
    monotonic readings taken just before and after."""

    def __init__(self, rt, node: str):
        env = dict(os.environ)
        env.update(faketime.spawn_env(rt, node))
        self.proc = subprocess.Popen([sys.executable, "-c", PROBE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env)

    def read(self) -> tuple[float, float, float, float]:
        before = time.monotonic()
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        wall, mono = map(float, self.proc.stdout.readline().split())
        return wall, mono, before, time.monotonic()

    def offset(self) -> float:
        """The probe's wall clock minus ours (read around its answer)."""
        t0 = time.time()
        wall, *_ = self.read()
        return wall - (t0 + time.time()) / 2

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(10)


def _environ(rt, node: str) -> dict[bytes, bytes]:
    with open(f"/proc/{rt.state['nodes'][node]['pid']}/environ", "rb") as f:
        return dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)


def _describe(rt, node: str, tid: str):
    stub = txn_pb2_grpc.TransactionCoordinatorStub(rpc.channel(rt.info().node(node).address))
    r = stub.DescribeTransactions(txn_pb2.DescribeTransactionsRequest(transactional_ids=[tid]), timeout=5)
    return r.transactions[0] if r.transactions else None


def _context(rt, tids: list[str], topic: str = "clock", seed: int = 7) -> Context:
    from clients.metadata import ClusterMetadata
    return Context(rt, None, topic, 1, ClusterMetadata(rt.bootstrap_all()), random.Random(seed),
                   transactional_ids=lambda: list(tids))


@pytest.mark.integration
def test_a_preloaded_service_wall_clock_reads_its_offset_and_its_monotonic_clock_does_not_move(clock_cluster):
    rt = clock_cluster
    node = "broker-1"
    environ = _environ(rt, node)                        # the service itself runs with the preload
    assert environ[b"FAKETIME_TIMESTAMP_FILE"].decode() == faketime.control_file(rt.dir, node)
    assert b"libfaketime" in environ[b"LD_PRELOAD"] and environ[b"FAKETIME_DONT_FAKE_MONOTONIC"] == b"1"
    assert b"FAKETIME_TIMESTAMP_FILE" not in _environ(rt, "zookeeper")     # ZooKeeper never

    probe = Probe(rt, node)
    try:
        assert abs(probe.offset()) < 2.0
        faketime.set_offset(rt, node, 3600)
        h.wait_for(lambda: abs(probe.offset() - 3600) < 2.0, timeout=10, what="the wall clock an hour ahead")
        _, mono, before, after = probe.read()
        assert before - SLACK_S <= mono <= after + SLACK_S    # the monotonic clock is the real one
        time.sleep(0.2)                                  # a real sleep (clock_nanosleep) still works
        faketime.set_offset(rt, node, -600)
        h.wait_for(lambda: abs(probe.offset() + 600) < 2.0, timeout=10, what="the wall clock 10 min behind")
        _, mono, before, after = probe.read()
        assert before - SLACK_S <= mono <= after + SLACK_S
        faketime.set_offset(rt, node, 0)
        h.wait_for(lambda: abs(probe.offset()) < 2.0, timeout=10, what="the wall clock back")
    finally:
        faketime.set_offset(rt, node, 0)
        probe.close()
    assert rt.node_state(node) == "running"


def _tids_on_two_coordinators(ctx: Context) -> dict[str, str]:
    """A transactional id owned by each transaction coordinator: coordinator -> id."""
    out: dict[str, str] = {}
    coordinators = set(ctx.nodes("txn-coordinator"))

    def found() -> bool:
        tid = f"clock-{uuid.uuid4().hex[:8]}"
        owner = ctx.coordinator_of(tid)
        if owner in coordinators and owner not in out:
            out[owner] = tid
        return set(out) == coordinators
    h.wait_for(found, timeout=60, what="a transactional id on each coordinator")
    return out


def _open_transaction(boot: str, tid: str, topic: str):
    from clients.producer.kafka_producer import KafkaProducer
    p = KafkaProducer(boot, **{"transactional.id": tid, "transaction.timeout.ms": "60000", "acks": "all"})
    p.init_transactions()
    p.begin_transaction()
    p.send(topic, b"v-" + tid.encode(), partition=0)
    assert p.flush(30)
    return p


@pytest.mark.integration
def test_a_forward_clock_jump_on_the_coordinator_aborts_its_open_transaction_and_fences_the_producer(clock_cluster):
    rt = clock_cluster
    boot = rt.bootstrap_all()
    topic = f"clock-{uuid.uuid4().hex[:6]}"
    h.new_topic(boot, topic)
    probe_ctx = _context(rt, [], topic)
    owners = _tids_on_two_coordinators(probe_ctx)
    (jumped, tid), (other, control_tid) = sorted(owners.items())
    victim, control = _open_transaction(boot, tid, topic), _open_transaction(boot, control_tid, topic)
    try:
        for node, t in ((jumped, tid), (other, control_tid)):   # begun now, on both coordinators' clocks
            d = _describe(rt, node, t)
            assert d.state == "Ongoing" and abs(d.transaction_start_time_ms - time.time() * 1000) < 20000, d
        epoch = _describe(rt, jumped, tid).producer_epoch
        ctx = _context(rt, [tid], topic)                   # the workload's transactional id: the victim's
        pkg = ClockJump(min_s=120, max_s=120, back_share=0)
        started = pkg.start(ctx)
        try:
            assert started == {"node": jumped, "offset_s": 120}
            h.wait_for(lambda: _describe(rt, jumped, tid).state in ("PrepareAbort", "CompleteAbort"), timeout=30,
                       what=f"{jumped} aborting {tid} (open 'for 120 s' on its jumped wall clock)")
            assert _describe(rt, jumped, tid).producer_epoch > epoch          # fenced: epoch + 1
        finally:
            stopped = pkg.stop(ctx, started)
        assert stopped["restored_s"] == 0 and faketime.offset(rt, jumped) == 0
        with pytest.raises(KafkaError) as fenced:
            victim.commit_transaction(timeout=30)
        assert fenced.value.code in (E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH), fenced.value
        # the same transaction, as old, on the coordinator whose clock did not jump: it commits
        assert _describe(rt, other, control_tid).state == "Ongoing"
        control.commit_transaction(timeout=30)
        h.wait_for(lambda: _describe(rt, other, control_tid).state == "CompleteCommit", timeout=30,
                   what=f"{control_tid} committed")
    finally:
        victim.close(5)
        control.close(5)


@pytest.mark.integration
def test_clock_strobe_flips_a_service_wall_clock_between_two_offsets_until_stopped(clock_cluster):
    rt = clock_cluster
    ctx = _context(rt, [])
    pkg = ClockStrobe(period_s=(1.2, 1.2))
    started = pkg.start(ctx)
    try:
        node, (a, b) = started["node"], started["offsets_s"]
        assert node in ctx.nodes() and node != "zookeeper" and abs(a - b) >= 30
        assert _environ(rt, node)[b"FAKETIME_TIMESTAMP_FILE"].decode() == faketime.control_file(rt.dir, node)
        probe = Probe(rt, node)
        try:
            seen = set()

            def both() -> bool:
                off = probe.offset()
                seen.update(o for o in (a, b) if abs(off - o) < 2.0)
                return seen == {a, b}
            h.wait_for(both, timeout=20, what=f"the wall clock of {node} at {a} s and at {b} s")
        finally:
            probe.close()
    finally:
        stopped = pkg.stop(ctx, started)
    assert stopped["flips"] >= 2 and faketime.offset(rt, node) == 0


@pytest.mark.fast
def test_a_run_with_a_clock_fault_is_refused_in_one_line_when_libfaketime_is_missing(monkeypatch, tmp_path):
    from cluster.local import LocalRuntime
    from cluster.run import RunConfig
    missing = str(tmp_path / "no-such-libfaketime.so.1")
    monkeypatch.setenv(faketime.LIB_ENV, missing)
    assert set(CLOCK_PACKAGES) == {"clock-jump", "clock-strobe"}
    for pkg in CLOCK_PACKAGES.values():
        assert not pkg.process_fault and not pkg.zookeeper_fault
    cfg = RunConfig(workload="txn", nemesis=["kill", "clock-jump"], time_limit=5, seed=1, out=str(tmp_path / "run"))
    with pytest.raises(ValueError) as refused:
        cfg.validate()
    msg = str(refused.value)
    assert "\n" not in msg and "clock-jump" in msg and "libfaketime" in msg and missing in msg
    RunConfig(workload="txn", nemesis=["kill"], time_limit=5, seed=1, out=str(tmp_path / "run")).validate()
    rt = LocalRuntime(f"clock-refused-{uuid.uuid4().hex[:6]}", home=str(tmp_path / "home"))
    with pytest.raises(faketime.FaketimeMissing) as e:
        faketime.enable(rt)
    assert "\n" not in str(e.value) and not faketime.enabled(rt)
    with pytest.raises(RuntimeError) as e:                # a cluster started without the preload
        ClockJump().start(Context(rt, None, "t", 1, None, random.Random(1)))
    assert "\n" not in str(e.value) and "without the clock preload" in str(e.value)
