"""The `zombie` workload: two instances of one transactional.id, the old one cut off while a new one inits.

Per slot (workload.slots transactional ids), rounds drawn from the seed:
1. the current instance (a child process, zombie_child.py) runs transactions;
2. at its next "flushed" checkpoint — every send of an open transaction
   acknowledged, EndTxn not yet sent — it is cut off: SIGSTOPped ("pause") or,
   on the local runtime as root, cut from every transaction coordinator by
   iptables rules keyed on its own cgroup ("cut"; workload.cutoff picks,
   "random" draws one per round);
3. a new instance of the same transactional.id starts and inits: its ok
   `init-producer` op, with a higher epoch of the same producer id, is the
   fence; it runs transactions for about workload.overlap seconds;
4. the old instance is let go (SIGCONT / rules removed): it is now a zombie,
   its commit and every later call must be refused (it records them and
   exits once fenced), and the new instance becomes the current one.
Meanwhile workload.readers threads poll every partition at isolation.level
(read_committed by default), recorded with "isolation". The checker judges:
a zombie record a read_committed poll returned is a zombie-write (if sent
after the fence) or G1a (the zombie's transaction failed, yet was read); at
read_uncommitted the zombie's aborted records are visible, which is how the
lab shows what read_committed protects against.

Guarantees: every instance's ops are recorded under its own process (a new
one after `info`) with `producer` {pid, epoch, session, transactional_id};
values are unique in the run; `halt` leaves no child process, no paused
process and no rule of this workload behind.
"""
from __future__ import annotations

import itertools
import json
import os
import random
import signal
import threading
import time

from clients.admin import create_topic
from clients.consumer import KafkaConsumer
from clients.metadata import ClusterMetadata
from cluster import netfilter
from cluster.workloads.base import Workload, by_key, final_read, outcome
from cluster.workloads.remote import RemoteClient


