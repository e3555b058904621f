"""The app harness's Kubernetes template (k8s/apps/), checked offline against eoslab's own code.

No Kubernetes API server can run on this machine and none is faked. What is
checked: every object validates strictly (kubernetes-validate, unknown fields
refused) for the oldest and newest schema the lab supports; the application's
StatefulSet gives each pod exactly the harness's environment
(cluster/apps/contract.ENV_VARS: renaming a variable there fails here), with a
transactional.id that is contract.transactional_id(group, ordinal) for every
ordinal as kubelet expands it; the Kafka-listener patches apply to k8s/'s
broker and transaction-coordinator StatefulSets as they are now (a changed
base command fails here) and their commands parse with the services' own
flag parsers; the Job's command, expanded as kubelet expands it, parses with
eoslab's argparse parser as an `eoslab app run` on that StatefulSet's pods and
topics with fault packages that exist, and running it today is refused with
one line and exit 2, nothing started (the harness does not drive pods yet);
the RBAC is what the Job would do and no more; and `kubectl kustomize
k8s/apps/` (a local build, no server) yields the same objects. What needs a
real cluster: that the pods start, that the listeners answer, the experiment
itself.
"""
from __future__ import annotations

import copy
import json
import pathlib
import re
import shutil
import subprocess

import pytest

kv = pytest.importorskip("kubernetes_validate",
                         reason="kubernetes-validate is not installed (pip install kubernetes-validate)")
import yaml  # noqa: E402  (a dependency of kubernetes-validate)

pytestmark = pytest.mark.fast

K8S = pathlib.Path(__file__).resolve().parents[2] / "k8s"
APPS = K8S / "apps"
VERSIONS = ["1.28.0", kv.latest_version()]
MANIFESTS = sorted(p for p in APPS.glob("*.yaml") if p.name != "kustomization.yaml")
PATCHES = {"broker": (K8S / "brokers.yaml", APPS / "broker-kafka-listener.json"),
           "txn-coordinator": (K8S / "txn-coordinators.yaml", APPS / "txn-coordinator-kafka-listener.json")}


