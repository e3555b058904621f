"""The command line as a user runs it: cluster up/status/down, produce, consume, bad input."""
import json
import os
import subprocess
import sys
import threading
import uuid

import pytest

pytestmark = pytest.mark.integration
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def eoslab(*args, home, timeout=120):
    env = dict(os.environ, EOSLAB_HOME=home, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "eoslab", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


def test_cluster_up_produce_consume_down(eoslab_home):
    name = f"cli-{uuid.uuid4().hex[:6]}"
    r = eoslab("cluster", "up", "--name", name, "--brokers", "2", "--controllers", "1", home=eoslab_home)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    try:
        assert info["name"] == name and ":" in info["bootstrap"]
        st = eoslab("cluster", "status", "--name", name, "--json", home=eoslab_home)
        nodes = {n["name"]: n for n in json.loads(st.stdout)["nodes"]}
        assert {n["state"] for n in nodes.values()} == {"running"}
        assert len(nodes) == 6   # ZooKeeper, 1 controller, 2 brokers, 2 transaction coordinators (the default)
        r = eoslab("produce", "--bootstrap", info["bootstrap"], "--topic", "cli", "--count", "500",
                   "--partitions", "2", "--idempotent", home=eoslab_home)
        assert r.returncode == 0, r.stderr
        summary = json.loads(r.stdout)
        assert summary["acked"] == 500 and summary["errors"] == {}
        r = eoslab("consume", "--bootstrap", info["bootstrap"], "--topic", "cli", "--json", home=eoslab_home)
        assert r.returncode == 0, r.stderr
        rows = [json.loads(x) for x in r.stdout.splitlines()]
        assert len(rows) == 500 and {x["partition"] for x in rows} == {0, 1}
        assert sorted(int(x["value"].split(":")[0]) for x in rows) == list(range(500))
    finally:
        r = eoslab("cluster", "down", "--name", name, home=eoslab_home)
    assert r.returncode == 0, r.stderr
    pids = [n["pid"] for n in nodes.values()]
    assert not [p for p in pids if os.path.exists(f"/proc/{p}")
                and open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"]


@pytest.mark.parametrize("args,needle", [
    (["produce", "--bootstrap", "127.0.0.1:1", "--topic", "t", "--count", "1", "--connect-timeout", "1"],
     "cannot"),
    (["produce", "--bootstrap", "nonsense", "--topic", "t", "--count", "1"], "HOST:PORT"),
    (["produce", "--bootstrap", "127.0.0.1:1", "--topic", "t", "--count", "-4"], "--count"),
    (["produce", "--bootstrap", "127.0.0.1:1", "--topic", "t", "--count", "1", "--set", "acks=7"], "acks"),
    (["consume", "--bootstrap", "127.0.0.1:1", "--topic", "t", "--json", "--connect-timeout", "1"],
     "cannot reach"),
    (["cluster", "status", "--name", "no-such-cluster"], "no local cluster"),
    (["cluster", "up", "--brokers", "0"], "between 1 and 9"),
    (["cluster", "down", "--name", "../x"], "invalid cluster name"),
])
def test_bad_input_is_one_line_without_traceback(args, needle, eoslab_home):
    r = eoslab(*args, home=eoslab_home, timeout=60)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert needle in lines[0] and "Traceback" not in r.stderr


def test_consume_waits_for_a_broker_that_is_still_starting(make_cluster, eoslab_home):
    rt = make_cluster(brokers=1, controllers=1, txn_coordinators=0)
    boot = rt.bootstrap_all()
    r = eoslab("produce", "--bootstrap", boot, "--topic", "late", "--count", "20", home=eoslab_home)
    assert r.returncode == 0, r.stderr
    rt.kill("broker-1")
    starter = threading.Timer(2.0, rt.start, args=("broker-1",))
    starter.start()
    try:
        r = eoslab("consume", "--bootstrap", boot, "--topic", "late", "--json", "--connect-timeout", "30",
                   home=eoslab_home)
    finally:
        starter.join()
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 20
