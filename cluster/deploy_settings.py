"""The settings the deploy files give the service containers, by the services' own setting names.

Guarantees: `SPEC` says, for every broker, controller and transaction
coordinator container of docker-compose.yml and of k8s/*.yaml, which settings
it is started with and with what value, naming each setting as its role's
typed config declares it (services/*/config.py). `render()` turns that into
flags and `EOSLAB_<NAME>` variables through the role's ConfigDef, so flag
names, variable names and value checks come from the config and never from
here. A setting the config does not have, a value of the wrong type or out of
range, a setting the service requires left out, or a default that cannot be
written raises SpecError, one line naming the file, the container and the
problem. Values a container fills in when it starts (compose's
`${VAR:-default}`, the pod's ordinal in its shell) are checked as the value
they take by default, or in the first pod. Finally every container's whole
command line is parsed as the service parses it at start. tools/gen_deploy.py
writes the result into the files.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from cluster.docker_runtime import KAFKA_PORT, TOPOLOGY
from eoslab.common.config import BY_VERSION, REQUIRED, ConfigDef, ConfigError

CONFIG_FILES = {"broker": "services/broker/config.py", "controller": "services/controller/config.py",
                "txn-coordinator": "services/txn_coordinator/config.py"}
COMPOSE_FILE = "docker-compose.yml"


class SpecError(ValueError):
    """A deploy setting the role's config refuses: one line, naming the file, the container and the setting."""


@dataclass(frozen=True)
class ComposeVar:
    """`${VAR:-default}`: compose fills it from the variables `eoslab cluster up` passes. `var` defaults to the
    setting's own `EOSLAB_<NAME>`, `default` to the setting's default in its config."""
    var: str | None = None
    default: Any = None


@dataclass(frozen=True)
class Shell:
    """Text the pod's shell expands when the container starts; `example` is what it becomes in the first pod."""
    text: str
    example: str


@dataclass(frozen=True)
class Node:
    name: str           # the compose service, or the StatefulSet of k8s
    id: int | None      # None: the pod ordinal decides
    port: int           # the service's gRPC port
    addr: str = ""      # compose: the container's fixed address


@dataclass(frozen=True)
class Container:
    """What one generated block of a deploy file holds for one role."""
    file: str
    block: str                               # the name in the file's BEGIN/END generated markers
    role: str
    flags: Callable[[Node], dict[str, Any]] | None = None     # setting name -> value, in flag order
    env: dict[str, Any] = field(default_factory=dict)         # setting name -> value, as EOSLAB_<NAME>
    node: Node | None = None


@dataclass(frozen=True)
class Rendered:
    file: str
    block: str
    role: str
    flags: list[list[str]]           # the service's command line after the role: [flag] or [flag, value]
    env: list[tuple[str, str]]       # EOSLAB_<NAME>, value as written
    expand: frozenset[str]           # values written for the target to expand ($...), never to be quoted

    @property
    def words(self) -> list[str]:
        return [w for group in self.flags for w in group]


# -- the spec ---------------------------------------------------------------------------------------------------
# the compose nodes, their ids, address octets and ports: the Docker runtime's own table
PORTS = {role: port for role, _, _, port in TOPOLOGY.values() if role != "zookeeper"}
DATA_DIR = "/var/lib/eoslab"          # the broker's volume in both
NET = "${EOSLAB_NET:-172.28.77}"      # compose's /24; the <name>-net holders own the addresses
COMPOSE_NODES: dict[str, dict[int, int]] = {}      # role -> {id: last octet}
for _role, _id, _octet, _ in TOPOLOGY.values():
    if _role != "zookeeper":
        COMPOSE_NODES.setdefault(_role, {})[_id] = _octet
COMPOSE_ZK = "zookeeper:2181"
K8S_ZK = "zookeeper-0.zookeeper.eoslab.svc.cluster.local:2181"
K8S_FILES = {"controller": "k8s/controllers.yaml", "broker": "k8s/brokers.yaml",
             "txn-coordinator": "k8s/txn-coordinators.yaml"}
# the id is the pod ordinal + 1 (`$$` is kubelet's escape for `$`: the shell sees `$((...))`)
POD_ID = Shell("$$(( ${POD_NAME##*-} + 1 ))", "1")


def pod_address(role: str, port: int) -> Shell:
    return Shell(f"${{POD_NAME}}.{role}.eoslab.svc.cluster.local:{port}",
                 f"{role}-0.{role}.eoslab.svc.cluster.local:{port}")


def compose_controller(n: Node) -> dict[str, Any]:
    return {"controller.id": n.id, "listen": f"0.0.0.0:{n.port}", "advertise": f"{n.name}:{n.port}",
            "zookeeper": COMPOSE_ZK, "zk.session.timeout.ms": ComposeVar(), "kafka.version": ComposeVar()}


def compose_broker(n: Node) -> dict[str, Any]:
    return {"broker.id": n.id, "listen": f"0.0.0.0:{n.port}", "advertise": f"{n.addr}:{n.port}",
            "kafka.listen": f"0.0.0.0:{KAFKA_PORT}", "kafka.advertise": f"{n.addr}:{KAFKA_PORT}",
            "zookeeper": COMPOSE_ZK, "zk.session.timeout.ms": ComposeVar(), "data.dir": DATA_DIR,
            "enable.fault.injection": True}


