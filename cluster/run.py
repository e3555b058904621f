"""`eoslab run`: one chaos run: cluster, workload, nemesis, final reads, history, verdict.

Guarantees: DIR/history.jsonl holds every client and nemesis op as it
happened; DIR/run.json holds the configuration, the seed, the fault schedule
(a function of the seed, or --schedule's), versions, what the workload reports beyond the
history, the run's lab errors ("lab_errors", a list, empty when the lab
ran as intended) and the wall-clock windows of its faults, start and final
heal ("fault_windows", what the log rules held log lines against); the
verdict comes from `eoslab check --model kafka` run on the recorded
history (the same checker a user runs by hand; with
--strict-unseen for workloads that ask for it), which reads run.json and
writes DIR/results.json and DIR/report.html, before the cluster goes down:
an invalid or failed run also keeps the nodes' log tails in DIR/logs.
Faults are always healed and a cluster the run started is always torn
down, also on error. The workload comes from cluster.workloads' registry; a
transactional workload gets a cluster with transaction coordinators.
`client` picks who sends and polls: the lab's own client, or a real Kafka
client (confluent-kafka, kafka-python) over the brokers' Kafka listeners,
for the workloads that list it; run.json records the client and its
version. Bad settings are a ValueError from `validate()` before anything
starts. A transactional workload's run also samples each partition's last
stable offset and high watermark (cluster.offsets_monitor: process
"monitor" ops in the history) from the start to the end, waits after the
final reads until the LSO has caught up or "hang_threshold_s" (run.json:
the producers' transaction timeout, the coordinator's abort interval and a
margin) has passed, and the checker reports a `hanging-transaction` for an
LSO that stood that long with no fault in force; run.json's
"transaction_metrics" holds each broker's KIP-664 gauges at the end.

Lab errors (cluster.lab_errors) are never reported as anomalies, nor as a
valid run: a workload or client thread that died with an exception, a
client process that crashed, the nemesis failing, a node not running when
the nemesis had stopped every fault (before the final heal, and again at the
end), a traceback or fatal line in a node's log that no injected fault
explains, ZooKeeper out of reach outside a ZooKeeper fault, any exception
the run raised, and a history the checker could not judge. With any of
them the verdict is lab-error, even when the checker also found anomalies
(results.json lists those as "unconfirmed"); results.json has
"verdict": "lab-error" and "lab_errors": [{"kind", "message", "log": [lines],
"node" | "thread" | "process", ...}], and report.html opens with a banner
saying the verdict is not about Kafka.

Exit status (checker.result.EXIT_STATUS_HELP; `eoslab check` uses the same numbers):
  0  valid      the checker found no anomaly, and the lab ran as intended
  1  anomalies  the checker found anomalies: a verdict about Kafka
  2  error      bad arguments or settings: nothing ran
  3  unknown    the checker ran out of time
  4  lab-error  the lab itself failed, not Kafka (results.json "lab_errors" says why)
"""
from __future__ import annotations

import os
import platform
import random
import sys
import time
import traceback
import uuid
from dataclasses import dataclass, field

import eoslab
from checker.result import EXIT_BAD_INPUT, EXIT_LAB_ERROR, EXIT_STATUS_HELP
from cluster import lab_errors as lab
from cluster import nemesis as nem
from cluster.offsets_monitor import OffsetsMonitor
from cluster.run_judging import check, tear_down, write_unjudged
from cluster.run_judging import write_meta as _write_meta
from cluster.run_settings import RunSettings
from cluster.workloads import WORKLOADS, workload_class
from eoslab import kafka_version

READY_TIMEOUT_S = 60.0                  # a cluster the run uses must serve within this (cluster.readiness)
HANG_MARGIN_S = 5.0                     # the markers' round trip beyond timeout + abort interval
EXIT_STATUS = EXIT_STATUS_HELP          # the table above, as `eoslab run --help` shows it


