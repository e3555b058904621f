"""The nemesis's fault packages: what each fault does to the cluster when it starts and stops.

Guarantees: `PACKAGES` names every package `eoslab run --nemesis` takes; a
package's `start(ctx)` injects its fault and returns what it hit (a node
name, or a dict naming nodes and parameters; None when it found no target),
`stop(ctx, started)` undoes it and returns what the fault did where it can
tell. Each package says what it does to processes, for the lab-error rules
(cluster.lab_errors): `process_fault` (it kills or pauses the node it
returns) and `zookeeper_fault` (services may lose ZooKeeper while it is in
force); `runtimes` names the runtimes it can act on. Targets are drawn
from the seeded RNG over the nodes as they are when the fault starts (which broker leads, which coordinator owns a
transactional.id, depends on the run).

`loss` drops a random share (10-40 %, drawn from the seed) of the packets of
one node, a minority or every node (brokers, controllers, coordinators): on
the local runtime with iptables `-m statistic --mode random` rules tagged so
that its stop removes only them, on the Docker runtime through the nodes'
sidecars. `kill-coordinator` SIGKILLs the transaction coordinator that owns
one of the workload's transactional ids (a random running coordinator when
the workload has none) and restarts it at the stop. `delay-end-txn` makes
the coordinator of one of the workload's transactional ids handle copies of
its next EndTxn requests again a little later, as a request held in the
network would arrive (KAFKA-17754); the stop records the answers the copies
got.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

import grpc

from cluster.fault_package import FaultPackage
from eoslab.v1 import faults_pb2, faults_pb2_grpc
from eoslab.common import rpc

if TYPE_CHECKING:
    from cluster.nemesis import Context

PARTITION_SHAPES = ("one", "minority-third", "halves", "ring", "bridge")


class Kill(FaultPackage):
    process_fault = True

    def __init__(self, name: str, role: str | None, leader: bool = False):
        self.name, self.role, self.leader = name, role, leader
        self.zookeeper_fault = role == "zookeeper"

    def _target(self, ctx: Context) -> str | None:
        if self.leader:
            return ctx.leader_of(ctx.rng.randrange(ctx.partitions))
        if self.role == "controller":
            return _active_controller(ctx) or _choice(ctx, ctx.nodes("controller"))
        return _choice(ctx, ctx.nodes(self.role))

    def start(self, ctx):
        node = self._target(ctx)
        if node:
            ctx.runtime.kill(node)
        return node

    def stop(self, ctx, node):
        if node:
            ctx.runtime.start(node)
        return node


class KillCoordinator(Kill):
    """The coordinator that owns one of the workload's transactional ids (else a random one)."""

    def __init__(self):
        super().__init__("kill-coordinator", "txn-coordinator")

    def _target(self, ctx: Context) -> str | None:
        tids = sorted(ctx.transactional_ids())
        if tids:
            owner = ctx.coordinator_of(ctx.rng.choice(tids))
            if owner and owner in ctx.nodes("txn-coordinator"):
                return owner
        return _choice(ctx, ctx.nodes("txn-coordinator"))


