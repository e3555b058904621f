#!/usr/bin/env python3
"""librdkafka's own broker test suite run against a lab cluster's Kafka listener.

Guarantees: librdkafka is exported from --mirror into <cache>/librdkafka-<commit12>, outside the
repository, and built there once (no SSL, GSSAPI, curl, zstd, external lz4; with rapidjson for the
statistics tests; `nice -n 10 make -j2`), a finished build of the same settings is reused; a
missing build tool or header is named as its Debian package, nothing is installed. Per
--kafka-version a cluster of its own name is started and, also after an error, stopped. Only
broker tests run (-L); `excluded(version)` and `excluded_tests(version)` name every test left out
and why; local, manual and known-issue tests are never started. The tests get a KAFKA_PATH whose
kafka-topics.sh and kafka-acls.sh are the lab's stand-ins (tools/kafka_tools.py) and BROKERS, the
cluster's bootstrap. A test that names a scenario of librdkafka's other than
`default` (tests/scenarios/, e.g. noautocreate) runs in a pass of its own, TEST_SCENARIO set,
on a cluster configured as that scenario's file says. Each test number runs in its own test-runner
under --timeout (or its own longer bound in TIMEOUTS), at most --parallel at once; after --budget
minutes none starts ("not run"). Every selected test gets one of pass, fail, skip, excluded, not
run, a failure or skip with the runner's first failure/skip line, in
<out>/librdkafka-conformance-<version>.json and .md.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIRROR = "/work/.mirror/confluentinc+librdkafka/repo"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from librdkafka_results import ENDED, markdown, parse_output, results_of  # noqa: E402,F401
from librdkafka_tree import describe, header_comment, scenario_broker_args, scenarios, test_table  # noqa: E402,F401
DEFAULT = "default"      # librdkafka's test scenario when TEST_SCENARIO is not set
VERSIONS = {"0.11": "0.11.0.3", "2.5": "2.5.1", "3.0": "3.0.2", "3.6": "3.6.2", "4.0": "4.0.0"}
CONFIGURE = ["--disable-ssl", "--disable-gssapi", "--disable-curl", "--disable-zstd", "--disable-lz4-ext"]
# (command or header, Debian package)
BUILD_DEPS = [("gcc", "gcc"), ("g++", "g++"), ("make", "make"), ("pkg-config", "pkg-config"),
              ("python3", "python3"), ("/usr/include/zlib.h", "zlib1g-dev"),
              # the tests check the statistics JSON with it (0053, 0101, 0110 are skipped without it)
              ("/usr/include/rapidjson/schema.h", "rapidjson-dev")]
BUILT = "with rapidjson"   # what a reusable build's marker says after its commit

# Test numbers left out of a run, with the reason. Local-only tests (TEST_F_LOCAL: the unit
# tests and every *_mock test, e.g. 0105, 0144, 0146) are already skipped by the runner's -L.
_SHARE = "share groups (KIP-932), not served by the lab"
# seconds a test number needs beyond --timeout: 0113's own scripted waits (six variants of
# u_multiple_subscription_changes at 107 s each) take 855 s here; 0081 (the Admin API, with its producer
# and consumer rounds) took 283 s alone on a quiet machine and did not end in 240 s beside other tests
# 0077 waits 20 s or 30 s for the cleaner in each of its five variants, after producing ~25 MB of fill
TIMEOUTS = {"0113": 1500, "0081": 900, "0077": 900}
EXCLUDED = {
    "0097": "needs SSL listeners and certificates",
    "0064": "sets security.protocol=ssl: needs a librdkafka built with OpenSSL",
    "0126": "needs SASL/OAUTHBEARER with an OIDC token endpoint",
    "0135": "needs SASL credentials on the broker",
    "0142": "needs SASL re-authentication (KIP-368)",
    "0016": "needs KAFKA_PATH (Kafka's Java tools, trivup)",
    "0098": "needs Kafka's Java TransactionProducerCli tool",
    **{n: _SHARE for n in ("0170", "0171", "0172", "0173", "0174", "0175", "0176", "0177",
                           "0178", "0179", "0180", "0181", "0184", "0185", "0190")},
}
# single tests left out of a test number that otherwise runs
EXCLUDED_TESTS: dict[str, str] = {}
# kafka-topics.sh and kafka-acls.sh are the lab's stand-ins (tools/kafka_tools.py, under the KAFKA_PATH
# the runner gives the tests): from 3.0 librdkafka's test_kafka_topics passes --bootstrap-server
# (BROKERS), before it --zookeeper (ZK_ADDRESS, the cluster's ZooKeeper, where the stand-in finds the
# brokers' registrations)


def _release(version: str) -> tuple[int, int]:
    return tuple(int(x) for x in version.split(".")[:2])


def excluded(version: str | None = None) -> dict[str, str]:
    """Test numbers left out on `version`, with why."""
    return dict(EXCLUDED)


def excluded_tests(version: str | None = None) -> dict[str, str]:
    return dict(EXCLUDED_TESTS)


def kafka_path(workdir: str) -> str:
    """A KAFKA_PATH whose bin/ holds kafka-topics.sh and kafka-acls.sh calling tools/kafka_tools.py."""
    root = os.path.join(workdir, "kafka-path")
    os.makedirs(os.path.join(root, "bin"), exist_ok=True)
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kafka_tools.py")
    for tool, sub in (("kafka-topics.sh", "topics"), ("kafka-acls.sh", "acls")):
        path = os.path.join(root, "bin", tool)
        open(path, "w").write(f'#!/bin/sh\nexec "{sys.executable}" "{script}" {sub} "$@"\n')
        os.chmod(path, 0o755)
    return root
# A representative spread first: producer, idempotence, transactions, groups, offsets, metadata.
PRIORITY = ["0001", "0012", "0017", "0090", "0103", "0129", "0018", "0113", "0030", "0130",
            "0015", "0031", "0034", "0019", "0035", "0007", "0044", "0081", "0002", "0005"]

RUNNING: set = set()            # test-runner processes now running; killed when the run is interrupted
STOP = threading.Event()        # set on an interruption: no test starts any more


class Usage(Exception):
    """Bad input: reported as one error line, exit status 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, not argparse's usage text
        raise Usage(message)


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def prepare(mirror: str, cache: str) -> tuple[str, str]:
    """Export and build librdkafka and tests/test-runner; returns (source dir, commit)."""
    commit = subprocess.run(["git", "-C", mirror, "rev-parse", "HEAD"], capture_output=True,
                            text=True, check=True).stdout.strip()
    src = os.path.join(os.path.expanduser(cache), f"librdkafka-{commit[:12]}")
    if os.path.realpath(src).startswith(REPO + os.sep):
        raise Usage(f"--cache must be outside the repository: {src}")
    marker = os.path.join(src, ".eoslab-built")
    if reusable(src, commit):
        say(f"reusing build in {src}")
        return src, commit
    if missing := [pkg for what, pkg in BUILD_DEPS if not (os.path.exists(what) if what[0] == "/" else shutil.which(what))]:
        raise Usage("missing build dependencies, install with: apt-get install " + " ".join(missing))
    if not os.path.exists(os.path.join(src, "configure")):
        say(f"exporting librdkafka {commit[:12]} to {src}")
        os.makedirs(src, exist_ok=True)
        archive = subprocess.Popen(["git", "-C", mirror, "archive", commit], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", src], stdin=archive.stdout, check=True)
        if archive.wait():
            raise RuntimeError("git archive failed")
    log = open(os.path.join(src, "eoslab-build.log"), "a")
    for step, cmd, cwd in [("configure", ["./configure", *CONFIGURE], src),
                           ("make libs", ["nice", "-n", "10", "make", "-j2", "libs"], src),
                           ("make clean (tests, built before with other settings)", ["make", "clean"],
                            os.path.join(src, "tests")),
                           ("make test-runner", ["nice", "-n", "10", "make", "-j2", "test-runner"],
                            os.path.join(src, "tests"))]:
        say(f"{step} (log: {log.name})")
        if subprocess.run(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT).returncode:
            raise RuntimeError(f"{step} failed, see {log.name}")
    open(marker, "w").write(f"{commit} {BUILT}\n")
    return src, commit


def reusable(src: str, commit: str) -> bool:
    """A finished build of this commit made with today's settings (an older one lacks rapidjson)."""
    marker = os.path.join(src, ".eoslab-built")
    if not (os.path.exists(os.path.join(src, "tests", "test-runner")) and os.path.exists(marker)):
        return False
    with open(marker) as f:
        return f.read().strip() == f"{commit} {BUILT}"


def broker_tests(table) -> list[tuple[str, str]]:
    return [(n, f) for n, f in table if not re.search(r"TEST_F_(LOCAL|MANUAL)", f)]


# The brokers run Kafka's ZooKeeper ACL authorizer open to everyone where no ACL says otherwise, as
# librdkafka's own test clusters (trivup) run theirs: 0081 creates, describes and deletes ACLs.
AUTHORIZER_ARGS = ["--authorizer-class-name=kafka.security.authorizer.AclAuthorizer",
                   "--allow-everyone-if-no-acl-found=true"]
# Each broker in a rack of its own (RACK<id>) with Kafka's rack-aware replica selector, as trivup sets
# them from 2.4 on (KIP-392): 0101 fetches from a follower in its client.rack.
RACK_ARGS_FROM = (2, 4)
RACK_ARGS = ["--broker-rack=RACK{id}",
             "--replica-selector-class=org.apache.kafka.common.replica.RackAwareReplicaSelector"]


# The log cleaner looks for dirty logs every second, not Kafka's 15 s: 0077 gives it a fixed 20 s window
# (30 s for the larger variants) after its last write, and a 15 s nap could eat most of it.
CLEANER_ARGS = ["--cleaner-backoff-ms=1000"]


def broker_args(tests_dir: str, scenario: str, version: str) -> list[str]:
    racks = RACK_ARGS if _release(version) >= RACK_ARGS_FROM else []
    return scenario_broker_args(tests_dir, scenario) + AUTHORIZER_ARGS + racks + CLEANER_ARGS


def order(numbers, first=PRIORITY) -> list[str]:
    numbers = sorted(set(numbers))
    return [n for n in first if n in numbers] + [n for n in numbers if n not in first]


def test_conf(bootstrap: str, extra: dict | None = None) -> str:
    lines = [f"bootstrap.servers={bootstrap}", "test.timeout.multiplier=2", "test.topic.random=true"]
    lines += [f"{k}={v}" for k, v in (extra or {}).items()]
    return "\n".join(lines) + "\n"


def cluster_up(eoslab: str, name: str, version: str, brokers: int, broker_args: list[str]) -> tuple[str, str]:
    """The cluster's (Kafka bootstrap, ZooKeeper address)."""
    cmd = [eoslab, "cluster", "up", "--runtime", "local", "--name", name, "--brokers", str(brokers),
           "--controllers", "1", "--kafka-version", version, *[f"--broker-arg={a}" for a in broker_args]]
    for _ in range(3):  # a start can fail on a port an orphan of a dead cluster still binds
        say("starting cluster: " + " ".join(cmd[1:]))
        p = subprocess.run(cmd, capture_output=True, text=True)
        if not p.returncode:
            info = json.loads(p.stdout[p.stdout.index("{"):])
            return info["kafka_bootstrap"], info["zookeeper"]
        say(f"cluster up failed: {(p.stderr or p.stdout).strip()[:200]}")
        time.sleep(5)
    raise RuntimeError(f"cluster {name} did not start (3 attempts)")


def cluster_down(eoslab: str, name: str) -> None:
    say(f"stopping cluster {name}")
    subprocess.run([eoslab, "cluster", "down", "--name", name], capture_output=True)


def run_number(src, number, conf_path, version, timeout, logdir, scenario=DEFAULT,
               extra_env: dict | None = None) -> tuple[str, dict, float]:
    env = dict(os.environ, TESTS=number, RDKAFKA_TEST_CONF=conf_path, TEST_KAFKA_VERSION=version,
               TEST_SCENARIO=scenario, LD_LIBRARY_PATH=f"{src}/src:{src}/src-cpp", **(extra_env or {}))
    log = os.path.join(logdir, f"{number}.log")
    t0 = time.monotonic()
    with open(log, "w") as out:
        p = subprocess.Popen(["nice", "-n", "10", "./test-runner", "-L", "-p1"], cwd=f"{src}/tests",
                             env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        RUNNING.add(p)
        try:
            p.wait(timeout=timeout)
            out.write(f"\n### eoslab: test-runner exit code {p.returncode}\n")
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            out.write(f"\n### eoslab: test-runner killed after {timeout}s\n")
        RUNNING.discard(p)
    return number, results_of(open(log, errors="replace").read(), number), time.monotonic() - t0


def run_version(args, src, commit, version) -> dict:
    tests_dir = os.path.join(src, "tests")
    test_c = open(os.path.join(tests_dir, "test.c")).read()
    table = broker_tests(test_table(test_c))
    names = {}
    for name, flags in table:
        if "KNOWN_ISSUE" in flags and "WIN32" not in flags and "OSX" not in flags:
            continue
        names.setdefault(name[:4], []).append(name)
    numbers = order(args.tests or names.keys())
    if unknown := [n for n in numbers if n not in names]:
        raise Usage(f"not broker tests of this librdkafka: {','.join(unknown)}")
    name = f"{args.name}-{version.replace('.', '')}"
    workdir = os.path.join(args.out, f"librdkafka-conformance-{version}")
    os.makedirs(os.path.join(workdir, "logs"), exist_ok=True)
    scen = scenarios(test_c)
    passes = scenario_passes(numbers, names, scen, version)
    per_scenario: dict = {s: {} for s in passes}
    deadline = args.started + args.budget * 60 if args.budget else None
    bootstrap = ""
    for scenario, todo in passes.items():
        if not todo:
            continue
        logs = os.path.join(workdir, logs_dir(scenario))
        if args.from_logs:
            for n in todo:
                log = os.path.join(logs, f"{n}.log")
                if n not in excluded(version) and os.path.exists(log):
                    per_scenario[scenario][n] = results_of(open(log, errors="replace").read(), n)
            say(f"{version}: results read back from {logs}")
        else:
            os.makedirs(logs, exist_ok=True)
            boot = run_tests(args, src, version, todo, workdir, name, deadline, per_scenario[scenario], scenario)
            bootstrap = bootstrap or boot
    if args.from_logs:
        bootstrap = open(os.path.join(workdir, "test.conf")).readline().strip().partition("=")[2]
    rows = rows_of(numbers, names, per_scenario[DEFAULT], tests_dir, scen, per_scenario, version)
    totals = {k: sum(r["result"] == k for r in rows) for k in ("pass", "fail", "skip", "excluded", "not run")}
    report = {"librdkafka_commit": commit, "kafka_version": version, "bootstrap": bootstrap,
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "totals": totals, "tests": rows}
    base = os.path.join(args.out, f"librdkafka-conformance-{version}")
    json.dump(report, open(base + ".json", "w"), indent=1)
    open(base + ".md", "w").write(markdown(rows))
    say(f"{version}: {totals}; wrote {base}.json and {base}.md")
    return report


def bound(number: str, timeout: int) -> int:
    """Seconds test number `number` may run: --timeout, or its own longer bound."""
    return max(timeout, TIMEOUTS.get(number, 0))


def scenario_passes(numbers, names, scen, version=None) -> dict[str, list[str]]:
    """Scenario -> the test numbers its pass runs. A test that names another scenario runs only where
    TEST_SCENARIO is part of that name, so each such scenario gets a pass of its own (on a cluster
    configured as the scenario's file says) for the numbers with a test of it not excluded."""
    passes = {DEFAULT: list(numbers)}
    for other in sorted(s for s in set(scen.values()) if DEFAULT not in s):   # "default,ak23" runs in default
        passes[other] = [n for n in numbers if n not in excluded(version) and any(
            scen.get(t) == other and t not in excluded_tests(version) for t in names[n])]
    return passes


def logs_dir(scenario: str) -> str:
    return "logs" if scenario == DEFAULT else f"logs-{scenario}"


def run_tests(args, src, version, numbers, workdir, name, deadline, per_number, scenario=DEFAULT) -> str:
    if scenario != DEFAULT:
        name = f"{name}-{scenario[:8]}"
    bootstrap, zookeeper = cluster_up(args.eoslab, name, version, args.brokers,
                                      broker_args(os.path.join(src, "tests"), scenario, version))
    try:
        conf = os.path.join(workdir, "test.conf" if scenario == DEFAULT else f"test-{scenario}.conf")
        open(conf, "w").write(test_conf(bootstrap))
        say(f"{version}, scenario {scenario}: {bootstrap}; {len(numbers)} test numbers, test.conf {conf}")
        todo = [n for n in numbers if n not in excluded(version)]
        tools = kafka_path(workdir)
        with cf.ThreadPoolExecutor(max_workers=args.parallel) as pool:
            def job(n):
                if STOP.is_set() or (deadline and time.time() > deadline):
                    return n, None, 0.0
                return run_number(src, n, conf, VERSIONS[version], bound(n, args.timeout),
                                  os.path.join(workdir, logs_dir(scenario)), scenario,
                                  {"KAFKA_PATH": tools, "BROKERS": bootstrap, "ZK_ADDRESS": zookeeper})
            try:
                pending = {pool.submit(job, n) for n in todo}
                while pending:  # a timed wait, so that a signal is handled at once, not when a test ends
                    done, pending = cf.wait(pending, timeout=1, return_when=cf.FIRST_COMPLETED)
                    for n, per_number[n], secs in (f.result() for f in done):
                        if per_number[n] is not None:
                            say(f"{n} ({secs:.0f}s): " + ", ".join(f"{k}={v['result']}" for k, v in sorted(per_number[n].items())))
            except BaseException:   # Ctrl-C or an error: start nothing more, kill what runs
                STOP.set()
                for p in list(RUNNING):
                    try:
                        os.killpg(p.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                raise
    finally:
        cluster_down(args.eoslab, name)
    return bootstrap


def rows_of(numbers, names, per_number, tests_dir, scen=None, per_scenario=None, version=None) -> list[dict]:
    """One row per test; a test that names another scenario takes its result from that scenario's pass
    (per_scenario[scenario]) when one ran."""
    rows, scen = [], scen or {}
    out_numbers, out_tests = excluded(version), excluded_tests(version)
    for n in numbers:
        what = describe(tests_dir, n)
        for tname in names[n]:
            own = (per_scenario or {}).get(scen.get(tname, DEFAULT), {}).get(n)
            if tname in out_tests:
                r = {"result": "excluded", "reason": out_tests[tname]}
            elif n not in out_numbers and own is not None:
                r = dict(own.get(tname, {"result": "skip", "reason": "not started by the runner"}))
                if r["result"] == "pass":
                    r["reason"] = f"in the {scen[tname]} scenario" if tname in scen else ""
            elif n in out_numbers:
                r = {"result": "excluded", "reason": out_numbers[n]}
            elif per_number.get(n) is None:
                r = {"result": "not run", "reason": "budget exhausted or run interrupted"}
            else:
                r = dict(per_number[n].get(tname, {"result": "skip", "reason": "not started by the runner"}))
            if r["result"] == "skip" and own is None and DEFAULT not in scen.get(tname, DEFAULT):
                r["reason"] = f"requires test scenario {scen[tname]}; the run uses the default scenario"
            rows.append({"test": tname, "what": what, **r})
    return rows


def parse_args(argv):
    p = Parser(description=__doc__.splitlines()[0])
    p.add_argument("--kafka-version", action="append", choices=sorted(VERSIONS), dest="versions")
    p.add_argument("--tests", help="comma-separated 4-digit test numbers (default: all broker tests)")
    for flag, kind, default, text in [
            ("--parallel", int, 2, "test numbers run at once"), ("--timeout", int, 300, "seconds per test number"),
            ("--budget", float, 0, "minutes after which no new test starts"), ("--brokers", int, 3, "brokers"),
            ("--out", str, "/tmp", "results directory"), ("--cache", str, "~/.cache/eoslab", "build cache"),
            ("--mirror", str, MIRROR, "librdkafka bare repo"), ("--name", str, "rdk-conf", "cluster name prefix")]:
        p.add_argument(flag, type=kind, default=default, help=text)
    p.add_argument("--from-logs", action="store_true", help="only rebuild the results from an earlier run's logs")
    p.add_argument("--eoslab", default=os.path.join(REPO, ".venv", "bin", "eoslab"))
    a = p.parse_args(argv)
    a.versions = a.versions or ["4.0"]
    if a.tests is not None:
        a.tests = [t.strip() for t in a.tests.split(",") if t.strip()]
        bad = [t for t in a.tests if not re.fullmatch(r"\d{4}", t)]
        if bad or not a.tests:
            raise Usage(f"--tests wants 4-digit test numbers, got {','.join(bad) or 'nothing'}")
    if a.parallel < 1 or a.timeout < 1 or a.brokers < 1 or a.budget < 0:
        raise Usage("--parallel, --timeout and --brokers must be >= 1, --budget >= 0")
    if not os.path.isdir(a.mirror):
        raise Usage(f"no librdkafka snapshot at {a.mirror}")
    a.started = time.time()
    return a


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv=None) -> int:
    for sig in (signal.SIGINT, signal.SIGTERM):  # also when started in the background, where SIGINT is ignored
        signal.signal(sig, _interrupt)
    try:
        args = parse_args(argv)
        os.makedirs(args.out, exist_ok=True)
        src, commit = prepare(args.mirror, args.cache)
        for version in args.versions:
            run_version(args, src, commit, version)
    except Usage as e:
        print(f"librdkafka_conformance: error: {e}", file=sys.stderr)
        return 2
    except (RuntimeError, subprocess.CalledProcessError, OSError, KeyboardInterrupt) as e:
        print(f"librdkafka_conformance: failed: {e or 'interrupted'}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