def runtime_kinds() -> tuple[str, ...]:
    """Runtimes `--runtime` accepts."""
    from cluster.runtimes import RUN_KINDS
    return tuple(RUN_KINDS)


@dataclass
class RunConfig:
    workload: str
    nemesis: list[str]
    time_limit: float
    seed: int
    out: str
    runtime: str = "local"
    cluster: str | None = None                       # use this running cluster instead of starting one
    settings: dict[str, str] = field(default_factory=dict)
    concurrency: int = 4
    partitions: int = 3
    kafka_version: str = kafka_version.DEFAULT        # the Kafka release the cluster and clients behave as
    client: str = "eoslab"                            # or a real Kafka client over the Kafka listeners
    schedule_file: str | None = None                  # play these faults, not the seed's (cluster.run_schedule)

    def validate(self) -> RunSettings:
        """Refuse bad settings with a ValueError before anything starts; the split settings."""
        from clients.producer import ProducerConfig
        from cluster.workloads.base import parse_consumer, parse_options
        if self.workload not in WORKLOADS:
            raise ValueError(f"unknown workload {self.workload!r} (built: {', '.join(WORKLOADS)})")
        for n in self.nemesis:
            if n not in nem.PACKAGES and n != "none":
                raise ValueError(f"unknown fault package {n!r} (known: {', '.join(sorted(nem.PACKAGES))}, none)")
        if not (self.time_limit > 0 and self.time_limit != float("inf")):
            raise ValueError("--time-limit must be a positive, finite number of seconds")
        kafka_version.get(self.kafka_version)
        if self.schedule_file:
            from cluster import run_schedule
            run_schedule.load(self.schedule_file, self.time_limit)
        # a clock fault needs libfaketime and the local runtime
        from cluster import faketime
        faketime.check_run(self)
        if self.runtime not in runtime_kinds():
            raise ValueError(f"runtime {self.runtime!r} is not available (available: {', '.join(runtime_kinds())})")
        from cluster.nemesis_disk import refusal     # the disk packages: the local runtime, FUSE usable here
        if (why := refusal(self)) is not None:
            raise ValueError(why)
        if self.runtime == "k8s" and not self.cluster:
            raise ValueError("the k8s runtime runs on a cluster deployed with `kubectl apply -k k8s/`: "
                             "name its namespace with --cluster (e.g. --cluster eoslab)")
        s = self.split_settings()
        if self.runtime != "local" and s.sets_services_beyond_brokers():
            raise ValueError("controller.* and coordinator.* settings need the local runtime")
        props = dict(s.producer)
        if props.get("transactional.id"):
            raise ValueError("transactional.id is set by the workload, not by --set")
        from cluster.workloads.real_clients import CLIENTS, check_settings
        if self.client not in CLIENTS:
            raise ValueError(f"unknown client {self.client!r} (known: {', '.join(CLIENTS)})")
        served = getattr(workload_class(self.workload), "clients", ("eoslab",))
        if self.client not in served:
            raise ValueError(f"the {self.workload} workload drives {', '.join(served)}, not {self.client}")
        if self.client == "eoslab":
            ProducerConfig.from_props(props)
        else:
            check_settings(self.client, props)
        parse_consumer(s.consumer)
        wl = workload_class(self.workload)
        wl.check_options(parse_options(self.workload, wl.OPTIONS, s.workload))
        from cluster import service_args     # the services' own parsers and the controller's config rules
        service_args.check_topic_configs(s.topic)
        for role, args in (("broker", s.broker_args()), ("txn-coordinator", s.coordinator_args()),
                           ("controller", s.controller_args())):
            service_args.check(role, args)
        return s

    def split_settings(self) -> RunSettings:
        """The settings split by who they configure (cluster.run_settings)."""
        return RunSettings.split(self.settings, self.kafka_version)


