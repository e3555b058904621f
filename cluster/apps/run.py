"""`eoslab app run`: the user's application, its cluster and its faults, and the verdict from outside.

Guarantees: one run, in phases, every one recorded in DIR/history.jsonl
(the contract in docs/apps.md) and DIR/run.json ("kind": "app"):
1. a cluster is started (or `--cluster` reused: it must answer first), the
   input and output topics are created, the output's LSO and high watermark
   are sampled through the run (process "monitor");
2. N instances of the command start with cluster.apps.contract's
   environment; the seeder writes `records` unique values at `rate` per
   second; the tail reader watches the output at read_committed;
3. the nemesis plays the schedule (drawn from the seed, or exactly the
   `--schedule` file's, recorded in run.json "schedule") of app faults (cluster.apps.faults)
   and cluster faults (cluster.nemesis_packages) until the time limit;
   an instance that exits by itself is restarted after a backoff, as a
   pod's restart policy would;
4. everything is healed (network rules, paused and dead nodes, every
   instance running and connected), then the run waits until the reader has
   seen every acknowledged input value, or until no new output has come for
   `quiet_s` (at most `drain_timeout_s`);
5. the instances are stopped (SIGTERM, then SIGKILL; none outlives the run),
   the output LSO is given `hang_threshold_s` to settle, the output is read
   whole at read_committed (process "final") and its log audited against
   its markers (cluster.apps.log_audit);
6. the verdict is `eoslab check`'s on that history (checker.kafka.app for
   app histories), which writes results.json and report.html; when the
   brokers counted the app's consumer fetching offsets without
   require_stable while a transaction's offsets were pending (read in step
   5, run.json "unstable_offset_fetches"), both carry a note naming that
   client fault (cluster.apps.client_faults), the verdict unchanged.
Bad input never hangs: a command whose every instance exits within
`STARTUP_S` of starting ends the run at once with "the application exited
with code N at start" (exit 2, results.json verdict "app-error"); no output
`first_output_s` after the first input was acknowledged ends the run's
wait early and is listed in results.json "app_errors" beside the verdict.
Lab errors (a seeder or reader thread that failed, the nemesis failing, a
node down at the end, a node's log) make the verdict lab-error, as `eoslab
run`. A cluster the run started is always torn down.
"""
from __future__ import annotations

import os
import platform
import random
import sys
import time
import traceback
import uuid

import eoslab
from checker.result import EXIT_BAD_INPUT, EXIT_LAB_ERROR, write_results
from cluster import lab_errors as lab
from cluster import nemesis as nem
from cluster.apps.client_faults import attach_notes, client_fault_notes, read_unstable_fetches
from cluster.apps.config import AppRunConfig
from cluster.apps.faults import ALL_PACKAGES
from cluster.apps.instances import AppInstances
from cluster.apps.log_audit import audit
from cluster.apps.seeder import Seeder, TailReader, text
from cluster.offsets_monitor import OffsetsMonitor
from cluster.workloads.base import final_read
from eoslab import kafka_version
from cluster.run_judging import tear_down
from cluster.run_judging import write_meta as _write_meta

