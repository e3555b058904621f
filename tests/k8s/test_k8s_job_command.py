"""The zombie-fencing Job's command is a real `eoslab run`, and `--runtime k8s` fails cleanly without an API server.

No Kubernetes API server can run on this machine and none is faked here. What
can be checked offline is checked against eoslab's own code: the Job's
command, expanded as kubelet expands it, parses with eoslab's argparse and
names a workload, a runtime and fault packages that exist (renaming any of
them breaks this test); the Job's shell wrapper, run as it is with the real
`eoslab`, writes the run's directory under the report volume's path; and
without a configuration or with an API server that does not answer,
`eoslab run --runtime k8s` fails with one line and exit 2, no traceback.
The one address contacted is a port this test binds on 127.0.0.1 and never
listens on (connection refused).
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import socket
import subprocess
import sys

import pytest

yaml = pytest.importorskip("yaml")
pytest.importorskip("kubernetes", reason="the kubernetes client is not installed (pip install -e '.[k8s]')")

pytestmark = pytest.mark.fast

ROOT = pathlib.Path(__file__).resolve().parents[2]
JOB_FILE = ROOT / "k8s" / "zombie-fencing-job.yaml"
BIN = os.path.dirname(sys.executable)


def job_container() -> dict:
    for d in yaml.safe_load_all(JOB_FILE.read_text()):
        if d and d["kind"] == "Job" and d["metadata"]["name"] == "zombie-fencing":
            return d["spec"]["template"]["spec"]["containers"][0]
    raise AssertionError("no Job zombie-fencing in k8s/zombie-fencing-job.yaml")


def kubelet_expand(s: str, env: dict[str, str]) -> str:
    """Kubernetes' expansion of command and args: $(VAR) from the container's env, $$ -> $, else unchanged."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), s)


def job_argv() -> tuple[list[str], list[str], dict[str, str]]:
    """(command, args, literal env) of the Job's container, expanded as kubelet would."""
    c = job_container()
    env = {e["name"]: e["value"] for e in c.get("env", []) if "value" in e}
    return [kubelet_expand(x, env) for x in c["command"]], [kubelet_expand(x, env) for x in c["args"]], env


