"""The service settings in docker-compose.yml and k8s/ are the services' typed configs.

Every broker, controller and transaction-coordinator container in the compose file and the
Kubernetes manifests is started with flags that its role's ConfigDef (services/*/config.py, the
declarations the service itself parses at start) accepts, values included, and every EOSLAB_*
variable it sets is either one of that config's settings (`EOSLAB_<NAME>`) or one of the few that
the launcher, the logging or the cluster secret read. A renamed setting, a typo in a variable or
a value out of range fails here, offline, instead of in a container that exits at start.
The settings are written by tools/gen_deploy.py (tests/k8s/test_gen_deploy.py); this test reads
the files as they are, without the generator, so a generator bug or a hand edit is caught too.
"""
from __future__ import annotations

import pathlib
import re
import shlex

import pytest

yaml = pytest.importorskip("yaml")

from cluster.service_args import config_def  # noqa: E402
from eoslab.common import auth  # noqa: E402

pytestmark = pytest.mark.fast

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROLES = ("broker", "controller", "txn-coordinator")
# read by the process around the service, not by its config
NOT_SETTINGS = {auth.SECRET_ENV: "the cluster secret (eoslab.common.auth)",
                auth.SECRET_FILE_ENV: "the cluster secret's file (eoslab.common.auth)",
                "EOSLAB_WAIT_ZK": "docker/launch.py waits for ZooKeeper there",
                "EOSLAB_WAIT_S": "docker/launch.py's wait",
                "EOSLAB_EXTRA_ARGS": "docker/entrypoint.sh appends these flags (checked below as flags)",
                "EOSLAB_LOG_LEVEL": "eoslab.common.rpc's logging", "EOSLAB_LOG_FILE": "eoslab.common.rpc's logging"}


def compose_default(text: str) -> str:
    """Compose's ${VAR:-default} -> default, ${VAR:?message} and ${VAR} -> a placeholder."""
    text = re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", text)
    return re.sub(r"\$\{[A-Z_]+(:\?[^}]*)?\}", "x", text)


def compose_containers():
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for name, svc in doc["services"].items():
        cmd = svc.get("command") or []
        if cmd and cmd[0] in ROLES:
            env = {k: compose_default(str(v)) for k, v in (svc.get("environment") or {}).items()}
            flags = [compose_default(str(a)) for a in cmd[1:]] + env.get("EOSLAB_EXTRA_ARGS", "").split()
            yield f"docker-compose.yml:{name}", cmd[0], flags, env


def k8s_containers():
    for path in sorted((ROOT / "k8s").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or doc.get("kind") not in ("StatefulSet", "Deployment", "Job"):
                continue
            for c in doc["spec"]["template"]["spec"]["containers"]:
                line = " ".join(c.get("args") or [])
                words = shlex.split(re.sub(r"\$\$\(\([^)]*\)\)", "1", line.replace("${POD_NAME}", "pod-0")))
                if words[:2] != ["exec", "eoslab-entrypoint"] or words[2] not in ROLES:
                    continue
                env = {e["name"]: str(e.get("value", "x")) for e in c.get("env") or []}
                yield f"{path.name}:{c['name']}", words[2], words[3:], env


CONTAINERS = list(compose_containers()) + list(k8s_containers())


def test_every_role_is_deployed_in_both():
    for where in ("docker-compose.yml", ".yaml"):
        assert {role for name, role, _, _ in CONTAINERS if where in name} == set(ROLES), where


@pytest.mark.parametrize("name,role,flags,env", CONTAINERS, ids=[c[0] for c in CONTAINERS])
def test_flags_and_variables_are_the_roles_settings(name, role, flags, env):
    cdef = config_def(role)
    settings = {k.env for k in cdef.keys}
    unknown = sorted(v for v in env if v.startswith("EOSLAB_") and v not in settings and v not in NOT_SETTINGS)
    assert not unknown, f"{name}: {unknown} are not settings of the {role}'s config"
    cdef.parse(flags, env={k: v for k, v in env.items() if k in settings})     # raises ConfigError


def test_a_misspelt_variable_or_a_bad_value_would_fail_here():
    name, role, flags, env = next(c for c in CONTAINERS if c[1] == "broker")
    cdef = config_def(role)
    assert "EOSLAB_KAFKA_VERSON" not in {k.env for k in cdef.keys} | set(NOT_SETTINGS)
    with pytest.raises(ValueError):
        cdef.parse(flags + ["--zk-session-timeout-ms=-5"], env={})
    with pytest.raises(ValueError):
        cdef.parse(flags, env={"EOSLAB_KAFKA_VERSION": "9.9"})