class Loss(FaultPackage):
    """Random packet loss on one node, a minority, or every node."""
    name = "loss"
    zookeeper_fault = True          # the nodes' ZooKeeper packets are lost too

    def start(self, ctx):
        nodes = ctx.nodes("broker") + ctx.nodes("controller") + ctx.nodes("txn-coordinator")
        if not nodes:
            return None
        ctx.rng.shuffle(nodes)
        spread = ctx.rng.choice(("one", "minority", "all"))
        k = {"one": 1, "minority": max(1, (len(nodes) - 1) // 2), "all": len(nodes)}[spread]
        targets, p = sorted(nodes[:k]), round(ctx.rng.uniform(0.1, 0.4), 2)
        rt = ctx.runtime
        if hasattr(rt, "slot"):                       # local: iptables in the cluster's chain
            from cluster import netfilter
            info = rt.info()
            for n in targets:
                netfilter.loss(rt.slot, n, info.node(n).host, p, tag="loss")
        elif hasattr(rt, "sidecar"):                  # docker: the nodes' fault sidecars
            for n in targets:
                if rt.has_sidecar(n):
                    rt.sidecar(n).loss(p)
        else:
            raise RuntimeError(f"the {rt.name} runtime has no packet loss")
        return {"nodes": targets, "probability": p}

    def stop(self, ctx, started):
        rt = ctx.runtime
        if hasattr(rt, "slot"):
            from cluster import netfilter
            netfilter.remove_tagged(rt.slot, "loss")
        else:
            rt.heal()
        return started


class Pause(FaultPackage):
    name = "pause"
    process_fault = True
    zookeeper_fault = True          # the paused node's ZooKeeper session expires

    def start(self, ctx):
        node = _choice(ctx, ctx.nodes("broker"))
        if node:
            ctx.runtime.pause(node)
        return node

    def stop(self, ctx, node):
        if node:
            ctx.runtime.resume(node)
        return node


class Partition(FaultPackage):
    """Jepsen's partition shapes over the brokers, controllers and transaction coordinators
    (ZooKeeper stays reachable)."""
    name = "partition"

    def start(self, ctx):
        nodes = ctx.nodes("broker") + ctx.nodes("controller") + ctx.nodes("txn-coordinator")
        ctx.rng.shuffle(nodes)
        shape = ctx.rng.choice(PARTITION_SHAPES)
        cuts = cut_pairs(shape, nodes)
        ctx.runtime.cut(cuts)
        return {"shape": shape, "cut": [list(p) for p in cuts]}

    def stop(self, ctx, started):
        ctx.runtime.heal()
        return started


class PartitionLeader(FaultPackage):
    """Jepsen's partition of the primaries: the leader of a random partition of the workload's topic is cut
    from every other node of the cluster (brokers, controllers, transaction coordinators, ZooKeeper) while
    clients still reach it. Its followers stop fetching; once its ZooKeeper session expires the controller
    elects another leader, which it cannot tell it: until the heal it is a zombie leader. With acks=1 it
    goes on acknowledging records that the heal truncates; with acks=all it cannot shrink its ISR (that is
    a ZooKeeper write), so it acknowledges nothing past its followers."""
    name = "partition-leader"
    zookeeper_fault = True

    def start(self, ctx):
        leader = ctx.leader_of(ctx.rng.randrange(ctx.partitions))
        if leader is None:
            return None
        others = [n for n in ctx.nodes() if n != leader]     # the running ones, as `partition` cuts
        cuts = [(leader, n) for n in others]
        ctx.runtime.cut(cuts)
        return {"node": leader, "cut": [list(p) for p in cuts]}

    def stop(self, ctx, started):
        ctx.runtime.heal()
        return started


class PartitionZooKeeper(FaultPackage):
    name = "partition-zookeeper"
    zookeeper_fault = True

    def start(self, ctx):
        node = _choice(ctx, ctx.nodes("broker") + ctx.nodes("controller") + ctx.nodes("txn-coordinator"))
        if node:
            ctx.runtime.cut([(node, "zookeeper")])
        return node

    def stop(self, ctx, node):
        ctx.runtime.heal()
        return node


class LostAck(FaultPackage):
    """The broker appends, then loses the answer: the seeds' lost ACK, on a random partition's leader."""
    name = "lost-ack"

    def start(self, ctx):
        p = ctx.rng.randrange(ctx.partitions)
        count = ctx.rng.randint(1, 3)
        for attempt in range(3):        # a leader named by metadata may still be restarting after a fault
            leader = ctx.leader_of(p)
            if leader is None:
                return None
            try:
                _inject(ctx, leader, drop_produce_responses=faults_pb2.DropProduceResponses(
                    topic=ctx.topic, partition=p, count=count))
                return {"node": leader, "partition": p, "count": count}
            except grpc.RpcError:
                time.sleep(1.0)
        return None

    def stop(self, ctx, started):
        clear_injected_faults(ctx)
        return started


class DelayEndTxn(FaultPackage):
    """A copy of the workload's EndTxn held in the network and delivered late (KAFKA-17754), on the
    coordinator that owns one of its transactional ids: each of the next 3-10 EndTxn of that id is
    handled again 2-20 ms after the producer's next transaction opened and, where brokers verify
    writes (3.6+), had a write verified (waited for at most 5 s). Before the epoch bump per transaction (KIP-890 part 2) the copy carries the live
    epoch and ends whatever transaction is open then; with it, the copy is fenced."""
    name = "delay-end-txn"

    def start(self, ctx):
        tids = sorted(ctx.transactional_ids())
        if not tids:
            return None
        tid = ctx.rng.choice(tids)
        owner = ctx.coordinator_of(tid)
        # the owner; when FindCoordinator cannot tell, every coordinator (only the owner sees the id's EndTxn)
        nodes = [owner] if owner else ctx.nodes("txn-coordinator")
        if not nodes:
            return None
        count = ctx.rng.randint(3, 10)
        for node in nodes:
            _inject(ctx, node, wait=10.0, replay_end_txn=faults_pb2.ReplayEndTxn(
                transactional_id=tid, count=count, min_delay_ms=2, max_delay_ms=20, next_transaction=True))
        return {"nodes": nodes, "transactional_id": tid, "count": count}

    def stop(self, ctx, started):
        if not started:
            return started
        time.sleep(0.3)                                   # let the last copy arrive before it is cleared
        out, answers = dict(started), []
        for name in started["nodes"]:
            try:
                node = ctx.runtime.info().node(name)
                if node.state == "running":
                    stub = faults_pb2_grpc.FaultInjectorStub(rpc.channel(node.address))
                    r = stub.ListFaults(faults_pb2.ListFaultsRequest(), timeout=2)
                    stub.ClearFaults(faults_pb2.ClearFaultsRequest(), timeout=2)
                    answers += [a for f in r.faults for a in f.answers]
            except Exception as e:  # noqa: BLE001 - a coordinator mid-restart: its faults died with it
                answers.append(f"unknown ({type(e).__name__})")
        out["replayed"] = answers
        return out


def _inject(ctx: Context, node: str, wait: float = 0.0, **fault) -> None:
    """One fault through the node's FaultInjector RPC (brokers and transaction coordinators serve it);
    with `wait`, a node that does not answer yet (still starting after an earlier fault restarted it) is
    asked again for up to that many seconds."""
    deadline = time.monotonic() + wait
    while True:
        addr = ctx.runtime.info().node(node).address
        try:
            faults_pb2_grpc.FaultInjectorStub(rpc.channel(addr)).InjectFault(
                faults_pb2.InjectFaultRequest(**fault), timeout=5)
            return
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.UNAVAILABLE or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _choice(ctx: Context, items: list[str]) -> str | None:
    return ctx.rng.choice(items) if items else None


def _active_controller(ctx: Context) -> str | None:
    from eoslab.v1 import controller_pb2, controller_pb2_grpc
    for n in ctx.runtime.info().by_role("controller"):
        if n.state != "running":
            continue
        try:
            with rpc.channel(n.address) as ch:
                r = controller_pb2_grpc.ControllerStub(ch).DescribeCluster(controller_pb2.DescribeClusterRequest(),
                                                                           timeout=1)
            if r.error == 0:
                return n.name
        except Exception:  # noqa: BLE001
            continue
    return None


def clear_injected_faults(ctx: Context) -> None:
    info = ctx.runtime.info()
    for n in info.by_role("broker") + info.by_role("txn-coordinator"):
        if n.state == "running":
            try:
                faults_pb2_grpc.FaultInjectorStub(rpc.channel(n.address)).ClearFaults(
                    faults_pb2.ClearFaultsRequest(), timeout=2)
            except Exception:  # noqa: BLE001 - a broker mid-restart
                pass


def cut_pairs(shape: str, nodes: list[str]) -> list[tuple[str, str]]:
    """Pairs of nodes that may not talk, for one of Jepsen's partition shapes."""
    n = len(nodes)
    if shape == "one":
        groups = [nodes[:1], nodes[1:]]
    elif shape == "minority-third":
        k = max(1, n // 3)
        groups = [nodes[:k], nodes[k:]]
    elif shape == "halves":
        groups = [nodes[:n // 2], nodes[n // 2:]]
    elif shape == "ring":       # each node sees only its two ring neighbours
        allowed = {frozenset((nodes[i], nodes[(i + 1) % n])) for i in range(n)}
        return [(a, b) for i, a in enumerate(nodes) for b in nodes[i + 1:] if frozenset((a, b)) not in allowed]
    elif shape == "bridge":     # two halves joined only through one node in the middle
        mid = n // 2
        left, right = nodes[:mid], nodes[mid + 1:]
        return [(a, b) for a in left for b in right]
    else:
        raise ValueError(f"unknown partition shape {shape!r}")
    return [(a, b) for a in groups[0] for b in groups[1]]


PACKAGES = {
    "kill": Kill("kill", "broker"),
    "pause": Pause(),
    "partition": Partition(),
    "partition-leader": PartitionLeader(),
    "lost-ack": LostAck(),
    "kill-leader": Kill("kill-leader", "broker", leader=True),
    "kill-controller": Kill("kill-controller", "controller"),
    "kill-zookeeper": Kill("kill-zookeeper", "zookeeper"),
    "partition-zookeeper": PartitionZooKeeper(),
    "loss": Loss(),
    "kill-coordinator": KillCoordinator(),
    "delay-end-txn": DelayEndTxn(),
}


def _more_packages() -> dict:
    """The disk and clock packages, each family in its own module."""
    from cluster.nemesis_clock import CLOCK_PACKAGES
    from cluster.nemesis_disk import DISK_PACKAGES
    return {**DISK_PACKAGES, **CLOCK_PACKAGES}


PACKAGES.update(_more_packages())
