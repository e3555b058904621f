"""K8sRuntime: the cluster of k8s/ in a Kubernetes namespace, on the official `kubernetes` client.

Guarantees: the same verbs and node names as every Runtime ("broker-1" is
pod broker-0: ids are ordinal + 1). kill deletes the pod with no grace
period (the StatefulSet then starts a replacement with the same identity and
volume, so `start` only waits for it); `delete_pod` is the same verb under
its Kubernetes name, for zombie-fencing experiments; pause and resume send
SIGSTOP / SIGCONT to the service's processes from the pod's sidecar (the
pods share one process namespace); partition and heal exec
`python -m services.sidecar.ctl` in the sidecars, which call their own
gRPC API with the token from the pod's Secret. `up` applies k8s/ (objects
that exist are left alone), after making the Secret `eoslab-cluster` (a new
random cluster secret, unless it exists) that the services read for their
internal RPCs, and waits for every StatefulSet to be ready;
`wait_ready` waits for every StatefulSet of the namespace; `down` deletes
the namespace. Configuration: in-cluster (the pod's ServiceAccount) when
$KUBERNETES_SERVICE_HOST is set and no kubeconfig is given, the kubeconfig
($KUBECONFIG or ~/.kube/config) otherwise; the constructor then asks the
API server for its version (within `connect_timeout` seconds), so a missing
configuration or an API server that does not answer fails at once. Errors
are K8sRuntimeError with one line.

This is what `open_runtime("k8s", NAMESPACE)` and `eoslab run --runtime k8s
--cluster NAMESPACE` use (k8s/zombie-fencing-job.yaml runs the latter).

Not exercised on this machine: no Kubernetes API server can run here. The
manifests are validated offline (tests/k8s/test_manifests.py); this module
is checked for its name mapping and for failing with one line when there is
no configuration or no API server (tests/k8s/test_k8s_job_command.py).
"""
from __future__ import annotations

import itertools
import json
import os
import time

from cluster.runtime import ClusterInfo, NodeInfo, Runtime

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MANIFESTS = ["namespace.yaml", "zookeeper.yaml", "controllers.yaml", "brokers.yaml", "txn-coordinators.yaml"]
# role -> (StatefulSet / headless Service, port, the service's module)
ROLES = {"zookeeper": ("zookeeper", 2181, None), "controller": ("controller", 9093, "services.controller"),
         "broker": ("broker", 9092, "services.broker"),
         "txn-coordinator": ("txn-coordinator", 9094, "services.txn_coordinator")}


class K8sRuntimeError(RuntimeError):
    pass


def _one_line(e: BaseException) -> str:
    """The gist of a client error on one line (urllib3 nests the cause in a long repr)."""
    text = " ".join(str(e).split()) or type(e).__name__
    for marker in ("Connection refused", "Name or service not known", "timed out", "certificate verify failed"):
        if marker in text:
            return marker.lower()
    return text[:300]


def pod_name(node: str) -> str:
    """"broker-1" -> "broker-0", "zookeeper" -> "zookeeper-0"."""
    if node == "zookeeper":
        return "zookeeper-0"
    role, _, num = node.rpartition("-")
    if role not in ROLES or not num.isdigit() or int(num) < 1:
        raise K8sRuntimeError(f"no node {node!r}: expected zookeeper, controller-N, broker-N or txn-coordinator-N")
    return f"{role}-{int(num) - 1}"


def node_name(pod: str) -> str:
    role, _, ordinal = pod.rpartition("-")
    return "zookeeper" if role == "zookeeper" else f"{role}-{int(ordinal) + 1}"


