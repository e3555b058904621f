"""Kafka's transactions system test, in the lab: a transactional copier (read-process-write with the
consumer offsets in the transaction) while the transaction coordinator, then a broker, then the
copier itself are killed; the output must equal the input exactly once."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from clients.consumer import KafkaConsumer
from clients.producer import KafkaProducer, ProducerConfig
from tests import helpers as h
from tests.integration.test_transactions import coordinator_node

pytestmark = pytest.mark.integration
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Copier:
    def __init__(self, boot, total):
        env = dict(os.environ, PYTHONPATH=REPO)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.txn_worker", "copier", "--bootstrap", boot,
             "--transactional-id", "copier-1", "--input", "in", "--output", "out", "--partitions", "2",
             "--total", str(total), "--group", "copier", "--batch", "50"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
        self.copied = 0
        self.done = False
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            line = line.strip()
            if line == "DONE":
                self.done = True
            elif line.startswith("{"):
                self.copied = json.loads(line)["copied"]

    def wait_copied(self, n, timeout=90):
        deadline = time.monotonic() + timeout
        while self.copied < n and not self.done:
            if self.proc.poll() is not None:
                raise AssertionError(f"copier exited: {self.proc.stderr.read()[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"copier stuck at {self.copied}")
            time.sleep(0.05)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


def test_copier_exactly_once_through_coordinator_broker_and_copier_kills(cluster):
    boot = cluster.bootstrap_all()
    md = h.new_topic(boot, "in", 2)
    h.new_topic(boot, "out", 2)
    total = 3000
    p = KafkaProducer(boot, ProducerConfig(linger_ms=5))
    try:
        for i in range(total):
            p.send("in", f"r{i}".encode(), partition=i % 2)
        p.flush()
    finally:
        p.close()

    seen, dup, stop = set(), [], threading.Event()

    def watch():   # a concurrent read_committed consumer: never a duplicate, never an aborted record
        c = KafkaConsumer(boot, isolation_level="read_committed")
        c.assign([("out", 0), ("out", 1)])
        try:
            while not stop.is_set():
                for r in c.poll(200):
                    (dup.append if r.value in seen else seen.add)(r.value)
        finally:
            c.close()
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()

    copier = Copier(boot, total)
    try:
        copier.wait_copied(400)
        cluster.kill(coordinator_node(boot, "copier-1"))             # 1: the transaction coordinator
        copier.wait_copied(copier.copied + 400)
        md.refresh(["out"])
        cluster.kill(f"broker-{md.leader('out', 0)[0]}")             # 2: a broker (leader of out-0)
        copier.wait_copied(copier.copied + 400)
        copier.kill()                                                # 3: the copier itself, mid-stream
        copier = Copier(boot, total)                                 # restarted: fences its zombie, resumes
        copier.wait_copied(total * 10, timeout=180)
        assert copier.done
        copier.proc.wait(30)
    finally:
        if copier.proc.poll() is None:
            copier.kill()
        stop.set()
        watcher.join(10)

    # Read what is visible at read_committed until all of it is there (or a minute passed): right after
    # the leader of out-0 was killed, the new leader's high watermark (and so the last stable offset)
    # waits until the other follower has fetched from it or has left the ISR, so the last commit
    # marker can stay invisible for a few seconds.
    wants = {part: [f"r{i}".encode() for i in range(part, total, 2)] for part in (0, 1)}
    tps = [("out", 0), ("out", 1)]
    deadline = time.monotonic() + 60
    while True:
        c = KafkaConsumer(boot, isolation_level="read_committed")
        raw = KafkaConsumer(boot)
        try:
            out = {p: [r.value for r in c.read_all([("out", p)], timeout=60)] for p in (0, 1)}
            stable, high = c.end_offsets(tps), raw.end_offsets(tps)   # last stable offset vs high watermark
        finally:
            c.close()
            raw.close()
        if all(len(out[p]) >= len(wants[p]) for p in (0, 1)) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    for part in (0, 1):
        want = wants[part]
        assert out[part] == want, (   # exactly once, in order
            f"out-{part}: {len(out[part])} records, {len(want)} expected; last stable offset "
            f"{stable[('out', part)]}, high watermark {high[('out', part)]} (a last stable offset that stays "
            f"below the high watermark is a transaction left open on the partition)")
    assert dup == []
