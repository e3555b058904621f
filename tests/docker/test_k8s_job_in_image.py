"""The zombie-fencing Job's command, run in the image the Job uses: eoslab and the kubernetes client are there.

The container runs with `--network none` and no Kubernetes configuration, as
the Job's container would outside a cluster: the command must get as far as
the k8s runtime (the kubernetes client imports, the run directory is made
under the report volume's path) and fail there with one line. What it does
against a real API server needs a real cluster (docs/containers.md).
"""
from __future__ import annotations

import json
import subprocess

import pytest

from tests.docker.conftest import DOCKER
from tests.k8s.test_k8s_job_command import job_argv

pytestmark = [pytest.mark.docker, pytest.mark.timeout(600)]


def test_the_jobs_command_runs_in_the_image_and_fails_cleanly_without_a_cluster(docker_engine):
    command, args, env = job_argv()
    script = ('"$@"; rc=$?; echo "rc=$rc"; cat "$EOSLAB_REPORTS"/run-*/run.json')
    r = subprocess.run([DOCKER, "run", "--rm", "--network", "none", "-e", "EOSLAB_REPORTS=/tmp/reports",
                        "--entrypoint", "sh", docker_engine, "-c", f"mkdir -p /tmp/reports; {script}", "job",
                        *command, *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = r.stdout.split("rc=", 1)
    assert out[1].startswith("2\n"), r.stdout                    # the Job's exit status: eoslab's, 2
    assert r.stderr.strip().splitlines() == ["run failed: K8sRuntimeError: no Kubernetes configuration: "
                                             "Invalid kube-config file. No configuration found."], r.stderr
    meta = json.loads(out[1].split("\n", 1)[1])
    assert (meta["workload"], meta["runtime"], meta["seed"]) == ("zombie", "k8s", int(env["SEED"]))