def hang_threshold_s(s: RunSettings) -> float:
    """How long a transaction may hold a partition's LSO before the checker calls it hanging: the
    longest transaction timeout the run's producers may have (the workloads' 10 s, or the setting)
    plus the coordinator's abort interval, plus a margin for the markers' round trip."""
    from services.txn_coordinator.config import CoordinatorConfig
    timeout_ms = max(10000, int(s.producer.get("transaction.timeout.ms", 0) or 0))
    coord = CoordinatorConfig.DEF.check_flags(s.coordinator_args())
    interval_ms = coord.get("transaction_check_interval_ms") or \
        coord["transaction_abort_timed_out_transaction_cleanup_interval_ms"]
    return (timeout_ms + interval_ms) / 1000 + HANG_MARGIN_S


def progress(t0: float, time_limit: float, history, runner) -> str:
    c = history.counts
    return (f"\r[{time.monotonic() - t0:5.1f}/{time_limit:.0f}s] ops {history.size:>6}  ok {c['ok']:>5}  "
            f"fail {c['fail']:>4}  info {c['info']:>4}  fault: {runner.current or '-':<20}")


def make_runtime(cfg: RunConfig, wl_cls, s: RunSettings):
    """The runtime the run acts on, and whether the run owns (starts and stops) its cluster."""
    from cluster.local import LocalRuntime
    from cluster.runtimes import choose, open_runtime
    from cluster.nemesis_disk import run_disk      # "lazy" when the run plays a disk package
    coordinators = 2 if wl_cls.transactional else 0
    if cfg.cluster:
        if cfg.runtime == "local":
            rt = LocalRuntime.load(cfg.cluster)
        else:
            rt = open_runtime(cfg.runtime, cfg.cluster)
        if coordinators and not rt.info().by_role("txn-coordinator"):
            raise ValueError(f"cluster {cfg.cluster!r} has no transaction coordinators; the {cfg.workload} "
                             "workload needs them")
        return rt, False
    name = f"run-{uuid.uuid4().hex[:8]}"
    local_extra = {"controller_args": [*wl_cls.controller_args, *s.controller_args()],
                   "txn_coordinator_args": s.coordinator_args(), "disk": run_disk(cfg)}
    kind = choose(cfg.runtime)[0] if cfg.runtime == "auto" else cfg.runtime
    extra = local_extra if kind == "local" else {"kafka_version": cfg.kafka_version, "disk": run_disk(cfg)}
    return open_runtime(kind, name, brokers=3, controllers=2, txn_coordinators=coordinators,
                        broker_args=tuple(s.broker_args()), **extra), True