def clean_env(tmp_path, **extra) -> dict[str, str]:
    """No Kubernetes configuration at all: no in-cluster variables, no kubeconfig."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_") and k != "KUBECONFIG"}
    env.update(HOME=str(tmp_path), KUBECONFIG=str(tmp_path / "no-kubeconfig"), PATH=f"{BIN}:{os.environ['PATH']}")
    env.pop("EOSLAB_DEBUG", None)
    env.update(extra)
    return env


def test_the_jobs_command_parses_with_eoslabs_parser_and_names_what_exists(tmp_path):
    from cluster.cli import cmd_run
    from cluster.nemesis import PACKAGES
    from cluster.run import RunConfig, runtime_kinds
    from cluster.workloads import WORKLOADS, workload_class
    from cluster.workloads.zombie import ZombieWorkload
    from eoslab.cli import build_parser
    command, args, _ = job_argv()
    assert command[:2] == ["sh", "-c"] and 'eoslab "$@" --out "$out"' in command[2]
    ns = build_parser().parse_args([*args, "--out", str(tmp_path / "run")])
    assert ns.command == "run" and ns.func is cmd_run
    assert ns.runtime == "k8s" and ns.runtime in runtime_kinds()
    assert ns.workload in WORKLOADS and workload_class(ns.workload) is ZombieWorkload     # the zombie experiment
    nemesis = [n for n in ns.nemesis.split(",") if n]
    assert nemesis and all(n in PACKAGES for n in nemesis), nemesis
    assert ns.cluster == "eoslab" and ns.seed == 1                  # the namespace of k8s/; $(SEED) expanded
    settings = dict(s.split("=", 1) for s in ns.set)
    RunConfig(workload=ns.workload, nemesis=nemesis, time_limit=ns.time_limit, seed=ns.seed, out=ns.out,
              runtime=ns.runtime, cluster=ns.cluster, settings=settings).validate()


def test_the_k8s_runtime_kind_opens_a_k8s_runtime(tmp_path, monkeypatch):
    from cluster.k8s_runtime import K8sRuntimeError
    from cluster.runtimes import RuntimeChoiceError, open_runtime
    for k, v in clean_env(tmp_path).items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(K8sRuntimeError, match="no Kubernetes configuration"):
        open_runtime("k8s", "eoslab")
    with pytest.raises(RuntimeChoiceError, match="unknown runtime 'kube'"):
        open_runtime("kube", "eoslab")


def test_the_jobs_shell_runs_eoslab_and_keeps_the_run_under_the_report_volume(tmp_path):
    command, args, env = job_argv()
    reports = tmp_path / "reports"
    reports.mkdir()
    r = subprocess.run([*command, *args], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                       env=clean_env(tmp_path, EOSLAB_REPORTS=str(reports)))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.splitlines() == ["run failed: K8sRuntimeError: no Kubernetes configuration: "
                                     "Invalid kube-config file. No configuration found."], r.stderr
    runs = list(reports.glob("run-*"))
    assert len(runs) == 1, runs
    meta = json.loads((runs[0] / "run.json").read_text())
    assert (meta["workload"], meta["runtime"], meta["seed"]) == ("zombie", "k8s", int(env["SEED"]))
    assert meta["error"].startswith("K8sRuntimeError: no Kubernetes configuration")


def _run_k8s(tmp_path, *extra: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([os.path.join(BIN, "eoslab"), "run", "--runtime", "k8s", "--workload", "zombie",
                           "--out", str(tmp_path / "out"), *extra], capture_output=True, text=True, timeout=120,
                          env=clean_env(tmp_path, **env))


def _one_line(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    return lines[0]


def test_without_a_kubeconfig_it_fails_with_one_line(tmp_path):
    assert "no Kubernetes configuration" in _one_line(_run_k8s(tmp_path, "--cluster", "eoslab"))


def test_in_a_pod_without_a_service_account_token_it_fails_with_one_line(tmp_path):
    line = _one_line(_run_k8s(tmp_path, "--cluster", "eoslab", KUBERNETES_SERVICE_HOST="127.0.0.1",
                              KUBERNETES_SERVICE_PORT="1"))
    assert "no Kubernetes configuration: Service token file does not exist" in line


def test_with_an_api_server_that_does_not_answer_it_fails_with_one_line(tmp_path):
    with socket.socket() as s:                      # bound, never listening: connections are refused
        s.bind(("127.0.0.1", 0))
        server = f"https://127.0.0.1:{s.getsockname()[1]}"
        (tmp_path / "kubeconfig").write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "lab",
            "clusters": [{"name": "lab", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
            "users": [{"name": "lab", "user": {"token": "not-a-token"}}],
            "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "lab"}}]}))
        line = _one_line(_run_k8s(tmp_path, "--cluster", "eoslab", KUBECONFIG=str(tmp_path / "kubeconfig")))
    assert line == (f"run failed: K8sRuntimeError: no Kubernetes API server answers at {server} "
                    f"({tmp_path / 'kubeconfig'}): connection refused")


def test_without_a_namespace_it_says_to_name_one(tmp_path):
    line = _one_line(_run_k8s(tmp_path))
    assert line.startswith("eoslab: the k8s runtime runs on a cluster deployed with `kubectl apply -k k8s/`")
    assert not (tmp_path / "out").exists()                           # refused before anything started


def test_the_jobs_role_allows_what_the_k8s_runtime_does():
    role = next(d for d in yaml.safe_load_all(JOB_FILE.read_text()) if d and d["kind"] == "Role")
    allowed = {(g, res, v) for r in role["rules"] for g in r["apiGroups"] for res in r["resources"] for v in r["verbs"]}
    needed = {("", "pods", "list"), ("", "pods", "get"), ("", "pods", "delete"),    # info, start, kill
              ("", "pods/exec", "create"), ("", "pods/exec", "get"),               # sidecar ctl, pause
              ("", "pods/log", "get"), ("apps", "statefulsets", "list")}           # logs, wait_ready
    assert needed <= allowed, needed - allowed