def docs(path: pathlib.Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def find(kind: str, name: str, paths=None) -> dict:
    for p in paths or MANIFESTS:
        for d in docs(p):
            if d["kind"] == kind and d["metadata"]["name"] == name:
                return d
    raise AssertionError(f"no {kind} {name!r}")


def app_container() -> dict:
    return find("StatefulSet", "app")["spec"]["template"]["spec"]["containers"][0]


def kubelet_expand(s: str, env: dict[str, str]) -> str:
    """Kubernetes' expansion of command, args and env values: $(VAR) from the env, $$ -> $, else unchanged."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), s)


def pod_env(ordinal: int) -> dict[str, str]:
    """The app container's environment in pod app-<ordinal>, resolved as kubelet resolves it, in order."""
    env: dict[str, str] = {}
    for e in app_container()["env"]:
        if "value" in e:
            env[e["name"]] = kubelet_expand(e["value"], env)
        else:
            assert e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.labels['apps.kubernetes.io/pod-index']"
            env[e["name"]] = str(ordinal)           # the StatefulSet controller's pod-index label
    return env


def patched(role: str) -> dict:
    """k8s/'s StatefulSet of the role with k8s/apps/'s JSON patch applied (test and replace, as kubectl does)."""
    base_file, patch_file = PATCHES[role]
    sts = copy.deepcopy(find("StatefulSet", role, [base_file]))
    for op in json.loads(patch_file.read_text()):
        *parents, last = [int(x) if x.isdigit() else x for x in op["path"].strip("/").split("/")]
        node = sts
        for key in parents:
            node = node[key]
        if op["op"] == "test":
            assert node[last] == op["value"], f"{patch_file.name}: {op['path']} of {base_file.name} changed"
        else:
            assert op["op"] == "replace", op
            node[last] = op["value"]
    return sts


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_app_manifest_is_valid_strictly(path, version):
    for d in docs(path):
        kv.validate(d, version, strict=True)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("role", sorted(PATCHES))
def test_the_kafka_listener_patch_applies_to_the_base_and_stays_valid(role, version):
    kv.validate(patched(role), version, strict=True)


@pytest.mark.parametrize("role", sorted(PATCHES))
def test_the_patched_service_command_parses_and_adds_only_the_kafka_listener(role):
    from services.broker.config import BrokerConfig
    from services.txn_coordinator.config import CoordinatorConfig
    base = find("StatefulSet", role, [PATCHES[role][0]])["spec"]["template"]["spec"]["containers"][0]["args"][0]
    line = patched(role)["spec"]["template"]["spec"]["containers"][0]["args"][0]
    svc = "broker" if role == "broker" else "txn-coordinator"
    assert line == base + (f" --kafka-listen 0.0.0.0:9192 "
                           f"--kafka-advertise ${{POD_NAME}}.{svc}.eoslab.svc.cluster.local:9192")
    # the shell of the pod expands it (pod ordinal 1); what follows `eoslab-entrypoint ROLE` is the service's
    words = subprocess.run(["sh", "-c", 'set -- ' + kubelet_expand(line, {})[len("exec "):] + '; printf "%s\\0" "$@"'],
                           env={"POD_NAME": f"{role}-1", "PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                           check=True).stdout.split("\0")[:-1]
    assert words[:2] == ["eoslab-entrypoint", role]
    cfg = (BrokerConfig if role == "broker" else CoordinatorConfig).parse(words[2:], env={})
    assert cfg.kafka_listen == "0.0.0.0:9192"
    assert cfg.kafka_advertise == f"{role}-1.{svc}.eoslab.svc.cluster.local:9192"


def test_every_pod_gets_exactly_the_harness_environment():
    from cluster.apps.contract import ENV_VARS, environment
    names = [e["name"] for e in app_container()["env"]]
    assert sorted(names) == sorted(ENV_VARS) and len(names) == len(set(names))
    sts = find("StatefulSet", "app")
    replicas = sts["spec"]["replicas"]
    for ordinal in range(replicas):
        env = pod_env(ordinal)
        expected = environment(bootstrap=env["EOSLAB_BOOTSTRAP"], input_topic=env["EOSLAB_INPUT_TOPIC"],
                               output_topic=env["EOSLAB_OUTPUT_TOPIC"], group=env["EOSLAB_GROUP_ID"],
                               instance=ordinal, instances=replicas, run_id=env["EOSLAB_RUN_ID"])
        assert env == expected                       # the transactional.id is contract.transactional_id's
    assert pod_env(0)["EOSLAB_TRANSACTIONAL_ID"] != pod_env(1)["EOSLAB_TRANSACTIONAL_ID"]
    hosts = pod_env(0)["EOSLAB_BOOTSTRAP"].split(",")
    assert hosts == [f"broker-{i}.broker.eoslab.svc.cluster.local:9192" for i in range(3)]   # the patched listeners


def job_args() -> list[str]:
    c = find("Job", "app-experiment")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in c["env"] if "value" in e}
    assert c["command"][:2] == ["sh", "-c"] and 'eoslab "$$@" --out "$$out"' in c["command"][2]
    return [kubelet_expand(a, env) for a in c["args"]]


def test_the_jobs_command_is_an_app_run_on_the_statefulsets_pods(tmp_path):
    from cluster.apps.cli import cmd_app_run
    from cluster.apps.faults import ALL_PACKAGES
    from eoslab.cli import build_parser
    ns = build_parser().parse_args([*job_args(), "--out", str(tmp_path / "run")])
    assert (ns.command, ns.app_command, ns.func) == ("app", "run", cmd_app_run)
    assert ns.runtime == "k8s" and ns.cluster == "eoslab" and ns.seed == 1        # $(SEED) expanded
    sts = find("StatefulSet", "app")
    env = pod_env(0)
    assert ns.statefulset == sts["metadata"]["name"] and ns.instances == sts["spec"]["replicas"]
    assert (ns.input, ns.output) == (env["EOSLAB_INPUT_TOPIC"], env["EOSLAB_OUTPUT_TOPIC"])
    nemesis = ns.nemesis.split(",")
    assert nemesis and all(n in ALL_PACKAGES for n in nemesis), nemesis
    assert "zombie-app" not in nemesis         # a StatefulSet never runs two pods of one ordinal


def test_running_the_jobs_command_today_is_refused_in_one_line(tmp_path, capsys):
    from cluster.apps.config import K8S_REFUSED
    from eoslab.cli import main
    assert main([*job_args(), "--out", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err.strip() == f"eoslab: {K8S_REFUSED}"
    assert not (tmp_path / "run").exists()


def test_the_job_may_touch_pods_and_read_statefulsets_in_its_namespace_only():
    role = find("Role", "app-experiment")
    assert role["metadata"]["namespace"] == "eoslab"
    rules = {(g, r): set(rule["verbs"]) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert rules == {("", "pods"): {"get", "list", "watch", "delete"}, ("", "pods/exec"): {"create", "get"},
                     ("", "pods/log"): {"get"}, ("apps", "statefulsets"): {"get", "list"}}
    binding = find("RoleBinding", "app-experiment")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "app-experiment", "namespace": "eoslab"}]
    pod = find("Job", "app-experiment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "app-experiment"
    assert {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]} == \
        {"reports": "app-experiment-reports"}
    find("PersistentVolumeClaim", "app-experiment-reports")


def test_every_object_is_eoslabs_and_in_its_namespace():
    for p in MANIFESTS:
        for d in docs(p):
            assert d["metadata"]["namespace"] == "eoslab", f"{d['kind']} {d['metadata']['name']}"
            if d["kind"] in ("StatefulSet", "Job", "Service"):
                assert d["metadata"]["labels"]["app.kubernetes.io/part-of"] == "eoslab"
            if d["kind"] in ("StatefulSet", "Job"):
                assert d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/part-of"] == "eoslab"


def test_the_kustomization_lists_every_manifest_and_builds_offline():
    k = yaml.safe_load((APPS / "kustomization.yaml").read_text())
    assert sorted(k["resources"]) == sorted(p.name for p in MANIFESTS)
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: the kustomize build is not checked (the files are, above)")
    r = subprocess.run([kubectl, "kustomize", str(APPS)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    built = sorted((d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(r.stdout) if d)
    assert built == sorted((d["kind"], d["metadata"]["name"]) for p in MANIFESTS for d in docs(p))