class K8sRuntime(Runtime):
    name = "k8s"

    def __init__(self, namespace: str = "eoslab", kubeconfig: str | None = None, context: str | None = None,
                 connect_timeout: float = 10.0):
        try:
            from kubernetes import client, config
        except ImportError:
            raise K8sRuntimeError("the k8s runtime needs the kubernetes client (pip install -e '.[k8s]')") from None
        cfg = client.Configuration()
        try:
            if os.environ.get("KUBERNETES_SERVICE_HOST") and not kubeconfig:
                config.load_incluster_config(client_configuration=cfg)
                where = "in-cluster"
            else:
                config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
                where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        except Exception as e:  # noqa: BLE001 - ConfigException, a malformed file, ...
            raise K8sRuntimeError(f"no Kubernetes configuration: {_one_line(e)}") from None
        self.ns = namespace
        self.api = client.ApiClient(cfg)
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        try:
            client.VersionApi(self.api).get_code(_request_timeout=connect_timeout)
        except Exception as e:  # noqa: BLE001 - refused, unresolvable, TLS, timeout, 401/403
            raise K8sRuntimeError(f"no Kubernetes API server answers at {cfg.host} ({where}): "
                                  f"{_one_line(e)}") from None

    # -- life cycle -------------------------------------------------------
    def up(self, timeout: float = 300) -> ClusterInfo:
        from kubernetes import utils
        from kubernetes.client.rest import ApiException
        for name in MANIFESTS:
            try:
                utils.create_from_yaml(self.api, os.path.join(REPO, "k8s", name), namespace=self.ns)
            except utils.FailToCreateError as e:
                real = [x for x in e.api_exceptions if x.status != 409]       # 409: exists already
                if real:
                    raise K8sRuntimeError(f"apply k8s/{name}: {real[0].reason}") from None
            except ApiException as e:
                raise K8sRuntimeError(f"apply k8s/{name}: {e.reason}") from None
            if name == "namespace.yaml":
                self._ensure_cluster_secret()
        self._wait_ready(timeout)
        return self.info()

    def _ensure_cluster_secret(self) -> None:
        """The Secret the services' internal RPCs carry (eoslab.common.auth); an existing one is kept."""
        from kubernetes import client
        from kubernetes.client.rest import ApiException

        from eoslab.common import auth
        body = client.V1Secret(metadata=client.V1ObjectMeta(name="eoslab-cluster", namespace=self.ns,
                                                            labels={"app.kubernetes.io/part-of": "eoslab"}),
                               string_data={"secret": auth.new_secret()}, type="Opaque")
        try:
            self.core.create_namespaced_secret(self.ns, body)
        except ApiException as e:
            if e.status != 409:
                raise K8sRuntimeError(f"create Secret eoslab-cluster: {e.reason}") from None

    def wait_ready(self, timeout: float = 120) -> None:
        """Every StatefulSet of the namespace has all its replicas ready (what final_heal waits for)."""
        self._wait_ready(timeout)

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            pending = []
            for sts in self.apps.list_namespaced_stateful_set(self.ns).items:
                if (sts.status.ready_replicas or 0) < (sts.spec.replicas or 0):
                    pending.append(sts.metadata.name)
            if not pending:
                return
            if time.monotonic() > deadline:
                raise K8sRuntimeError(f"not ready after {timeout:.0f}s: {', '.join(pending)}")
            time.sleep(2)

    def down(self) -> None:
        from kubernetes.client.rest import ApiException
        try:
            self.core.delete_namespace(self.ns)
        except ApiException as e:
            if e.status != 404:
                raise K8sRuntimeError(f"delete namespace {self.ns}: {e.reason}") from None

    def info(self) -> ClusterInfo:
        nodes = []
        for pod in self.core.list_namespaced_pod(self.ns, label_selector="app.kubernetes.io/part-of=eoslab").items:
            role = pod.metadata.labels.get("app.kubernetes.io/name")
            if role not in ROLES:
                continue
            svc, port, _ = ROLES[role]
            name = node_name(pod.metadata.name)
            nid = None if role == "zookeeper" else int(name.rpartition("-")[2])
            state = {"Running": "running", "Pending": "unknown"}.get(pod.status.phase, "dead")
            nodes.append(NodeInfo(name, role, nid, f"{pod.metadata.name}.{svc}.{self.ns}.svc.cluster.local", port,
                                  state))
        return ClusterInfo(self.ns, "k8s", f"bootstrap.{self.ns}.svc.cluster.local:9092",
                           f"zookeeper-0.zookeeper.{self.ns}.svc.cluster.local:2181", nodes)

    # -- processes ----------------------------------------------------------
    def delete_pod(self, node: str, grace_seconds: int = 0) -> None:
        from kubernetes.client.rest import ApiException
        try:
            self.core.delete_namespaced_pod(pod_name(node), self.ns, grace_period_seconds=grace_seconds)
        except ApiException as e:
            if e.status != 404:
                raise K8sRuntimeError(f"delete pod {pod_name(node)}: {e.reason}") from None

    def kill(self, node: str) -> None:
        self.delete_pod(node, 0)

    def start(self, node: str, timeout: float = 120) -> None:
        """The StatefulSet restarts a killed pod by itself: wait until it is ready again."""
        from kubernetes.client.rest import ApiException
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                pod = self.core.read_namespaced_pod(pod_name(node), self.ns)
            except ApiException as e:
                if e.status != 404:            # 404: the StatefulSet has not made the replacement yet
                    raise K8sRuntimeError(f"read pod {pod_name(node)}: {e.reason}") from None
                pod = None
            if (pod is not None and pod.metadata.deletion_timestamp is None and pod.status.phase == "Running"
                    and all(c.ready for c in pod.status.container_statuses or [])):
                return
            time.sleep(1)
        raise K8sRuntimeError(f"{node} not ready after {timeout:.0f}s")

    def exec(self, node: str, command: list[str], container: str = "sidecar") -> str:
        from kubernetes.stream import stream
        return stream(self.core.connect_get_namespaced_pod_exec, pod_name(node), self.ns, container=container,
                      command=command, stderr=True, stdin=False, stdout=True, tty=False)

    def _signal(self, node: str, sig: str) -> None:
        module = ROLES[node.rpartition("-")[0]][2] if node != "zookeeper" else None
        if module is None:
            raise K8sRuntimeError("ZooKeeper's pod has no sidecar to signal it from")
        pattern = module.replace(".", "[.]")      # does not match this shell's own command line
        self.exec(node, ["sh", "-c", f"for p in /proc/[0-9]*; do grep -q '{pattern}' $p/cmdline 2>/dev/null "
                                     f"&& kill -{sig} ${{p#/proc/}}; done; true"])

    def pause(self, node: str) -> None:
        self._signal(node, "STOP")

    def resume(self, node: str) -> None:
        self._signal(node, "CONT")

    def logs(self, node: str, tail: int = 200) -> str:
        role = "zookeeper" if node == "zookeeper" else node.rpartition("-")[0]
        return self.core.read_namespaced_pod_log(pod_name(node), self.ns, container=role, tail_lines=tail)

    # -- network faults -------------------------------------------------------
    def sidecar(self, node: str, *args: str) -> dict:
        out = self.exec(node, ["python", "-m", "services.sidecar.ctl", *args])
        try:
            return json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise K8sRuntimeError(f"sidecar of {node}: {out.strip()[-300:]}") from None

    def _peer(self, node: str) -> str:
        role = "zookeeper" if node == "zookeeper" else node.rpartition("-")[0]
        return f"{pod_name(node)}.{ROLES[role][0]}"

    def partition(self, groups: list[list[str]]) -> None:
        for g1, g2 in itertools.combinations(groups, 2):
            for side, other in ((g1, g2), (g2, g1)):
                for node in side:
                    if node != "zookeeper":
                        self.sidecar(node, "partition", *[self._peer(o) for o in other])

    def cut(self, pairs: list[tuple[str, str]]) -> None:
        """Cut each pair of nodes, both directions, from whichever ends have a sidecar (as DockerRuntime)."""
        for a, b in pairs:
            if a == b == "zookeeper":
                raise K8sRuntimeError("cannot cut zookeeper from itself")
            for node, other in ((a, b), (b, a)):
                if node != "zookeeper":
                    self.sidecar(node, "partition", self._peer(other))

    def heal(self) -> None:
        for n in self.info().nodes:
            if n.role != "zookeeper" and n.state == "running":
                self.sidecar(n.name, "heal")

    def node_state(self, node: str) -> str:
        try:
            return next(n.state for n in self.info().nodes if n.name == node)
        except StopIteration:
            return "dead"

    def bootstrap_all(self) -> str:
        return ",".join(n.address for n in self.info().nodes if n.role == "broker")
