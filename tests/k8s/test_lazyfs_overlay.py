"""The opt-in lazyfs overlay (k8s/lazyfs/): the broker StatefulSet with its data on a lazy filesystem.

The overlay's patch is applied here as kustomize's strategic merge does
(containers and volumes by name, volume mounts by mount path) and the result
validated strictly, offline (kubernetes-validate); where kubectl is installed,
its own `kubectl kustomize` (no API server involved) must build the same
StatefulSet. What it checks is the
wiring the disk faults need: a privileged native sidecar mounts the lazy
filesystem, with Bidirectional propagation, over the volume the broker
container mounts at its --data-dir (HostToContainer), on the broker's
PersistentVolume as backing, with /dev/fuse, and the broker starts only once
its startupProbe sees that mount. No API server runs here: whether a kubelet
runs the pod is not tested (docs/lazyfs.md).
"""
from __future__ import annotations

import copy
import pathlib
import re
import shutil
import subprocess

import pytest

from tests.k8s.test_manifests import K8S, containers, find, kv

import yaml  # noqa: E402  (a dependency of kubernetes-validate)

pytestmark = pytest.mark.fast

OVERLAY = K8S / "lazyfs"
MERGE_KEYS = {"containers": "name", "initContainers": "name", "volumes": "name", "volumeMounts": "mountPath"}


def _merge(base, patch, key: str | None = None):
    """Kubernetes' strategic merge for the lists this patch touches; other values are replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = _merge(base[k], v, k) if k in base else copy.deepcopy(v)
        return out
    if isinstance(base, list) and key in MERGE_KEYS:
        by = MERGE_KEYS[key]
        out = [copy.deepcopy(b) for b in base]
        for item in patch:
            at = next((i for i, b in enumerate(out) if b[by] == item[by]), None)
            if at is None:
                out.append(copy.deepcopy(item))
            else:
                out[at] = _merge(out[at], item)
        return out
    return copy.deepcopy(patch)


def _patched() -> dict:
    k = yaml.safe_load((OVERLAY / "kustomization.yaml").read_text())
    base = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert k["resources"] == [f"../{r}" for r in base["resources"]], "the whole deployment, plus its patch"
    [patch] = [yaml.safe_load((OVERLAY / p["path"]).read_text()) for p in k["patches"]]
    assert (patch["kind"], patch["metadata"]["name"]) == ("StatefulSet", "broker")
    return _merge(find("StatefulSet", "broker"), patch)


def _mounts(c: dict) -> dict[str, dict]:
    return {m["name"]: m for m in c.get("volumeMounts", [])}


def test_the_patched_broker_statefulset_is_valid_strictly():
    kv.validate(_patched(), kv.latest_version(), strict=True)


def test_a_privileged_native_sidecar_mounts_the_lazy_filesystem_over_the_brokers_data_dir():
    sts = _patched()
    spec = sts["spec"]["template"]["spec"]
    [lazy] = [c for c in spec["initContainers"] if c["name"] == "lazyfs"]
    assert lazy["restartPolicy"] == "Always", "a native sidecar: started before the broker, kept running"
    assert lazy["securityContext"]["privileged"] is True
    cmd = lazy["command"]
    assert cmd[:4] == ["python", "-m", "cluster.lazyfs", "mount"]
    backing, mountpoint = cmd[4], cmd[5]
    mounts = _mounts(lazy)
    assert mounts["lazyfs"]["mountPath"] == mountpoint and mounts["lazyfs"]["mountPropagation"] == "Bidirectional"
    assert mounts["data"]["mountPath"] == backing, "the backing directory is the broker's PersistentVolume"
    assert mounts["dev-fuse"]["mountPath"] == "/dev/fuse"
    assert mountpoint in " ".join(lazy["startupProbe"]["exec"]["command"]), "the broker waits for the mount"

    broker = containers(sts)["broker"]
    data_dir = re.search(r"--data-dir (\S+)", " ".join(broker["args"])).group(1)    # the generated args
    assert _mounts(broker)["lazyfs"] == {"name": "lazyfs", "mountPath": data_dir,
                                         "mountPropagation": "HostToContainer"}
    assert "data" not in _mounts(broker), "the broker writes through the lazy filesystem only"
    control = cmd[cmd.index("--control") + 1]
    assert pathlib.PurePosixPath(control).parent.as_posix() == mounts["lazyfs-control"]["mountPath"]
    assert _mounts(containers(sts)["sidecar"])["lazyfs-control"]["mountPath"] == mounts["lazyfs-control"]["mountPath"]
    vols = {v["name"]: v for v in spec["volumes"]}
    assert vols["dev-fuse"]["hostPath"] == {"path": "/dev/fuse", "type": "CharDevice"}
    assert "emptyDir" in vols["lazyfs"] and "emptyDir" in vols["lazyfs-control"]


def test_the_base_deployment_is_untouched_without_the_overlay():
    broker = containers(find("StatefulSet", "broker"))["broker"]
    assert _mounts(broker)["data"]["mountPath"] == "/var/lib/eoslab"
    assert "initContainers" not in find("StatefulSet", "broker")["spec"]["template"]["spec"]


def test_kubectl_kustomize_builds_the_same_broker_statefulset():
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    r = subprocess.run([kubectl, "kustomize", "--load-restrictor", "LoadRestrictionsNone", str(OVERLAY)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    built = [d for d in yaml.safe_load_all(r.stdout) if d]
    [sts] = [d for d in built if d["kind"] == "StatefulSet" and d["metadata"]["name"] == "broker"]
    assert sts == _patched()
    assert len(built) == sum(1 for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml"
                             for d in yaml.safe_load_all(p.read_text()) if d)
