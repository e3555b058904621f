"""The broker pod's lazyfs sidecar (k8s/lazyfs) in the real image: its own command and startup probe,
read from the manifest, run in an eoslab container as the kubelet would start them.

No Kubernetes API server can run here, so the pod is not scheduled; what the sidecar needs from the
image is checked on Docker instead: the container (with /dev/fuse and CAP_SYS_ADMIN, unconfined, its
three emptyDir volumes as tmpfs) mounts the lazy filesystem with the manifest's command, the manifest's startup
probe passes once the mount is there, and a fault sent to the control socket the fault sidecar uses
drops what was written since the last fsync and keeps what was synced.
"""
from __future__ import annotations

import os
import subprocess
import uuid

import pytest
import yaml

from cluster.lazyfs import LazyFs
from tests.docker.conftest import DOCKER, ROOT
from tests.helpers import wait_for

pytestmark = [pytest.mark.docker, pytest.mark.timeout(600)]
MANIFEST = os.path.join(ROOT, "k8s", "lazyfs", "broker-lazyfs.yaml")


def _sidecar() -> dict:
    with open(MANIFEST) as f:
        doc = next(d for d in yaml.safe_load_all(f) if d and d.get("kind") == "StatefulSet")
    return next(c for c in doc["spec"]["template"]["spec"]["initContainers"] if c["name"] == "lazyfs")


def _exec(name: str, *cmd: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([DOCKER, "exec", name, *cmd], capture_output=True, text=True, timeout=timeout)


def test_the_manifests_lazyfs_sidecar_mounts_in_the_image_and_takes_faults(docker_engine):
    reason = LazyFs.available()
    if reason:
        pytest.skip(reason)
    side = _sidecar()
    cmd, probe = side["command"], side["startupProbe"]["exec"]["command"]
    backing, mountpoint = cmd[cmd.index("mount") + 1], cmd[cmd.index("mount") + 2]
    control = cmd[cmd.index("--control") + 1]
    assert side["securityContext"]["privileged"] is True
    name = f"eoslab-lazyfs-sidecar-{uuid.uuid4().hex[:8]}"
    # the manifest asks for privileged (Kubernetes wants it for Bidirectional propagation); this engine, itself
    # in a container without every capability, cannot grant that, so the container gets what FUSE needs
    run = subprocess.run([DOCKER, "run", "-d", "--name", name, "--cap-add", "SYS_ADMIN", "--device", "/dev/fuse",
                          "--security-opt", "apparmor=unconfined",
                          "--tmpfs", backing, "--tmpfs", mountpoint, "--tmpfs", os.path.dirname(control),
                          "--entrypoint", cmd[0], docker_engine, *cmd[1:]],
                         capture_output=True, text=True, timeout=120)
    try:                                 # a container that could not start is removed too
        assert run.returncode == 0, run.stderr
        def probed() -> bool:
            state = subprocess.run([DOCKER, "inspect", "-f", "{{.State.Running}}", name], capture_output=True,
                                   text=True, timeout=30).stdout.strip()
            assert state == "true", subprocess.run([DOCKER, "logs", name], capture_output=True, text=True).stderr
            return _exec(name, *probe).returncode == 0
        wait_for(probed, 60, "the manifest's startup probe to find the mount")
        write = ("import os\n"
                 f"fd = os.open('{mountpoint}/00000000000000000000.log', os.O_CREAT | os.O_WRONLY)\n"
                 "os.write(fd, b'synced|'); os.fsync(fd); os.write(fd, b'unsynced'); os.close(fd)\n")
        assert _exec(name, "python", "-c", write).returncode == 0
        seen = _exec(name, "cat", f"{mountpoint}/00000000000000000000.log").stdout
        assert seen == "synced|unsynced"
        fault = _exec(name, "python", "-m", "cluster.lazyfs", "ctl", control, "lose-unsynced")
        assert fault.returncode == 0, fault.stderr
        assert _exec(name, "cat", f"{mountpoint}/00000000000000000000.log").stdout == "synced|"
        assert _exec(name, "cat", f"{backing}/00000000000000000000.log").stdout == "synced|", \
            "the backing directory (the broker's PersistentVolume) holds what was synced"
    finally:
        subprocess.run([DOCKER, "rm", "-f", name], capture_output=True, timeout=120)
