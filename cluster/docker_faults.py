"""Network faults of the Docker runtime, through the fault sidecars beside each service.

Guarantees: only a sidecar container of this compose project that is
running is ever called (with the project down, its addresses are nobody's
and traffic to them would leave through the host's default route); every
call carries the shared token; partition and cut drop traffic at both ends
that have a sidecar (ZooKeeper has none: it is cut from its peers' side);
heal removes every rule of every running sidecar and says which failed.
Partition, cut and loss rules match addresses, not ports, so they cover a
service's Kafka listener as they cover its gRPC port; drop_responses (the
lost ACK at the network) names both ports on brokers and coordinators.
Refusals become DockerRuntimeError with the sidecar's one-line message.
"""
from __future__ import annotations

import itertools

SIDECAR_PORT = 9191
KAFKA_ROLES = ("broker", "txn-coordinator")     # the services with a Kafka listener beside gRPC


class DockerRuntimeError(RuntimeError):
    pass


class SidecarFaults:
    """Mixed into DockerRuntime: needs nodes(), _check(), host(), _containers(), token, _net, _sidecars."""

    def has_sidecar(self, node: str) -> bool:
        self._check(node)
        return node != "zookeeper"

    def _sidecar_running(self, node: str, cs: dict | None = None) -> bool:
        """Only a running sidecar container of this project is called: with the project down its
        address is nobody's, and traffic to it would leave through the host's default route."""
        c = (cs if cs is not None else self._containers()).get(f"{node}-sidecar")
        return c is not None and c.status == "running" and self._net is not None

    def sidecar(self, node: str):
        """The SidecarClient of a node's sidecar (ZooKeeper has none: cut it from the other side)."""
        from services.sidecar.client import SidecarClient
        if not self.has_sidecar(node):
            raise DockerRuntimeError(f"{node} has no sidecar; faults against it go through its peers' sidecars")
        if not self._sidecar_running(node):
            raise DockerRuntimeError(f"{node}'s sidecar container is not running (is the cluster up?)")
        if node not in self._sidecars:
            self._sidecars[node] = SidecarClient(f"{self.host(node)}:{SIDECAR_PORT}", self.token)
        return self._sidecars[node]

    def _close_sidecars(self) -> None:
        for c in self._sidecars.values():
            c.close()
        self._sidecars.clear()

    def _cut(self, a: list[str], b: list[str]) -> None:
        """Drop traffic between every node of a and every node of b, both ways, at whichever ends have sidecars."""
        from services.sidecar.client import SidecarError
        for x in a:
            for y in b:
                if not (self.has_sidecar(x) or self.has_sidecar(y)):
                    raise DockerRuntimeError(f"cannot cut {x} from {y}: neither has a sidecar")
        for side, other in ((a, b), (b, a)):
            for node in side:
                if self.has_sidecar(node):
                    try:
                        self.sidecar(node).partition(list(other))
                    except SidecarError as e:
                        raise DockerRuntimeError(f"partition via {node}'s sidecar: {e}") from None

    def partition(self, groups: list[list[str]]) -> None:
        for n in (n for g in groups for n in g):
            self._check(n)
        for g1, g2 in itertools.combinations(groups, 2):
            self._cut(g1, g2)

    def cut(self, pairs: list[tuple[str, str]]) -> None:
        """Cut each pair of nodes, both directions (any graph: rings and bridges too)."""
        for a, b in pairs:
            self._check(a)
            self._check(b)
        for a, b in pairs:
            self._cut([a], [b])

    def drop_responses(self, node: str, peers: list[str], probability: float = 0.0) -> list:
        """The lost ACK at the network: node's answers from its service port to peers are dropped, and
        on brokers and coordinators also those from their Kafka listener (port 9192). The sidecar's rules,
        one per port."""
        from cluster.docker_runtime import KAFKA_PORT, TOPOLOGY
        from services.sidecar.client import SidecarError
        ports = [0] + ([KAFKA_PORT] if TOPOLOGY[node][0] in KAFKA_ROLES else [])     # 0: the sidecar's own
        try:
            return [self.sidecar(node).drop_responses(peers, port=port, probability=probability) for port in ports]
        except SidecarError as e:
            raise DockerRuntimeError(f"drop-responses via {node}'s sidecar: {e}") from None

    def heal(self) -> None:
        from services.sidecar.client import SidecarError
        cs, failed = self._containers(), []
        for node in self.nodes():
            if self.has_sidecar(node) and self._sidecar_running(node, cs):
                try:
                    self.sidecar(node).heal()
                except SidecarError as e:
                    failed.append(f"{node}: {e}")
        if failed:
            raise DockerRuntimeError("heal failed on " + "; ".join(failed))

    def rules(self) -> dict[str, list[str]]:
        """node -> descriptions of the faults its running sidecar has in force."""
        cs = self._containers()
        return {n: [r.description for r in self.sidecar(n).rules().rules] for n in self.nodes()
                if self.has_sidecar(n) and self._sidecar_running(n, cs)}
