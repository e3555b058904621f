"""The wall clock of a Docker cluster's services, moved by libfaketime: the clock faults on the Docker runtime.

Guarantees: a compose project's eoslab services (controllers, brokers,
transaction coordinators; never ZooKeeper, the holders or the sidecars) run
with the image's libfaketime preloaded only when the cluster was started for
it: `enable(rt)` before `up()` (what a run whose schedule holds a clock fault
does), or $EOSLAB_FAKETIME=1 in the environment of the process that starts it.
Any process reopening the project sees the choice in the containers'
environment (`enabled`), and a container restarted later keeps it.

The preload is the local runtime's (cluster.faketime: the same settings, the
same sleep fix, built into the image by the Dockerfile's gcc stage as
IMAGE_DIR/sleepfix-DIGEST.so beside IMAGE_DIR/libfaketimeMT.so.1), handed to
compose as an override file (.eoslab/docker/PROJECT.faketime.yml) that adds
the environment and one read-only bind mount per service: the host folder
.eoslab/docker/faketime/PROJECT/ at CONTAINER_DIR, where the service's control
file NODE.rc lives. The harness writes an offset there (atomically, by
rename: the folder, not the file, is mounted, so the container sees the new
file), and the service takes it within about a second; "+0" is written for
every service at each `up`, and `down` removes the folder and the override.

`check_image(client, image)` says in one line (FaketimeMissing) why an image
cannot run the clock faults: it has no libfaketime, or no sleep fix built
from this checkout's source. It looks at the image's files in a created,
never started, container.
"""
from __future__ import annotations

import io
import json
import os
import shutil
import tarfile

from cluster import faketime
from cluster.docker_compose import REPO

IMAGE_DIR = "/usr/lib/eoslab/faketime"          # in the image: the library (a link) and the sleep fix
CONTAINER_DIR = "/run/eoslab-faketime"          # in each service: the project's control files
SERVICE_ROLES = ("controller", "broker", "txn-coordinator")
STATE_DIR = os.path.join(REPO, ".eoslab", "docker")


def host_dir(project: str) -> str:
    return os.path.join(STATE_DIR, "faketime", project)


def override_file(project: str) -> str:
    return os.path.join(STATE_DIR, f"{project}.faketime.yml")


def control_file(rt, node: str) -> str:
    return os.path.join(host_dir(rt.project), f"{node}.rc")


def image_files(client, image: str) -> set[str]:
    """The names in the image's IMAGE_DIR (empty when it has none), read from a container never started."""
    import docker
    try:
        c = client.containers.create(image, entrypoint=["true"], command=[])
    except docker.errors.ImageNotFound:
        raise faketime.FaketimeMissing(f"clock faults: image {image} is missing (make images)") from None
    try:
        try:
            stream, _ = c.get_archive(IMAGE_DIR)
        except docker.errors.NotFound:
            return set()
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            return {os.path.basename(m.name) for m in tar.getmembers()}
    finally:
        c.remove(force=True)


def check_image(client, image: str) -> None:
    """FaketimeMissing with one line unless the image carries libfaketime and this checkout's sleep fix."""
    names = image_files(client, image)
    if "libfaketimeMT.so.1" not in names:
        raise faketime.FaketimeMissing(f"clock faults need libfaketime in the image, and {image} has none "
                                       f"({IMAGE_DIR}/libfaketimeMT.so.1): rebuild it with `make images`")
    if faketime.sleep_fix_name() not in names:
        raise faketime.FaketimeMissing(f"clock faults: image {image} has no sleep fix built from this checkout "
                                       f"({IMAGE_DIR}/{faketime.sleep_fix_name()}): rebuild it with `make images`")


def service_env(node: str) -> dict[str, str]:
    """The environment a preloaded service container starts with (cluster.faketime.spawn_env's, in the image)."""
    return {"LD_PRELOAD": f"{IMAGE_DIR}/{faketime.sleep_fix_name()} {IMAGE_DIR}/libfaketimeMT.so.1",
            "FAKETIME_TIMESTAMP_FILE": f"{CONTAINER_DIR}/{node}.rc",
            "FAKETIME_CACHE_DURATION": str(faketime.CACHE_DURATION_S), "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "FAKETIME_FORCE_MONOTONIC_FIX": "0", "NO_FAKE_STAT": "1"}


def _services(rt) -> list[str]:
    from cluster.docker_runtime import TOPOLOGY
    return [n for n in rt.nodes() if TOPOLOGY[n][0] in SERVICE_ROLES]


def enable(rt) -> None:
    """Preload libfaketime into the services this (not yet started) Docker cluster starts."""
    check_image(rt.client, rt.images[0])
    rt.faketime = True


def wanted(rt) -> bool:
    """Whether `up` starts the services with the preload: enable() was called, or $EOSLAB_FAKETIME=1."""
    return bool(getattr(rt, "faketime", False)) or os.environ.get(faketime.ENABLE_ENV) == "1"


def enabled(rt) -> bool:
    """Whether this cluster's services run with the preload (asked for here, or seen in a container's env)."""
    if getattr(rt, "faketime", False):
        return True
    for node in _services(rt):
        c = rt._containers().get(node)
        if c is not None:
            c.reload()
            env = c.attrs.get("Config", {}).get("Env") or []
            if any(e.startswith("FAKETIME_TIMESTAMP_FILE=") for e in env):
                rt.faketime = True
                return True
            return False
    return False


def compose_files(rt) -> list[str]:
    """The extra `-f` arguments of every compose call: the override when the cluster has the preload
    (written, with a "+0" control file for each service that has none), else none."""
    if not wanted(rt):
        return []
    folder = host_dir(rt.project)
    os.makedirs(folder, exist_ok=True)
    services = {}
    for node in _services(rt):
        if not os.path.exists(control_file(rt, node)):
            faketime._write(control_file(rt, node), "+0")
        services[node] = {"environment": service_env(node), "volumes": [f"{folder}:{CONTAINER_DIR}:ro"]}
    path = override_file(rt.project)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump({"services": services}, f, indent=1)      # JSON is YAML: compose reads it as an override
    os.replace(tmp, path)
    return ["-f", path]


def reset(rt) -> None:
    """Before `up`: every service's clock starts at the real time (a crashed run's offsets are dropped);
    asked for through $EOSLAB_FAKETIME=1, the image is checked first (DockerRuntimeError with one line)."""
    if wanted(rt):
        if not getattr(rt, "faketime", False):
            from cluster.docker_faults import DockerRuntimeError
            try:
                enable(rt)
            except faketime.FaketimeMissing as e:
                raise DockerRuntimeError(str(e)) from None
        shutil.rmtree(host_dir(rt.project), ignore_errors=True)
        compose_files(rt)


def forget(rt) -> None:
    """After `down`: the control files and the override are gone."""
    shutil.rmtree(host_dir(rt.project), ignore_errors=True)
    try:
        os.remove(override_file(rt.project))
    except FileNotFoundError:
        pass


def service_control_file(rt, node: str) -> str:
    """The control file of a preloaded service (RuntimeError for ZooKeeper, holders and sidecars)."""
    if node not in _services(rt):
        raise RuntimeError(f"{node} has no clock preload (only controllers, brokers and coordinators do)")
    return control_file(rt, node)