STARTUP_S = 5.0            # an instance that exits by itself this soon after starting "exited at start"
RESTART_BACKOFF_S = (1.0, 10.0)    # a self-exited instance is restarted after 1 s, doubling to 10 s
READY_TIMEOUT_S = 60.0
def app_run(cfg: AppRunConfig, log=sys.stderr) -> int:
    """One app run (see the module docstring); returns the exit status of `eoslab run`'s table."""
    from cluster.history import History
    cfg.validate()
    os.makedirs(cfg.out, exist_ok=True)
    events = cfg.events()              # the seed's, or --schedule's
    meta = {"kind": "app", "cmd": cfg.cmd, "instances": cfg.instances, "records": cfg.records, "keys": cfg.keys,
            "rate": cfg.seed_rate, "partitions": cfg.partitions, "input_topic": cfg.input_topic,
            "output_topic": cfg.output_topic, "ordered": cfg.ordered, "nemesis": cfg.nemesis,
            "time_limit": cfg.time_limit, "seed": cfg.seed, "kafka_version": cfg.kafka_version,
            "kafka_behaviour": kafka_version.get(cfg.kafka_version).as_dict(),
            "hang_threshold_s": cfg.hang_threshold_s, "schedule": [e.to_json() for e in events],
            **({"schedule_file": os.path.abspath(cfg.schedule_file)} if cfg.schedule_file else {}),
            "versions": {"eoslab": eoslab.__version__, "python": platform.python_version()},
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    _write_meta(cfg.out, meta)
    run = _AppRun(cfg, events, meta, History(os.path.join(cfg.out, "history.jsonl")), log)
    code = EXIT_LAB_ERROR
    try:
        try:
            run.play()
        except _AppExitedAtStart as e:
            print(f"eoslab: {e}", file=log)
            run.history.close()
            meta["app_errors"] = [str(e)]
            _write_meta(cfg.out, meta)
            write_results(cfg.out, {"verdict": "app-error", "valid": "unknown", "anomalies": {},
                                    "app_errors": [str(e)], "stats": {}})
            return EXIT_BAD_INPUT
        except Exception as e:  # noqa: BLE001 - the run itself failed: a lab error, then clean up
            meta["error"] = f"{type(e).__name__}: {e}"
            print(f"app run failed: {meta['error']}", file=log)
            if run.rt is None:
                _write_meta(cfg.out, meta)
                return EXIT_BAD_INPUT
            run.errors.append(lab.run_error(e, traceback.format_exc()))
        finally:
            if run.apps is not None:
                run.apps.stop_all()
            run.history.close()
        code = run.judge()
    finally:
        tear_down(run.rt, run.own, code, cfg.out)
    return code


class _AppExitedAtStart(Exception):
    pass


class _AppRun:
    def __init__(self, cfg: AppRunConfig, events, meta: dict, history, log):
        self.cfg, self.events, self.meta, self.history, self.log = cfg, events, meta, history, log
        self.rt, self.own, self.apps, self.runner, self.mark = None, False, None, None, None
        self.errors: list[dict] = []
        self.windows: list[dict] = []
        self.healed = False
        self.app_errors: list[str] = []
        self._backoff: dict[int, float] = {}

    def _runtime(self):
        from cluster.local import LocalRuntime
        from cluster.runtimes import open_runtime
        docker = self.cfg.runtime == "docker"
        if self.cfg.cluster:
            rt = open_runtime("docker", self.cfg.cluster) if docker else LocalRuntime.load(self.cfg.cluster)
            if docker and not rt.exists():
                raise ValueError(f"no docker cluster {self.cfg.cluster!r} (project {rt.project}) runs")
            if not rt.info().by_role("txn-coordinator"):
                raise ValueError(f"cluster {self.cfg.cluster!r} has no transaction coordinators")
            return rt, False
        name = f"{'apprun' if docker else 'app'}-{uuid.uuid4().hex[:8]}"    # apprun: not eoslab-app-* containers
        return open_runtime(self.cfg.runtime, name, brokers=3, controllers=2, txn_coordinators=2,
                            kafka_version=self.cfg.kafka_version), True

    def play(self) -> None:
        from clients.admin import create_topic
        from clients.metadata import ClusterMetadata
        cfg, meta, history, log = self.cfg, self.meta, self.history, self.log
        startup = {"package": "startup", "start": time.time(), "end": None, "target": None}
        self.windows.append(startup)
        self.rt, self.own = rt, own = self._runtime()
        meta["runtime_used"] = rt.name
        self.mark = lab.LogMark(rt, whole=own)
        if own:
            print(f"starting a {rt.name} cluster for the app run...", file=log)
            rt.up()
        else:
            rt.wait_ready(READY_TIMEOUT_S)
        boot, info = rt.bootstrap_all(), rt.info()
        suffix = "" if own else f"-{uuid.uuid4().hex[:6]}"
        in_topic, out_topic = cfg.input_topic + suffix, cfg.output_topic + suffix
        meta.update(input_topic=in_topic, output_topic=out_topic, bootstrap=info.kafka_bootstrap)
        md = ClusterMetadata(boot)
        for t in (in_topic, out_topic):
            create_topic(md, t, partitions=cfg.partitions)
        run_id = uuid.uuid4().hex[:8]
        group = f"eoslab-app-{run_id}"
        meta["group"] = group
        _write_meta(cfg.out, meta)
        kind, extra = AppInstances, {}
        if rt.name == "docker":        # containers on the cluster's network: kafka_bootstrap is as they see it
            from cluster.apps.docker_instances import DockerAppInstances
            kind, extra = DockerAppInstances, {"image": cfg.image}
        self.apps = apps = kind(cfg.cmd, cfg.instances, history, cfg.out, bootstrap=info.kafka_bootstrap,
                                input_topic=in_topic, output_topic=out_topic, group=group, run_id=run_id,
                                runtime=rt, cwd=cfg.cwd, **extra)
        ctx = nem.Context(rt, history, out_topic, cfg.partitions, md, random.Random(cfg.seed),
                          transactional_ids=lambda: [f"{group}-{i}" for i in range(cfg.instances)])
        ctx.apps = apps
        ctx.offsets = monitor = OffsetsMonitor(md, history, out_topic, cfg.partitions)
        seeder = Seeder(boot, history, in_topic, cfg.partitions, cfg.records, cfg.keys, cfg.seed_rate)
        reader = TailReader(boot, history, out_topic, cfg.partitions)
        startup["end"] = time.time()
        monitor.start()
        apps.start_all()
        seeder.start()
        reader.start()
        t0 = time.monotonic()
        self.runner = runner = nem.NemesisRunner(ctx, self.events, t0, packages=ALL_PACKAGES)
        runner.start()
        try:
            while time.monotonic() - t0 < cfg.time_limit:
                self._supervise(t0)
                self._first_output(seeder, reader, t0)
                print(_progress(t0, cfg.time_limit, seeder, reader, runner), end="", file=log, flush=True)
                time.sleep(0.5)
        finally:
            print(file=log)
            runner.stopping.set()
            runner.join(60)
            if runner.is_alive():
                self.errors.append({"kind": "nemesis", "message": "the nemesis did not stop its fault within 60 s",
                                    "log": [f"fault in force: {runner.current}"]})
            heal = {"package": "heal", "start": time.time(), "end": None, "target": None}
            self.windows.append(heal)
            nem.final_heal(ctx)
            apps.restore()
            heal["end"] = time.time()
            self.healed = True
        self._drain(seeder, reader, t0)
        seeder.stopping.set()
        seeder.join(30)
        reader.stopping.set()
        reader.join(30)
        for name, t in (("seeder", seeder), ("reader", reader)):
            if getattr(t, "error", None):
                self.errors.append({"kind": "thread", "thread": name, "message": t.error, "log": []})
        print("stopping the instances...", file=log)
        apps.stop_all()
        if not monitor.settle(cfg.hang_threshold_s):
            print(f"the LSO of {out_topic} stayed behind its high watermark for {cfg.hang_threshold_s:.0f} s "
                  "after the instances stopped", file=log)
        monitor.stop()
        n, unstable = final_read(boot, history, {(out_topic, p): f"out-{p}" for p in range(cfg.partitions)},
                                 "read_committed", value_of=text)
        if n == 0:          # an empty output: the final read happened, and found nothing
            history.invoke("final", "poll", [["poll"]])
            history.complete("final", "ok", "poll", [["poll", {}]], final=True, isolation="read_committed")
        meta["unstable_at_final_read"] = unstable
        history.lone("audit", "log-audit", audit(boot, out_topic, cfg.partitions))
        history.lone("audit", "group-offsets", group_offsets(boot, group, in_topic, cfg.partitions))
        try:          # KIP-447: the app's fetches without require_stable the brokers counted (a lower bound)
            meta["unstable_offset_fetches"] = read_unstable_fetches(rt.info(), group)
        except Exception as e:  # noqa: BLE001 - unread: no note, never a false one
            meta["unstable_offset_fetches"] = {"error": f"{type(e).__name__}: {e}"}
        meta.update(seeded=seeder.sent, acknowledged=seeder.acknowledged, output_read=n,
                    incarnations=len(apps.all), app_errors=self.app_errors)
        print(f"final read: {n} output records; {seeder.acknowledged} of {cfg.records} inputs acknowledged",
              file=log)
        md.close()

    def _supervise(self, t0: float) -> None:
        """Restart current incarnations that exited by themselves (a pod's restart policy); stop the run
        when every instance's first incarnation exited at start."""
        apps = self.apps
        apps.reap()
        with apps.lock:
            firsts = [inc for inc in apps.all if inc.number == 0]
            if (len(firsts) == apps.count and all(inc.exited.is_set() and not inc.ended_by_lab for inc in firsts)
                    and len(apps.all) == apps.count
                    and all(inc.exit_code is not None for inc in firsts)):
                inc = firsts[0]
                lived = time.monotonic() - inc.started
                if lived <= STARTUP_S + 1.0:
                    raise _AppExitedAtStart(
                        f"the application exited with code {inc.exit_code} at start ({lived:.1f} s after it "
                        f"started; every instance did): {_last_line(inc.log_path)}")
            now = time.monotonic()
            for i, inc in list(apps.current.items()):
                if not (inc.exited.is_set() and not inc.ended_by_lab):
                    continue
                delay = self._backoff.get(i, RESTART_BACKOFF_S[0])
                if now >= (inc.exited_at or inc.started) + delay:
                    self._backoff[i] = min(delay * 2, RESTART_BACKOFF_S[1])
                    apps.start(i)

    def _first_output(self, seeder, reader, t0: float) -> None:
        if reader.seen or seeder.acknowledged == 0 or self.app_errors:
            return
        since = time.monotonic() - (seeder.first_ack or t0)
        if since > self.cfg.first_output_s:
            self.app_errors.append(f"no output {self.cfg.first_output_s:.0f} s after the first input was "
                                   "acknowledged")
            print(f"\n{self.app_errors[-1]}", file=self.log)

    def _drain(self, seeder, reader, t0: float) -> None:
        """Wait until every acknowledged input has been seen in the output, or the output went quiet."""
        cfg = self.cfg
        healed_at = time.monotonic()
        deadline = healed_at + cfg.drain_timeout_s
        print("healed; waiting for the application to catch up...", file=self.log)
        while time.monotonic() < deadline:
            self._supervise(t0)
            why = drained(time.monotonic(), healed_at, reader.last_seen, cfg.quiet_s,
                          seeding_done=seeder.sent >= cfg.records and not seeder.is_alive(),
                          missing=len(seeder.acked_values - reader.values))
            if why:
                print(why, file=self.log)
                return
            time.sleep(0.5)
        print(f"the application did not catch up within {cfg.drain_timeout_s:.0f} s of the heal", file=self.log)

    def judge(self) -> int:
        from cluster.run_judging import check, write_unjudged
        errors = lab.from_notes(self.history)
        faults = list(self.runner.faults) if self.runner is not None else []
        self.meta["fault_windows"] = faults + self.windows
        if self.runner is not None:
            self.meta["nemesis_errors"] = list(self.runner.errors)
            errors += lab.nemesis_errors(self.runner.errors)
        errors += self.errors
        if self.rt is not None:
            try:
                if self.healed:
                    errors += lab.nodes_down(self.rt, "at the end of the run")
                if self.mark is not None:
                    errors += lab.scan_logs(self.rt, self.mark, faults + self.windows)
            except Exception as e:  # noqa: BLE001
                errors.append(lab.run_error(e, traceback.format_exc()))
        errors = lab.merge(errors)
        self.meta["lab_errors"] = errors
        self.meta["app_errors"] = self.app_errors
        notes = self._client_faults()
        _write_meta(self.cfg.out, self.meta)
        if errors:
            print(f"LAB ERROR: {len(errors)} lab error(s); this run says nothing about the application:",
                  file=self.log)
            for e in errors[:5]:
                print(f"  {e['kind']}: {e['message']}", file=self.log)
        code, why = check(self.cfg.out, self.log)     # run.json's client_faults reach results and report
        if why is None:
            return EXIT_LAB_ERROR if errors else code
        errors = errors + [{"kind": "checker", "message": why, "log": []}]
        self.meta["lab_errors"] = errors
        _write_meta(self.cfg.out, self.meta)
        write_unjudged(self.cfg.out, errors, why)
        attach_notes(self.cfg.out, notes)
        return EXIT_LAB_ERROR

    def _client_faults(self) -> list[dict]:
        """The notes on the app's own client (cluster.apps.client_faults), put in run.json's meta (the
        checker carries them into results.json and report.html, on every re-run too) and the log."""
        notes = client_fault_notes(self.meta.get("unstable_offset_fetches"))
        if notes:
            self.meta["client_faults"] = notes
            for n in notes:
                print(f"client fault: {n['note']}", file=self.log)
        return notes


def drained(now: float, healed_at: float, last_output: float, quiet_s: float, *, seeding_done: bool,
            missing: int) -> str | None:
    """Why the wait after the heal is over, or None: every acknowledged input seen in the output, or no
    new output for quiet_s counted from the later of the heal and the last output (an application
    still held up by the faults gets quiet_s after the heal to resume)."""
    if not seeding_done:
        return None
    if missing == 0:
        return "every acknowledged input is in the output"
    quiet_for = now - max(last_output, healed_at)
    if quiet_for > quiet_s:
        return f"no new output for {quiet_for:.0f} s after the heal: the application is taken as done"
    return None


def group_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict:
    """{"in-<p>": offset} the app's group committed on the input, when it committed anything there ({}
    when it never did: an app with a group of its own), so the checker can tell a record the app
    committed past (lost) from one it never got to (unprocessed)."""
    from clients.consumer import KafkaConsumer
    tps = [(topic, p) for p in range(partitions)]
    c = KafkaConsumer(bootstrap, group_id=group)
    try:
        got = c.group.committed(tps, timeout=10)
    except Exception:  # noqa: BLE001 - not known: the checker does not split lost from unprocessed
        return {}
    finally:
        c.metadata.close()
    out = {f"in-{p}": got.get((topic, p), -1) for _, p in tps}
    return out if any(o >= 0 for o in out.values()) else {}


def _last_line(path: str) -> str:
    try:
        with open(path, "rb") as f:
            lines = [ln.strip() for ln in f.read()[-4096:].decode("utf-8", "replace").splitlines() if ln.strip()]
        return lines[-1] if lines else "(it printed nothing)"
    except OSError:
        return "(no output file)"


def _progress(t0: float, limit: float, seeder, reader, runner) -> str:
    return (f"\r[{time.monotonic() - t0:5.1f}/{limit:.0f}s] input {seeder.acknowledged:>7}  "
            f"output seen {reader.seen:>7}  fault: {runner.current or '-':<16}")