class ZombieWorkload(Workload):
    name = "zombie"
    transactional = True
    OPTIONS = {"slots": (int, 2), "cutoff": (("random", "pause", "cut"), "random"), "overlap": (float, 1.5),
               "readers": (int, 2), "max-sends": (int, 3)}

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self._procs = itertools.count(self.options["readers"])
        self._spawned = itertools.count(1)
        self.children: list[RemoteClient] = []
        self.rounds: list[dict] = []
        self.lock = threading.Lock()

    def transactional_ids(self) -> list[str]:
        return [f"{self.topic}-z{i}" for i in range(self.options["slots"])]

    def setup(self) -> None:
        if self.options["slots"] < 1 or self.options["max-sends"] < 1:
            raise ValueError("workload.slots and workload.max-sends must be at least 1")
        md = ClusterMetadata(self.bootstrap)
        try:
            create_topic(md, self.topic, self.partitions, self.replication_factor, self.topic_configs)
        finally:
            md.close()

    def start(self) -> None:
        for r in range(self.options["readers"]):
            self.spawn(self._reader, r, name=f"zombie-reader-{r}")
        for i, tid in enumerate(self.transactional_ids()):
            self.spawn(self._slot, i, tid, name=f"zombie-slot-{i}")

    # -- instances ----------------------------------------------------------------------------------
    def _can_cut(self) -> bool:
        return hasattr(self.runtime, "slot") and os.geteuid() == 0 and netfilter.cgroup2_root() is not None

    def _instance(self, slot: int, tid: str, gated: bool = False) -> RemoteClient:
        n = next(self._spawned)
        name = f"client-zombie-{slot}-{n}"
        args = ["--bootstrap", self.bootstrap, "--transactional-id", tid, "--topic", self.topic,
                "--session", f"z{slot}-{n}", "--partitions", str(self.partitions),
                "--value-base", str(n * 10_000_000), "--seed", str(self.seed * 1000 + n),
                "--max-sends", str(self.options["max-sends"]), "--op-timeout", str(self.op_timeout),
                "--producer-props", json.dumps(self.producer_props)]
        home = getattr(self.runtime, "dir", None)          # the local runtime's directory: children log there
        logs = os.path.join(home, "logs") if home else ""
        c = RemoteClient(self.history, self.new_process(), "cluster.workloads.zombie_child", args, name,
                         self.new_process, on_checkpoint=self._checkpoint, on_complete=self._completed,
                         log_path=os.path.join(logs, f"{name}.log") if logs and os.path.isdir(logs) else None,
                         gate=threading.Event() if gated else None)
        c.inited, c.armed, c.cut_off, c.mode, c.rules = threading.Event(), None, threading.Event(), None, False
        if self._can_cut():
            c.placed = netfilter.place(self.runtime.slot, name, c.pid)
        else:
            c.placed = False
        with self.lock:
            self.children.append(c)
        return c

    def _completed(self, c, t, f, msg) -> None:
        if f == "init-producer" and t == "ok":
            c.inited.set()

    def _checkpoint(self, c: RemoteClient, name: str) -> None:
        """Runs in c's reader thread, at c's "flushed" checkpoint: cut it off if a round asked for it."""
        mode = c.armed
        if name != "flushed" or mode is None:
            return
        c.armed = None
        if mode == "cut":
            for node in self.runtime.info().by_role("txn-coordinator"):
                netfilter.drop(self.runtime.slot, c.name, node.host, tag=c.name)
            c.rules = True
        else:
            c.signal(signal.SIGSTOP)
        c.mode = mode
        c.cut_off.set()

    def _release(self, c: RemoteClient) -> None:
        if c.rules:
            netfilter.remove_tagged(self.runtime.slot, c.name)
            c.rules = False
        c.signal(signal.SIGCONT)

    def _slot(self, slot: int, tid: str) -> None:
        rng = random.Random(self.seed * 7907 + slot)
        current = None
        while not self.stop.is_set():
            if current is None or current.exited.is_set():
                current = self._instance(slot, tid)
                if not self._wait(current.inited, 30):
                    current.kill()
                    current = None
                    continue
            if self.stop.wait(rng.uniform(0.5, 1.5)):
                break
            mode = self.options["cutoff"]
            if mode == "random":
                mode = rng.choice(("pause", "cut"))
            if mode == "cut" and not (self._can_cut() and current.placed):
                mode = "pause"
            successor = self._instance(slot, tid, gated=True)   # starts now, inits once the zombie is cut off
            zombie, current.armed = current, mode
            if not self._wait(zombie.cut_off, 15):     # it never reached a commit (fenced, stopped, dead)
                zombie.armed = None
                successor.kill()                       # nothing of it was recorded: its init was gated
                current = None if zombie.exited.is_set() else zombie
                continue
            t_cut = time.monotonic()
            successor.gate.set()
            fenced = self._wait(successor.inited, 30)
            if fenced:
                self.stop.wait(rng.uniform(self.options["overlap"] / 2, self.options["overlap"]))
            self._release(zombie)
            self.rounds.append({"slot": slot, "mode": zombie.mode, "zombie": zombie.name, "successor": successor.name,
                                "fenced": fenced, "cut_off_s": round(time.monotonic() - t_cut, 3)})
            current = successor if fenced else None
            if not fenced:
                successor.kill()

    def _wait(self, event: threading.Event, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not event.wait(0.1):
            if self.stop.is_set() or time.monotonic() > deadline:
                return False
        return True

    def _reader(self, process: int) -> None:
        c = KafkaConsumer(self.bootstrap, isolation_level=self.isolation)
        c.assign([(self.topic, p) for p in range(self.partitions)])
        try:
            while not self.stop.is_set():
                self.history.invoke(process, "poll", [["poll"]], isolation=self.isolation)
                try:
                    recs = c.poll(timeout_ms=300)
                except Exception as e:  # noqa: BLE001
                    self.history.complete(process, "fail", "poll", [["poll"]], error=outcome(e)[1],
                                          isolation=self.isolation)
                    continue
                self.history.complete(process, "ok", "poll", [["poll", by_key(recs)]], isolation=self.isolation)
        finally:
            c.close()

    # -- the end ------------------------------------------------------------------------------------
    def halt(self, timeout: float = 60.0) -> None:
        self.stop.set()
        for t in list(self.threads):
            t.join(timeout)
        with self.lock:
            children = list(self.children)
        for c in children:
            self._release(c)
            c.halt()
        deadline = time.monotonic() + 20
        for c in children:
            if not c.exited.wait(max(0.1, deadline - time.monotonic())):
                c.kill()
                c.exited.wait(5)
            if c.placed:
                netfilter.unplace(self.runtime.slot, c.name)

    def final_reads(self, timeout: float = 60.0) -> int:
        keys = {(self.topic, p): p for p in range(self.partitions)}
        n, self.unstable = final_read(self.bootstrap, self.history, keys, self.isolation, timeout)
        return n

    def notes(self) -> dict:
        out = super().notes()
        out["zombie_rounds"] = self.rounds
        return out