def run(cfg: RunConfig, log=sys.stderr) -> int:
    """One chaos run (see the module docstring); returns the exit status of the table there."""
    from cluster.history import History
    settings = cfg.validate()
    os.makedirs(cfg.out, exist_ok=True)
    wl_cls = workload_class(cfg.workload)
    from cluster import run_schedule
    events = run_schedule.events(cfg)         # the seed's, or --schedule's
    meta = {"workload": cfg.workload, "nemesis": cfg.nemesis, "time_limit": cfg.time_limit, "seed": cfg.seed,
            "runtime": cfg.runtime, "settings": cfg.settings, "concurrency": cfg.concurrency,
            "partitions": cfg.partitions, "kafka_version": cfg.kafka_version, "client": cfg.client,
            "kafka_behaviour": kafka_version.get(cfg.kafka_version).as_dict(),
            "schedule": [e.to_json() for e in events],
            **({"schedule_file": os.path.abspath(cfg.schedule_file)} if cfg.schedule_file else {}),
            "versions": {"eoslab": eoslab.__version__, "python": platform.python_version()},
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    _write_meta(cfg.out, meta)
    st = _Run(cfg, settings, wl_cls, events, meta, History(os.path.join(cfg.out, "history.jsonl")), log)
    code = EXIT_LAB_ERROR
    try:
        try:
            st.play()
        except Exception as e:  # noqa: BLE001 - the run itself failed: a lab error, then clean up
            meta["error"] = f"{type(e).__name__}: {e}"
            print(f"run failed: {meta['error']}", file=log)
            if st.rt is None:      # no runtime to run on (a cluster or configuration that is not there):
                _write_meta(cfg.out, meta)      # nothing ran, so nothing to judge: an error, not a lab error
                return EXIT_BAD_INPUT
            st.errors.append(lab.run_error(e, traceback.format_exc()))
        finally:
            st.history.close()
        code = st.judge()
    finally:
        tear_down(st.rt, st.own, code, cfg.out)
    return code


class _Run:
    """The state of one run, and its phases: play (cluster, workload, nemesis, heal, final reads), then
    judge (lab errors collected into run.json, then the checker)."""

    def __init__(self, cfg: RunConfig, settings: RunSettings, wl_cls, events, meta: dict, history, log):
        self.cfg, self.settings, self.wl_cls, self.events = cfg, settings, wl_cls, events
        self.meta, self.history, self.log = meta, history, log
        self.rt, self.own, self.runner, self.mark, self.wl = None, False, None, None, None
        self.errors: list[dict] = []             # lab errors found while playing
        self.windows: list[dict] = []            # the cluster's start and the final heal, beside the faults
        self.healed = False

    def play(self) -> None:
        from clients.metadata import ClusterMetadata
        cfg, meta, history, log = self.cfg, self.meta, self.history, self.log
        s = self.settings
        startup = {"package": "startup", "start": time.time(), "end": None, "target": None}
        self.windows.append(startup)
        self.rt, self.own = rt, own = make_runtime(cfg, self.wl_cls, s)
        meta["runtime_used"] = rt.name
        # a clock fault: the run's services start with libfaketime
        from cluster import faketime
        faketime.prepare_run(rt, own, [e.package for e in self.events])
        self.mark = lab.LogMark(rt, whole=own)
        if own:
            print(f"starting a {rt.name} cluster for the run...", file=log)
            rt.up()
        else:       # a cluster someone else's run may just have healed (its brokers re-registering)
            rt.wait_ready(READY_TIMEOUT_S)
        boot = rt.bootstrap_all()
        topic = f"{cfg.workload}-{cfg.seed}" + (f"-{uuid.uuid4().hex[:6]}" if not own else "")
        meta["topic"] = topic
        real = {}
        if cfg.client != "eoslab":
            from cluster.workloads.real_clients import versions
            kboot = getattr(rt.info(), "kafka_bootstrap", "")
            if not kboot:
                raise ValueError(f"the {rt.name} runtime has no Kafka listeners for --client {cfg.client}")
            meta["versions"].update(versions(cfg.client))
            real = {"client": cfg.client, "kafka_bootstrap": kboot}
        wl = self.wl = self.wl_cls(boot, history, cfg.seed, topic=topic, partitions=cfg.partitions,
                                   concurrency=cfg.concurrency, producer_props=s.producer,
                                   topic_configs=s.topic, consumer_props=s.consumer, options=s.workload,
                                   runtime=rt, **real)
        wl.setup()
        md = ClusterMetadata(boot)
        ctx = nem.Context(rt, history, wl.topic, cfg.partitions, md, random.Random(cfg.seed),
                          transactional_ids=wl.transactional_ids)
        t0 = time.monotonic()
        runner = self.runner = nem.NemesisRunner(ctx, self.events, t0)
        startup["end"] = time.time()
        monitor = None
        if self.wl_cls.transactional:            # the LSO and high watermarks, for hanging transactions
            meta["hang_threshold_s"] = hang_threshold_s(s)
            monitor = OffsetsMonitor(md, history, wl.topic, cfg.partitions)
        wl.start()
        runner.start()
        if monitor is not None:
            monitor.start()
        try:
            while time.monotonic() - t0 < cfg.time_limit:
                print(progress(t0, cfg.time_limit, history, runner), end="", file=log, flush=True)
                time.sleep(0.5)
        finally:
            print(file=log)
            runner.stopping.set()
            runner.join(60)
            wl.halt()
            if runner.is_alive():
                self.errors.append({"kind": "nemesis", "message": "the nemesis did not stop its fault within 60 s",
                                    "log": [f"fault in force: {runner.current}"]})
            else:                              # every fault stopped: every node should be running
                self.errors += lab.nodes_down(rt, "when the nemesis had stopped every fault, before the final heal")
            heal = {"package": "heal", "start": time.time(), "end": None, "target": None}
            self.windows.append(heal)
            nem.final_heal(ctx)
            try:                     # the final reads, and the next run on this cluster, need it serving
                rt.wait_ready(READY_TIMEOUT_S)
            except Exception as e:  # noqa: BLE001 - a cluster that does not come back is the lab's failure
                self.errors.append({"kind": "heal", "message": f"the cluster did not serve again within "
                                    f"{READY_TIMEOUT_S:.0f} s of the final heal: {str(e).splitlines()[0]}",
                                    "log": []})
            heal["end"] = time.time()
            self.healed = True
        print("healed; final reads...", file=log)
        n = wl.final_reads()
        print(f"final reads: {n} records; {history.size} ops recorded", file=log)
        if monitor is not None:
            monitor.stop()
            if not monitor.settle(meta["hang_threshold_s"]):
                print(f"the last stable offset of {wl.topic} stayed behind its high watermark for "
                      f"{meta['hang_threshold_s']:.0f} s after the final heal", file=log)
            from cluster.txn_metrics import transaction_metrics
            meta["transaction_metrics"] = transaction_metrics(rt.info())      # KIP-664's gauges at the end
        meta.update(ops=history.size, **wl.notes())
        md.close()

    def collect(self) -> list[dict]:
        """Every lab error of the run: threads and client processes that died (the history's notes),
        the nemesis's errors, nodes down at the end, what the nodes' logs show, the run's own failure."""
        errors = lab.from_notes(self.history)
        faults = list(self.runner.faults) if self.runner is not None else []
        self.meta["fault_windows"] = faults + self.windows      # wall clock: what the log rules held against
        if self.runner is not None:
            self.meta["nemesis_errors"] = list(self.runner.errors)
            errors += lab.nemesis_errors(self.runner.errors)
        run_failed = [e for e in self.errors if e["kind"] == "run"]
        errors += [e for e in self.errors if e["kind"] != "run"]
        if self.rt is not None:
            try:
                if self.healed:
                    errors += lab.nodes_down(self.rt, "at the end of the run")
                if self.mark is not None:
                    errors += lab.scan_logs(self.rt, self.mark, faults + self.windows)
            except Exception as e:  # noqa: BLE001 - what cannot be looked at is itself a lab error
                errors.append(lab.run_error(e, traceback.format_exc()))
        return lab.merge(errors + run_failed)

    def judge(self) -> int:
        """Lab errors into run.json, then the verdict of `eoslab check` (which reads them there)."""
        errors = self.collect()
        self.meta["lab_errors"] = errors
        _write_meta(self.cfg.out, self.meta)
        if errors:
            print(f"LAB ERROR: {len(errors)} lab error(s); this run says nothing about Kafka:", file=self.log)
            for e in errors[:5]:
                where = e.get("node") or e.get("thread") or e.get("process")
                print(f"  {e['kind']}{f' ({where})' if where else ''}: {e['message']}", file=self.log)
        code, why = check(self.cfg.out, self.log, strict_unseen=self.wl_cls.strict_unseen)
        if why is None:
            return EXIT_LAB_ERROR if errors else code
        errors = errors + [{"kind": "checker", "message": why, "log": []}]   # the checker could not judge
        self.meta["lab_errors"] = errors
        _write_meta(self.cfg.out, self.meta)
        write_unjudged(self.cfg.out, errors, why)
        return EXIT_LAB_ERROR