def compose_coordinator(n: Node) -> dict[str, Any]:
    brokers = ",".join(f"broker-{i}:{PORTS['broker']}" for i in COMPOSE_NODES["broker"])
    return {"coordinator.id": n.id, "listen": f"0.0.0.0:{n.port}", "advertise": f"{n.addr}:{n.port}",
            "kafka.listen": f"0.0.0.0:{KAFKA_PORT}", "kafka.advertise": f"{n.addr}:{KAFKA_PORT}",
            "zookeeper": COMPOSE_ZK, "zk.session.timeout.ms": ComposeVar(),
            "bootstrap": ComposeVar("EOSLAB_TXN_BOOTSTRAP", brokers),
            "transaction.state.replication.factor": ComposeVar("EOSLAB_TXN_STATE_RF"),
            "enable.fault.injection": True}


def k8s_controller(n: Node) -> dict[str, Any]:
    return {"controller.id": POD_ID, "listen": f"0.0.0.0:{n.port}", "advertise": pod_address(n.name, n.port),
            "zookeeper": K8S_ZK}


def k8s_broker(n: Node) -> dict[str, Any]:
    return {"broker.id": POD_ID, "listen": f"0.0.0.0:{n.port}", "advertise": pod_address(n.name, n.port),
            "zookeeper": K8S_ZK, "data.dir": DATA_DIR, "enable.fault.injection": True}


def k8s_coordinator(n: Node) -> dict[str, Any]:
    return {"coordinator.id": POD_ID, "listen": f"0.0.0.0:{n.port}", "advertise": pod_address(n.name, n.port),
            "zookeeper": K8S_ZK, "bootstrap": f"bootstrap.eoslab.svc.cluster.local:{PORTS['broker']}",
            "enable.fault.injection": True}


COMPOSE_FLAGS = {"controller": compose_controller, "broker": compose_broker, "txn-coordinator": compose_coordinator}
K8S_FLAGS = {"controller": k8s_controller, "broker": k8s_broker, "txn-coordinator": k8s_coordinator}
# the compose environment every container of the role shares (the x-<block> anchors); the controllers have none
COMPOSE_ENV = {"broker": ("broker-env", {"kafka.version": ComposeVar()}),
               "txn-coordinator": ("coordinator-env", {"kafka.version": ComposeVar()})}


def spec() -> list[Container]:
    out = [Container(COMPOSE_FILE, block, role, env=env) for role, (block, env) in COMPOSE_ENV.items()]
    for role, nodes in COMPOSE_NODES.items():
        for i, octet in nodes.items():
            node = Node(f"{role}-{i}", i, PORTS[role], f"{NET}.{octet}")
            out.append(Container(COMPOSE_FILE, node.name, role, COMPOSE_FLAGS[role], node=node))
    for role, path in K8S_FILES.items():
        out.append(Container(path, role, role, K8S_FLAGS[role], node=Node(role, None, PORTS[role])))
    return out


SPEC = spec()


# -- rendering through the configs ------------------------------------------------------------------------------
def compose_default(text: str) -> str:
    """What compose makes of `${VAR:-default}` when VAR is unset."""
    return re.sub(r"\$\{[A-Za-z0-9_]+:-([^}]*)\}", r"\1", text)


def value_of(key, value: Any) -> tuple[Any, str | None]:
    """(the value the service gets, the text written for it or None to write the value itself)."""
    if isinstance(value, Shell):
        return value.example, value.text
    if isinstance(value, ComposeVar):
        default = key.default if value.default is None else value.default
        if default is None or default is REQUIRED or default is BY_VERSION:
            raise ConfigError(f"{key.flag} has no default to write in ${{{value.var or key.env}:-...}}: give one")
        text = key.text(key.convert(default))
        return text, f"${{{value.var or key.env}:-{text}}}"
    if isinstance(value, str) and "${" in value:
        return compose_default(value), value
    return value, None


def render_one(c: Container, defs: Callable[[str], ConfigDef]) -> Rendered:
    where = f"{c.file} {c.block}"
    try:
        cdef = defs(c.role)
        flags: list[list[str]] = []
        argv: list[str] = []          # as the service sees it at start
        expand: set[str] = set()
        for name, value in (c.flags(c.node) if c.flags else {}).items():
            key = cdef.setting(name)
            v, text = value_of(key, value)
            flags.append(key.as_flags(v, text))
            argv += key.as_flags(v)
            expand |= {text} if text is not None else set()
        env, env_values = [], {}
        for name, value in c.env.items():
            key = cdef.setting(name)
            v, text = value_of(key, value)
            env.append(key.as_env(v, text))
            env_values[key.env] = key.as_env(v)[1]
        if c.flags:                   # the whole command line, as the service parses it
            cdef.parse(argv, env=env_values)
    except ConfigError as e:
        raise SpecError(f"{where} ({CONFIG_FILES.get(c.role, c.role)}): {e}") from None
    return Rendered(c.file, c.block, c.role, flags, env, frozenset(expand))


def render(spec: list[Container] | None = None, defs: Callable[[str], ConfigDef] | None = None) -> list[Rendered]:
    """Every container of `spec` (default SPEC) rendered through `defs(role)` (default: the services' configs)."""
    if defs is None:
        from cluster.service_args import config_def as defs
    return [render_one(c, defs) for c in (SPEC if spec is None else spec)]
