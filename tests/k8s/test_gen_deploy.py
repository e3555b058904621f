"""docker-compose.yml's and k8s/'s service settings are generated from the typed configs, and kept so.

tools/gen_deploy.py --check fails when a generated block is stale; a stale
block is rewritten while the hand-written rest stays byte for byte; the
values follow the configs (a changed default changes the files); a spec
naming a setting the config lacks, a value out of range or a required
setting left out is refused in one line naming the file and the container;
and every service container of both deploy files is one the spec generates.
"""
from __future__ import annotations

import dataclasses
import pathlib
import shutil
import subprocess
import sys

import pytest

yaml = pytest.importorskip("yaml")

from cluster import deploy_settings as ds  # noqa: E402
from cluster.service_args import config_def  # noqa: E402
from eoslab.common.config import ConfigDef  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tools"))
import gen_deploy  # noqa: E402

pytestmark = pytest.mark.fast

ROOT = pathlib.Path(__file__).resolve().parents[2]
FILES = sorted({c.file for c in ds.SPEC})


def copy_files(tmp_path) -> pathlib.Path:
    for f in FILES:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / f, tmp_path / f)
    return tmp_path


def test_the_deploy_files_are_not_stale():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_deploy.py"), "--check"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr


def test_a_stale_block_is_found_and_only_it_is_rewritten(tmp_path):
    root = copy_files(tmp_path)
    compose = root / "docker-compose.yml"
    original = compose.read_text()
    hand = original.replace("stop_grace_period: 1s", "stop_grace_period: 2s  # a hand edit")
    assert hand != original
    compose.write_text(hand.replace('--broker-id, "2"', '--broker-id, "7"', 1))
    assert gen_deploy.stale(str(root)) == ["docker-compose.yml"]
    assert gen_deploy.write(str(root)) == ["docker-compose.yml"]
    assert compose.read_text() == hand                    # the block is back, the hand edit kept
    assert gen_deploy.stale(str(root)) == [] and gen_deploy.write(str(root)) == []


def test_a_stale_k8s_args_block_fails_the_check(tmp_path):
    root = copy_files(tmp_path)
    path = root / "k8s" / "txn-coordinators.yaml"
    path.write_text(path.read_text().replace("--enable-fault-injection", "", 1))
    assert gen_deploy.stale(str(root)) == ["k8s/txn-coordinators.yaml"]


def with_key(role: str, setting: str, **changes) -> ConfigDef:
    """The role's ConfigDef with `setting` changed (renamed, another default ...)."""
    d = config_def(role)
    return ConfigDef(d.role, [dataclasses.replace(k, **changes) if k.name == setting else k for k in d.keys])


def test_the_values_follow_the_config():
    defs = {"controller": with_key("controller", "zk.session.timeout.ms", default=5000)}
    out = {r.block: r for r in ds.render(defs=lambda role: defs.get(role) or config_def(role))}
    assert "${EOSLAB_ZK_SESSION_TIMEOUT_MS:-5000}" in out["controller-1"].words
    assert "${EOSLAB_ZK_SESSION_TIMEOUT_MS:-2000}" in out["broker-1"].words       # the broker's own default
    assert ["--data-dir", ds.DATA_DIR] in out["broker"].flags                       # k8s
    assert out["broker-env"].env == [("EOSLAB_KAFKA_VERSION", "${EOSLAB_KAFKA_VERSION:-4.0}")]


def test_a_renamed_setting_fails_generation_in_one_line():
    renamed = with_key("broker", "data.dir", name="log.dirs")
    with pytest.raises(ds.SpecError) as e:
        ds.render(defs=lambda role: renamed if role == "broker" else config_def(role))
    assert str(e.value) == ("docker-compose.yml broker-1 (services/broker/config.py): the broker has no setting "
                            "'data.dir'")


def broker_with(**settings):
    """The compose broker-1 of the spec, with `settings` (setting name -> value, None drops it) changed."""
    def flags(n):
        out = {**ds.compose_broker(n), **settings}
        return {k: v for k, v in out.items() if v is not None}
    c = next(c for c in ds.SPEC if c.block == "broker-1")
    return dataclasses.replace(c, flags=flags)


