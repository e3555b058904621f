"""Opening a runtime by kind: `local` processes, `docker` containers, or `auto` (whichever this machine has).

    open_runtime(kind, name, *, brokers=3, controllers=2, txn_coordinators=2, broker_args=()) -> Runtime

Guarantees: `open_runtime` returns a LocalRuntime or a DockerRuntime for
the cluster called `name` (not started: call `up()`, or use it as it is when
that cluster already runs, as `eoslab cluster status/down` and the nemesis
do); the sizes and broker flags apply when the runtime starts a new cluster.
`k8s` (RUN_KINDS, not a choice `auto` makes) returns a K8sRuntime on the
cluster deployed from k8s/ in namespace `name` (in-cluster configuration
inside a pod, the kubeconfig otherwise; sizes and broker flags are the
manifests'); with no configuration or no API server answering it raises
K8sRuntimeError with one line.
`auto` reopens a cluster of that name on the runtime it already runs on
(local first); otherwise it chooses docker when a Docker engine answers,
the docker SDK imports and both images exist, else local. `choose()`
answers in at most about ENGINE_PROBE_S seconds whatever the engine does
(no engine, a refused socket, a hung engine) and says why it chose. Bad
input raises RuntimeChoiceError with one line.

`python -m cluster.runtimes choose [auto|local|docker] [--images-optional]`
prints `<kind> <why>` (what `make cluster-up` uses).
"""
from __future__ import annotations

import importlib.util
import os
import sys

from cluster import docker_engine as eng
from cluster.runtime import Runtime

KINDS = ("local", "docker", "auto")          # what `cluster up` and choose() take: runtimes this machine can start
RUN_KINDS = KINDS + ("k8s",)                 # what open_runtime takes: also a cluster deployed on Kubernetes
ENGINE_PROBE_S = float(os.environ.get("EOSLAB_ENGINE_PROBE_S", "2"))


class RuntimeChoiceError(ValueError):
    pass


def images() -> tuple[str, str]:
    return (os.environ.get("EOSLAB_IMAGE", "eoslab/eoslab:dev"), os.environ.get("ZK_IMAGE", "eoslab/zookeeper:dev"))


def choose(kind: str = "auto", images_optional: bool = False, sock_path: str | None = None) -> tuple[str, str]:
    """(kind, why): `auto` resolved to docker or local, with the reason; local and docker as given."""
    if kind not in KINDS:
        raise RuntimeChoiceError(f"unknown runtime {kind!r} (choose from {', '.join(KINDS)})")
    if kind == "local":
        return "local", "asked for the local runtime"
    if kind == "docker":
        return "docker", "asked for the docker runtime"
    ok, why = eng.engine_status(ENGINE_PROBE_S, sock_path or eng.SOCKET)
    if not ok:
        return "local", why
    if not images_optional:
        if importlib.util.find_spec("docker") is None:
            return "local", "a Docker engine answers, but the docker SDK is not installed (pip install -e '.[docker]')"
        missing = [i for i in images() if not eng.image_exists(i, ENGINE_PROBE_S, sock_path or eng.SOCKET)]
        if missing:
            return "local", f"a Docker engine answers, but image {missing[0]} is missing (make images)"
    return "docker", why


def _local_exists(name: str) -> bool:
    from cluster.local import default_home
    return os.path.exists(os.path.join(default_home(), "clusters", name, "state.json"))


def _docker_exists(name: str) -> bool:
    from cluster.docker_runtime import DockerRuntime, DockerRuntimeError, project_for
    if not eng.engine_status(ENGINE_PROBE_S)[0] or importlib.util.find_spec("docker") is None:
        return False
    try:
        return DockerRuntime(project_for(name), cluster_name=name).exists()
    except DockerRuntimeError:
        return False


def existing(name: str) -> list[str]:
    """The runtimes on which a cluster called `name` exists (quick; never hangs on a missing engine)."""
    return [k for k, found in (("local", _local_exists), ("docker", _docker_exists)) if found(name)]


def open_runtime(kind: str, name: str, *, brokers: int = 3, controllers: int = 2, txn_coordinators: int = 2,
                 broker_args=(), **extra) -> Runtime:
    """A runtime for cluster `name`; `extra` goes to the runtime's constructor (e.g. home= for local).

    `kafka_version` (in extra) makes every broker, controller and transaction coordinator behave as that Kafka
    release: a flag on the local runtime (before the other flags, so they override it), an
    environment variable of every container on Docker."""
    version = extra.pop("kafka_version", None)
    if kind == "auto":
        found = existing(name)
        kind = found[0] if found else choose("auto")[0]
    elif kind not in RUN_KINDS:
        raise RuntimeChoiceError(f"unknown runtime {kind!r} (choose from {', '.join(RUN_KINDS)})")
    if kind == "k8s":
        from cluster.k8s_runtime import K8sRuntime
        return K8sRuntime(namespace=name, **extra)
    if kind == "local":
        from cluster.local import LocalRuntime
        if version:
            flag = [f"--kafka-version={version}"]
            broker_args = flag + list(broker_args)
            extra["txn_coordinator_args"] = flag + list(extra.get("txn_coordinator_args") or [])
            extra["controller_args"] = flag + list(extra.get("controller_args") or [])
        return LocalRuntime(name, brokers=brokers, controllers=controllers, txn_coordinators=txn_coordinators,
                            broker_args=list(broker_args), **extra)
    from cluster.docker_runtime import DockerRuntime, project_for
    if version:
        extra["kafka_version"] = version
    return DockerRuntime(project_for(name), cluster_name=name, brokers=brokers, controllers=controllers,
                         txn_coordinators=txn_coordinators, broker_args=tuple(broker_args), **extra)


def main(argv: list[str]) -> int:
    if len(argv) < 1 or argv[0] != "choose" or len(argv) > 3:
        print("usage: python -m cluster.runtimes choose [auto|local|docker] [--images-optional]", file=sys.stderr)
        return 2
    rest = [a for a in argv[1:] if a != "--images-optional"]
    try:
        kind, why = choose(rest[0] if rest else "auto", images_optional="--images-optional" in argv)
    except RuntimeChoiceError as e:
        print(f"runtimes: {e}", file=sys.stderr)
        return 2
    print(f"{kind} {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
