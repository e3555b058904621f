"""`eoslab app run --runtime docker`: the user's copier as containers on a compose cluster's network.

The instances run from an image made for this module: this session's eoslab image plus the host venv's
confluent-kafka (the lab's image has no Kafka client library; copying the installed package keeps the
build offline). The run reuses the module's compose cluster (`--cluster`), so it starts no second one.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from tests.docker.conftest import DOCKER, ROOT, eoslab

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1200)]
APP_IMAGE = f"eoslab/app-test:{os.getpid()}"


@pytest.fixture(scope="module")
def app_image(docker_engine):
    """This session's eoslab image with confluent-kafka (from the host venv) in its Python."""
    try:
        import confluent_kafka
    except ImportError:
        pytest.skip("confluent-kafka is not installed in this venv (pip install -e '.[clients]')")
    site = os.path.dirname(os.path.dirname(confluent_kafka.__file__))
    ctx = tempfile.mkdtemp(prefix="eoslab-app-image-")
    try:
        for name in os.listdir(site):
            if name.startswith("confluent_kafka"):
                shutil.copytree(os.path.join(site, name), os.path.join(ctx, "pkgs", name))
        with open(os.path.join(ctx, "Dockerfile"), "w") as f:
            f.write(f"FROM {docker_engine}\n"
                    "COPY pkgs/ /opt/eoslab/lib/python3.11/site-packages/\n"
                    "RUN python -c 'import confluent_kafka'\n")
        r = subprocess.run([DOCKER, "build", "-q", "-t", APP_IMAGE, ctx], capture_output=True, text=True,
                           timeout=600, env=dict(os.environ, DOCKER_BUILDKIT="0"))
        assert r.returncode == 0, r.stderr[-2000:]
    finally:
        shutil.rmtree(ctx, ignore_errors=True)
    yield APP_IMAGE
    subprocess.run([DOCKER, "rmi", APP_IMAGE], capture_output=True, timeout=120)


def app_containers() -> list[str]:
    r = subprocess.run([DOCKER, "ps", "-a", "--filter", "name=eoslab-app-", "--format", "{{.Names}}"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def app_run(cluster, image: str, out, cmd: str, *args: str) -> subprocess.CompletedProcess:
    name = cluster.project[len("eoslab-"):]         # the cluster name whose project this is
    return eoslab("app", "run", "--runtime", "docker", "--cluster", name, "--image", image, "--cwd", ROOT,
                  "--cmd", cmd, "--out", str(out), *args, timeout=900)


def test_a_correct_copier_in_containers_is_valid_under_app_faults(docker_cluster, app_image, tmp_path):
    out = tmp_path / "run"
    r = app_run(docker_cluster, app_image, out, "python examples/apps/confluent_copier.py", "--instances", "2",
                "--records", "1500", "--time-limit", "40", "--seed", "3", "--fault-duration", "4:8",
                "--nemesis", "kill-app,pause-app,zombie-app,partition-app")
    results = json.loads((out / "results.json").read_text())
    assert (r.returncode, results["verdict"]) == (0, "valid"), (results.get("anomalies") or results.get("lab_errors"),
                                                                 r.stderr[-3000:])
    assert results["stats"]["input_acknowledged"] == 1500
    hist = [json.loads(line) for line in open(out / "history.jsonl")]
    hit = {o["f"] for o in hist if o["process"] == "nemesis" and o["f"].startswith("start-")}
    assert len(hit & {"start-kill-app", "start-pause-app", "start-zombie-app", "start-partition-app"}) >= 2, hit
    starts = [o["value"] for o in hist if o["process"] == "app" and o["f"] == "app-start"]
    assert len(starts) >= 2 and all(s["container"].startswith("eoslab-app-") for s in starts)
    assert len([o for o in hist if o["process"] == "app" and o["f"] == "app-exit"]) == len(starts)
    logs = os.listdir(out / "instances")
    assert "0.0.log" in logs and "confluent-copier[0] started" in (out / "instances" / "0.0.log").read_text()
    assert app_containers() == []                    # nothing outlives the run


def test_a_command_that_exits_at_once_in_a_container_gets_exit_2(docker_cluster, app_image, tmp_path):
    out = tmp_path / "run"
    r = app_run(docker_cluster, app_image, out, "echo cannot start >&2; exit 3", "--instances", "2",
                "--records", "100", "--time-limit", "120")
    assert r.returncode == 2, r.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert results["verdict"] == "app-error"
    assert "exited with code 3 at start" in results["app_errors"][0] and "cannot start" in results["app_errors"][0]
    hist = [json.loads(line) for line in open(out / "history.jsonl")]
    assert [o["value"]["by"] for o in hist if o["f"] == "app-exit"] == ["self", "self"]
    assert app_containers() == []


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-n", "0", "-m", "docker"]))
