"""Every manifest in k8s/ validates offline and strictly (kubernetes-validate), and says what the design needs.

Strict validation refuses unknown fields, so a typo such as `imagePulPolicy`
fails here rather than being dropped silently by an API server. No cluster
is involved: nothing here can tell whether the pods would run (see
docs/containers.md for what needs a real cluster).
"""
from __future__ import annotations

import copy
import pathlib

import pytest

kv = pytest.importorskip("kubernetes_validate",
                         reason="kubernetes-validate is not installed (pip install kubernetes-validate)")
import yaml  # noqa: E402  (a dependency of kubernetes-validate)

pytestmark = pytest.mark.fast

K8S = pathlib.Path(__file__).resolve().parents[2] / "k8s"
VERSIONS = ["1.28.0", kv.latest_version()]
MANIFESTS = sorted(p for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")


def docs(path: pathlib.Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def all_docs() -> list[dict]:
    return [d for p in MANIFESTS for d in docs(p)]


def find(kind: str, name: str) -> dict:
    for d in all_docs():
        if d["kind"] == kind and d["metadata"]["name"] == name:
            return d
    raise AssertionError(f"no {kind} {name!r} in k8s/")


def containers(sts: dict) -> dict[str, dict]:
    return {c["name"]: c for c in sts["spec"]["template"]["spec"]["containers"]}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_manifest_is_valid_strictly(path, version):
    for d in docs(path):
        kv.validate(d, version, strict=True)


def test_strict_validation_catches_an_unknown_field():
    sts = copy.deepcopy(find("StatefulSet", "broker"))
    containers(sts)["broker"]["imagePulPolicy"] = "Never"          # typo
    with pytest.raises(kv.ValidationError):
        kv.validate(sts, VERSIONS[-1], strict=True)


def test_kustomization_lists_every_manifest():
    k = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert sorted(k["resources"]) == sorted(p.name for p in MANIFESTS)


def test_every_object_is_in_the_eoslab_namespace():
    for d in all_docs():
        if d["kind"] != "Namespace":
            assert d["metadata"].get("namespace") == "eoslab", f"{d['kind']} {d['metadata']['name']}"


@pytest.mark.parametrize("name", ["broker", "controller", "txn-coordinator"])
def test_services_run_with_a_net_admin_sidecar_sharing_the_process_namespace(name):
    sts = find("StatefulSet", name)
    spec = sts["spec"]["template"]["spec"]
    assert spec.get("shareProcessNamespace") is True
    side = containers(sts)["sidecar"]
    assert "NET_ADMIN" in side["securityContext"]["capabilities"]["add"]
    token = [e for e in side["env"] if e["name"] == "EOSLAB_SIDECAR_TOKEN"]
    assert token and token[0]["valueFrom"]["secretKeyRef"]["name"] == "eoslab-sidecar"
    assert "NET_ADMIN" not in str(containers(sts)[name].get("securityContext", {}))


def test_topology_matches_the_compose_cluster():
    assert find("StatefulSet", "zookeeper")["spec"]["replicas"] == 1
    assert find("StatefulSet", "controller")["spec"]["replicas"] == 2
    assert find("StatefulSet", "broker")["spec"]["replicas"] == 3
    assert find("StatefulSet", "txn-coordinator")["spec"]["replicas"] == 2
    assert find("StatefulSet", "broker")["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "data"


def test_producer_transactional_id_comes_from_the_pod_ordinal():
    sts = find("StatefulSet", "producer")
    c = containers(sts)["producer"]
    assert {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}} in c["env"]
    # `$$` is kubelet's escape for `$`: the shell sees ${POD_NAME##*-}, the ordinal.
    assert "transactional.id=txn-$${POD_NAME##*-}" in " ".join(c["args"])


def test_zombie_fencing_job_keeps_its_report():
    job = find("Job", "zombie-fencing")
    assert "ttlSecondsAfterFinished" not in job["spec"]            # the finished Job (and its log) stays
    pod = job["spec"]["template"]["spec"]
    vols = {v["name"]: v for v in pod["volumes"]}
    assert vols["reports"]["persistentVolumeClaim"]["claimName"] == "zombie-fencing-reports"
    find("PersistentVolumeClaim", "zombie-fencing-reports")
    mounts = pod["containers"][0]["volumeMounts"]
    assert {"name": "reports", "mountPath": "/reports"} in mounts
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["EOSLAB_REPORTS"] == "/reports"                     # the run's --out is under it
    assert '--out "$$out"' in pod["containers"][0]["command"][2]
    role = find("Role", "zombie-fencing")
    verbs = {(r["resources"][0], v) for r in role["rules"] for v in r["verbs"]}
    assert ("pods", "delete") in verbs and ("pods/exec", "create") in verbs


@pytest.mark.parametrize("name", ["broker", "controller", "txn-coordinator"])
def test_services_read_the_cluster_secret_from_its_secret(name):
    env = containers(find("StatefulSet", name))[name]["env"]
    secret = [e for e in env if e["name"] == "EOSLAB_CLUSTER_SECRET"]
    assert secret and secret[0]["valueFrom"]["secretKeyRef"] == {"name": "eoslab-cluster", "key": "secret"}