BAD = [
    (broker_with(**{"replica.lag.max.ms": 5}),
     "the broker has no setting 'replica.lag.max.ms' (did you mean 'replica.lag.time.max.ms'?)"),
    (broker_with(**{"zk.session.timeout.ms": -5}), "--zk-session-timeout-ms must be at least 1 (got -5)"),
    (broker_with(**{"zk.session.timeout.ms": ds.ComposeVar(default=0)}),
     "--zk-session-timeout-ms must be at least 1 (got 0)"),
    (broker_with(**{"broker.id": ds.Shell("$$(( ${POD_NAME##*-} ))", "x")}), "--broker-id: 'x' is not an integer"),
    (broker_with(**{"advertise": ds.ComposeVar()}), "--advertise has no default to write in ${EOSLAB_ADVERTISE:-...}"),
    (broker_with(**{"data.dir": None}), "--data-dir is required"),
    (broker_with(**{"unknown.producer": "ignore"}), "--unknown-producer: 'ignore' is not one of"),
    (ds.Container(ds.COMPOSE_FILE, "broker-env", "broker", env={"kafka.version": "9.9"}),
     "--kafka-version: '9.9' is not one of"),
]


BAD_IDS = ["unknown-setting", "out-of-range", "default-out-of-range", "not-an-integer", "no-default",
           "required-missing", "not-a-choice", "env-not-a-choice"]


@pytest.mark.parametrize("container,message", BAD, ids=BAD_IDS)
def test_a_bad_spec_is_refused_in_one_line(container, message):
    with pytest.raises(ds.SpecError) as e:
        ds.render([container])
    text = str(e.value)
    assert "\n" not in text and message in text
    assert text.startswith(f"{container.file} {container.block} ({ds.CONFIG_FILES[container.role]}): ")


def test_the_tool_says_so_and_writes_nothing_for_a_bad_spec(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(ds, "SPEC", [broker_with(**{"zk.session.timeout.ms": -5})])
    root = copy_files(tmp_path)
    before = {f: (root / f).read_text() for f in FILES}
    with pytest.raises(ds.SpecError):
        gen_deploy.write(str(root))
    assert {f: (root / f).read_text() for f in FILES} == before
    assert gen_deploy.main(["--check"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gen_deploy: docker-compose.yml broker-1 ")


@pytest.mark.parametrize("text,message", [
    ("a: 1\n", "no '# BEGIN generated: broker-1' block"),
    ("# BEGIN generated: broker-1\n# END generated: broker-1\n# BEGIN generated: broker-1\n"
     "# END generated: broker-1\n", "marked twice"),
    ("# BEGIN generated: broker-9\n# END generated: broker-9\n", "'broker-9' is not in"),
    ("# BEGIN generated: broker-1\ncommand: []\n", "has no '# END generated: broker-1'"),
    ("# END generated: broker-1\n", "without its BEGIN"),
])
def test_markers_must_match_the_spec(text, message):
    blocks = {r.block: r for r in ds.render() if r.block == "broker-1"}
    with pytest.raises(ds.SpecError, match=message.replace("(", r"\(").replace("[", r"\[")):
        gen_deploy.rewrite(ds.COMPOSE_FILE, text, blocks)


def test_every_service_container_of_the_deploy_files_is_generated():
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    compose = {name for name, svc in doc["services"].items()
               if (svc.get("command") or [None])[0] in ds.CONFIG_FILES}
    k8s = set()
    for path in sorted((ROOT / "k8s").glob("*.yaml")):
        for d in yaml.safe_load_all(path.read_text()):
            if d and d.get("kind") in ("StatefulSet", "Deployment", "Job"):
                for c in d["spec"]["template"]["spec"]["containers"]:
                    words = " ".join(c.get("args") or []).split()
                    if words[:2] == ["exec", "eoslab-entrypoint"] and words[2] in ds.CONFIG_FILES:
                        k8s.add((f"k8s/{path.name}", c["name"]))
    spec = {(c.file, c.block) for c in ds.SPEC if c.flags}
    assert {("docker-compose.yml", n) for n in compose} | k8s == spec


def test_the_compose_nodes_are_the_docker_runtime_topology():
    from cluster.docker_runtime import TOPOLOGY
    ours = {(f"{role}-{i}", role, i, octet, ds.PORTS[role])
            for role, nodes in ds.COMPOSE_NODES.items() for i, octet in nodes.items()}
    assert ours == {(name, *t) for name, t in TOPOLOGY.items() if t[0] != "zookeeper"}


def test_the_compose_file_parses_with_the_generated_blocks():
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert doc["services"]["broker-2"]["command"][:3] == ["broker", "--broker-id", "2"]
    assert doc["x-broker-env"]["EOSLAB_KAFKA_VERSION"] == "${EOSLAB_KAFKA_VERSION:-4.0}"
